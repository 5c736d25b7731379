/* The echo model's path factor in one compiled pass (rt_lidar.physics.path_factor_fused): clear air's
 * two-way transmission exp(-2 a R) (float32) times the receiver's range law (R / R10)^(2 - n) and its
 * receiver's near-field share read from its focus table (float64 steps, each cast to float32), as
 * EchoModel.path_factor computes them over
 * ~10 NumPy calls per batch. The same operations in the same order and types (NumPy 2's rules: a Python
 * float meets a float32 array as float32); exp and power are NumPy's own loops (_np_loops.h: its SIMD exp
 * and, on AVX-512, SVML's power are not the C library's), power called with the exponent's stride 0 as
 * np.power(array, scalar) calls it. Built with -ffp-contract=off; optional: the NumPy code otherwise.
 */
#include "_np_twins.h"
#include "_np_loops.h"

static NpLoop exp_f, pow_d;
static int loops_ready;

/* setup(np.exp, np.power) -> bool: take their float32 exp and float64 power loops (False if not found). */
static PyObject *setup(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *exp_u, *pow_u;
    if (!PyArg_ParseTuple(args, "OO", &exp_u, &pow_u)) return NULL;
    NpLoop a, b;
    if (np_loop_find(exp_u, "exp", NP_TYPE_FLOAT, &a) || np_loop_find_n(pow_u, "power", 2, NP_TYPE_DOUBLE, &b))
        Py_RETURN_FALSE;
    exp_f = a;
    pow_d = b;
    loops_ready = 1;
    Py_RETURN_TRUE;
}

enum { BLOCK = 512 };

/* receiver_focus._interpolate at one range: x = fmin(fmax(range * inv_dr, 0), m - 1), i = fmin(floor(x),
 * m - 2), a + (x - i) * (b - a) with a, b = row[i], row[i + 1] (NaN reads as 0: fmax). */
static inline double table_read(const double *row, Py_ssize_t m, double inv_dr, double range) {
    const double x = fmin(fmax(range * inv_dr, 0.0), (double)(m - 1));
    const double fi = fmin(floor(x), (double)(m - 2));
    const double t = x - fi;
    const Py_ssize_t k = (Py_ssize_t)fi;
    const double a = row[k], b = row[k + 1];
    return a + t * (b - a);
}

/* path_factor(range f4 (N), out f4 (N), N, c, has_gain, r10, exponent, has_focus, table f8 (M), M, inv_dr)
 * out = exp(float32(c) * range) [* gain], gain = g [* eta] (float32 products):
 *   g = float32(isfinite(p) ? p : 0), p = power(r / r10, exponent), r = maximum(float64(range), 1e-3);
 *   eta = float32(table_read(table, M, inv_dr, float64(range))): the receiver's share (receiver_focus).
 * c = -2 a (a Python float: float32 against the float32 range). */
static PyObject *path_factor(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o_range, *o_out, *o_table;
    Py_ssize_t n, m;
    double c, r10, expo, inv_dr;
    int has_gain, has_focus;
    if (!PyArg_ParseTuple(args, "OOndiddiOnd", &o_range, &o_out, &n, &c, &has_gain, &r10, &expo, &has_focus,
                          &o_table, &m, &inv_dr))
        return NULL;
    if (!loops_ready) return PyErr_Format(PyExc_RuntimeError, "path_factor: setup() did not find NumPy's loops");
    if (m < 2) return PyErr_Format(PyExc_ValueError, "path_factor: the focus table needs 2 ranges or more");
    Buf br = {0}, bo = {0}, bt = {0};
    PyObject *ret = NULL;
    if (buf_get(&br, o_range, 0, 'f', 4, n, "range") || buf_get(&bo, o_out, 1, 'f', 4, n, "out") ||
        buf_get(&bt, o_table, 0, 'd', 8, m, "table"))
        goto done;
    {
        const double *table = bt.view.buf;
        const float *range = br.view.buf;
        float *out = bo.view.buf;
        const float cf = (float)c;
        float x[BLOCK];
        double r[BLOCK], q[BLOCK], p[BLOCK];
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t start = 0; start < n; start += BLOCK) {
            const Py_ssize_t nb = n - start < BLOCK ? n - start : BLOCK;
            const float *rg = range + start;
            for (Py_ssize_t i = 0; i < nb; i++) x[i] = cf * rg[i];
            np_loop_run(&exp_f, x, nb, sizeof(float));
            if (!has_gain && !has_focus) {
                memcpy(out + start, x, (size_t)nb * sizeof(float));
                continue;
            }
            for (Py_ssize_t i = 0; i < nb; i++) r[i] = max_np64((double)rg[i], 1e-3);
            if (has_gain) {
                for (Py_ssize_t i = 0; i < nb; i++) q[i] = r[i] / r10;
                char *pargs[3] = {(char *)q, (char *)&expo, (char *)p};
                Py_ssize_t dims[1] = {nb}, steps[3] = {sizeof(double), 0, sizeof(double)};
                pow_d.fn(pargs, dims, steps, pow_d.data);
            }
            for (Py_ssize_t i = 0; i < nb; i++) {
                float gain = 1.0f;
                if (has_gain) gain = isfinite(p[i]) ? (float)p[i] : 0.0f;
                if (has_focus) {
                    const float eta = (float)table_read(table, m, inv_dr, (double)rg[i]);
                    gain = has_gain ? gain * eta : eta;
                }
                out[start + i] = x[i] * gain;
            }
        }
        Py_END_ALLOW_THREADS
    }
    ret = Py_None;
    Py_INCREF(ret);
done:
    if (br.held) PyBuffer_Release(&br.view);
    if (bo.held) PyBuffer_Release(&bo.view);
    if (bt.held) PyBuffer_Release(&bt.view);
    return ret;
}

/* beam_focus(range f4 (N), ring u2 (N), table f8 (M * K), out f4 (N), N, M, K, inv_dr) -> bool
 * receiver_focus.beam_focus_ratio as float32: each ring's row of K ranges in the table (M rings), read
 * with table_read. False (nothing written past the bad ring) when a ring is past the table: np.take raises
 * there, the caller runs the NumPy code. */
static PyObject *beam_focus(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[4];
    Py_ssize_t n, m, k;
    double inv_dr;
    if (!PyArg_ParseTuple(args, "OOOOnnnd", &o[0], &o[1], &o[2], &o[3], &n, &m, &k, &inv_dr)) return NULL;
    if (k < 2) return PyErr_Format(PyExc_ValueError, "beam_focus: each row needs 2 ranges or more");
    Buf b[4];
    memset(b, 0, sizeof b);
    PyObject *ret = NULL;
    if (buf_get(&b[0], o[0], 0, 'f', 4, n, "range") || buf_get(&b[1], o[1], 0, 'H', 2, n, "ring") ||
        buf_get(&b[2], o[2], 0, 'd', 8, m * k, "table") || buf_get(&b[3], o[3], 1, 'f', 4, n, "out"))
        goto done;
    {
        const float *range = b[0].view.buf;
        const uint16_t *ring = b[1].view.buf;
        const double *table = b[2].view.buf;
        float *out = b[3].view.buf;
        int ok = 1;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++) {
            if ((Py_ssize_t)ring[i] >= m) {
                ok = 0;
                break;
            }
            out[i] = (float)table_read(table + (Py_ssize_t)ring[i] * k, k, inv_dr, (double)range[i]);
        }
        Py_END_ALLOW_THREADS
        ret = PyBool_FromLong(ok);
    }
done:
    buf_release(b, 4);
    return ret;
}

/* probe(index, buffer, nin): one of this module's loops run on the buffer (_np_loops.h np_loop_probe) */
static PyObject *probe(PyObject *self, PyObject *args) {
    (void)self;
    static const NpLoop *const loops[] = {&exp_f, &pow_d};
    static const Py_ssize_t items[] = {4, 8};
    return np_loop_probe(loops, items, 2, args);
}

static PyMethodDef methods[] = {
    {"probe", probe, METH_VARARGS, "Run one of the loops setup() took on a buffer (see _np_loops.h)."},
    {"setup", setup, METH_VARARGS, "Take NumPy's exp and power loops (see the source)."},
    {"beam_focus", beam_focus, METH_VARARGS, "Each laser's own focus against the preset's (see the source)."},
    {"path_factor", path_factor, METH_VARARGS, "The path factor of a batch's ranges (see the source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_path_factor", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__path_factor(void) { return PyModule_Create(&module); }
