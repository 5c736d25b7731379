/* Each pulse's echoes in time order for the compiled waveform search (kernels/echo_order.py), in one pass
 * where NumPy's argsort(where(amp > 0, t, inf), axis=1) takes a temporary table and a sort call a row.
 *
 * A row's finite times are put in ascending order, its absent echoes (amp <= 0 or NaN: time +inf) after
 * them: what the search reads of the order (kernels/_waveform_pulses.c) is the finite times' order and
 * which echoes are absent, and the order among the absent ones, which the search never reads, is their
 * column order. Where two finite times are equal, or a time is NaN, NumPy's sort decides the order of the
 * row (its own rule for equal elements): the row is flagged and the caller sorts it with NumPy.
 */
#include "_np_twins.h"

/* echo_order(t f8 (p, e), amp f4 (p, e), order i8 (p, e) out, tied u1 (p) out) -> rows flagged */
static PyObject *echo_order(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[4];
    Py_ssize_t e;
    if (!PyArg_ParseTuple(args, "OOOOn", &o[0], &o[1], &o[2], &o[3], &e)) return NULL;
    if (e < 1 || e > 64) return PyErr_Format(PyExc_ValueError, "echo_order: %zd echoes a pulse (1..64)", e);
    Py_ssize_t p = buf_items(o[3], 1);
    if (p < 0) return NULL;
    Buf b[4];
    memset(b, 0, sizeof b);
    if (buf_get(&b[0], o[0], 0, 'd', 8, p * e, "t") || buf_get(&b[1], o[1], 0, 'f', 4, p * e, "amp") ||
        buf_get(&b[2], o[2], 1, 'q', 8, p * e, "order") || buf_get(&b[3], o[3], 1, 'B', 1, p, "tied")) {
        buf_release(b, 4);
        return NULL;
    }
    const double *T = b[0].view.buf;
    const float *A = b[1].view.buf;
    int64_t *ORD = b[2].view.buf;
    uint8_t *tied = b[3].view.buf;
    Py_ssize_t n_tied = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < p; i++) {
        const double *t = T + i * e;
        const float *a = A + i * e;
        int64_t *ord = ORD + i * e;
        double key[64];
        Py_ssize_t n_fin = 0, n_abs = 0;
        int flag = 0;
        /* finite times first (insertion into ascending order), the absent after them in column order */
        for (Py_ssize_t j = 0; j < e; j++) {
            const double k = a[j] > 0 ? t[j] : INFINITY;
            if (isnan(k)) flag = 1;
            if (!isfinite(k)) continue;
            Py_ssize_t q = n_fin++;
            while (q > 0 && key[q - 1] > k) {
                key[q] = key[q - 1];
                ord[q] = ord[q - 1];
                q--;
            }
            if (q > 0 && key[q - 1] == k) flag = 1;
            key[q] = k;
            ord[q] = j;
        }
        for (Py_ssize_t j = 0; j < e; j++) {
            const double k = a[j] > 0 ? t[j] : INFINITY;
            if (!isfinite(k)) ord[n_fin + n_abs++] = j;
        }
        tied[i] = (uint8_t)flag;
        n_tied += flag;
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 4);
    return PyLong_FromSsize_t(n_tied);
}

static PyMethodDef methods[] = {
    {"echo_order", echo_order, METH_VARARGS, "Each pulse's echoes in time order (see the source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_echo_order", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__echo_order(void) { return PyModule_Create(&module); }
