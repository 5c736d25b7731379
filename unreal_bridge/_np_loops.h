/* NumPy's own element-wise loops of float functions, called from C (kernels/_waveform_pulses.c,
 * rt_lidar/physics/_intensity_chain.c): the inner loop a ufunc such as np.exp runs on a float32 or
 * float64 array (its SIMD code where NumPy chose one for this CPU), taken from the ufunc object once and
 * called on short buffers. Each element is computed on its own, so the values are those np.exp gives
 * on any array holding them, to the bit. Header-only; include after _np_twins.h.
 */
#ifndef RT_LIDAR_NP_LOOPS_H
#define RT_LIDAR_NP_LOOPS_H

typedef void (*NpLoopFn)(char **args, const Py_ssize_t *dims, const Py_ssize_t *steps, void *data);
typedef struct {
    NpLoopFn fn;
    void *data;
} NpLoop;

/* The head of NumPy's PyUFuncObject (numpy/ufuncobject.h), the same since NumPy 1.0. */
typedef struct {
    PyObject_HEAD int nin, nout, nargs;
    int identity;
    NpLoopFn *functions;
    void *const *data;
    int ntypes;
    int reserved1;
    const char *name;
    const char *types;
} NpUFuncHead;

enum { NP_TYPE_FLOAT = 11, NP_TYPE_DOUBLE = 12 };

/* The loop of ufunc `obj` (named `name`, `nin` inputs, one output) whose operands are all of type `code`
 * (NP_TYPE_FLOAT or _DOUBLE): 0, or -1 when `obj` is not that ufunc or has no such loop. */
static inline int np_loop_find_n(PyObject *obj, const char *name, int nin, char code, NpLoop *out) {
    if (strcmp(Py_TYPE(obj)->tp_name, "numpy.ufunc") != 0) return -1;
    const NpUFuncHead *u = (const NpUFuncHead *)obj;
    if (u->nin != nin || u->nout != 1 || u->nargs != nin + 1 || u->name == NULL || strcmp(u->name, name) != 0)
        return -1;
    for (int i = 0; i < u->ntypes; i++) {
        int same = 1;
        for (int k = 0; k <= nin; k++) same = same && u->types[(nin + 1) * i + k] == code;
        if (same) {
            out->fn = u->functions[i];
            out->data = u->data[i];
            return out->fn == NULL ? -1 : 0;
        }
    }
    return -1;
}

/* The one-in, one-out loop of ufunc `obj` named `name` for type `code` (np_loop_find_n). */
static inline int np_loop_find(PyObject *obj, const char *name, char code, NpLoop *out) {
    return np_loop_find_n(obj, name, 1, code, out);
}

/* buf[0 .. n) = f(buf[0 .. n)) in place, items of `item` bytes (as np.exp(a, out=a)). */
static inline void np_loop_run(const NpLoop *l, void *buf, Py_ssize_t n, Py_ssize_t item) {
    if (n <= 0) return;
    char *args[2] = {buf, buf};
    Py_ssize_t dims[1] = {n}, steps[2] = {item, item};
    l->fn(args, dims, steps, l->data);
}

/* out[0 .. n) = f(a[0 .. n), b[0 .. n)) of a two-in loop (as np.hypot(a, b, out=out)). */
static inline void np_loop_run2(const NpLoop *l, void *a, void *b, void *out, Py_ssize_t n, Py_ssize_t item) {
    if (n <= 0) return;
    char *args[3] = {a, b, out};
    Py_ssize_t dims[1] = {n}, steps[3] = {item, item, item};
    l->fn(args, dims, steps, l->data);
}

/* probe(index, buffer, nin) of a module whose loops are `loops[0 .. n)`: run loops[index] in place on the
 * buffer's items (a one-in loop), or on its first and second halves into the first (a two-in loop,
 * nin = 2), so that Python can check the values against the ufunc's own (each module's available()). */
static PyObject *np_loop_probe(const NpLoop *const *loops, const Py_ssize_t *items, int n, PyObject *args) {
    int index, nin;
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "iw*i", &index, &view, &nin)) return NULL;
    PyObject *out = NULL;
    if (index < 0 || index >= n || (nin != 1 && nin != 2) || loops[index]->fn == NULL ||
        view.len % (items[index] * nin) != 0) {
        PyErr_SetString(PyExc_ValueError, "probe: no such loop, or a buffer of another size");
    } else {
        const Py_ssize_t count = view.len / (items[index] * nin);
        char *buf = view.buf;
        if (nin == 1) {
            np_loop_run(loops[index], buf, count, items[index]);
        } else {
            np_loop_run2(loops[index], buf, buf + count * items[index], buf, count, items[index]);
        }
        out = Py_None;
        Py_INCREF(out);
    }
    PyBuffer_Release(&view);
    return out;
}

#endif
