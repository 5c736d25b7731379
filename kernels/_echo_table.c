/* The echo tables of the waveform search (kernels/echo_table.py), each in one pass:
 *
 * - gated_tables: a frame's (pulse, echo) tables of round-trip times and heights from its columns of
 *   ranges and heights (physics/returns.py's concatenation, range gate, where and time conversion);
 * - echo_order: each pulse's echoes in time order for the compiled search (kernels/_waveform_pulses.c),
 *   where NumPy's argsort(where(amp > 0, t, inf), axis=1) takes a temporary table and a sort call a row.
 *
 * echo_order:
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

#define MAX_COLS 32

/* gated_tables(ranges (sequence of f4 buffers), heights (the same number of f4 buffers), widths i8 (k),
 *              p, min_m, max_m, c_m_per_ns, t_out f8 (p, e), amp_out f4 (p, e)) with e = sum(widths)
 * Column block k holds widths[k] values a pulse (ranges[k] and heights[k]: p * widths[k] values, pulse-major),
 * laid side by side in each row of the tables. An echo is gated in when its range is finite and within
 * [min_m, max_m] (float32, as NumPy compares a float32 array with a Python float): its time is
 * (double(range) * 2) / c_m_per_ns and its height kept; else the time is inf and the height 0. */
static PyObject *gated_tables(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ranges, *heights, *wobj, *tobj, *aobj;
    Py_ssize_t p;
    double min_m, max_m, c;
    if (!PyArg_ParseTuple(args, "OOOndddOO", &ranges, &heights, &wobj, &p, &min_m, &max_m, &c, &tobj, &aobj))
        return NULL;
    PyObject *rs = PySequence_Fast(ranges, "gated_tables: ranges must be a sequence");
    if (rs == NULL) return NULL;
    PyObject *hs = PySequence_Fast(heights, "gated_tables: heights must be a sequence");
    if (hs == NULL) {
        Py_DECREF(rs);
        return NULL;
    }
    const Py_ssize_t k = PySequence_Fast_GET_SIZE(rs);
    Buf b[2 * MAX_COLS + 3];
    memset(b, 0, sizeof b);
    Py_ssize_t n_held = 0, e = 0;
    int ok = k >= 1 && k <= MAX_COLS && PySequence_Fast_GET_SIZE(hs) == k;
    if (!ok) PyErr_Format(PyExc_ValueError, "gated_tables: 1..%d blocks of ranges and heights, got %zd", MAX_COLS, k);
    const int64_t *w = NULL;
    if (ok && buf_get(&b[0], wobj, 0, 'q', 8, k, "widths") == 0) {
        n_held = 1;
        w = b[0].view.buf;
        for (Py_ssize_t j = 0; j < k && ok; j++) {
            if (w[j] < 1) {
                PyErr_Format(PyExc_ValueError, "gated_tables: block %zd has %lld values a pulse", j, (long long)w[j]);
                ok = 0;
                break;
            }
            e += w[j];
            if (buf_get(&b[1 + 2 * j], PySequence_Fast_GET_ITEM(rs, j), 0, 'f', 4, p * w[j], "ranges") ||
                buf_get(&b[2 + 2 * j], PySequence_Fast_GET_ITEM(hs, j), 0, 'f', 4, p * w[j], "heights"))
                ok = 0;
            n_held = 3 + 2 * j;
        }
        if (ok && (buf_get(&b[1 + 2 * k], tobj, 1, 'd', 8, p * e, "t_out") ||
                   buf_get(&b[2 + 2 * k], aobj, 1, 'f', 4, p * e, "amp_out")))
            ok = 0;
        n_held = 3 + 2 * k;
    } else {
        ok = 0;
    }
    if (ok) {
        double *T = b[1 + 2 * k].view.buf;
        float *A = b[2 + 2 * k].view.buf;
        const float lo = (float)min_m, hi = (float)max_m;
        Py_BEGIN_ALLOW_THREADS
        Py_ssize_t off = 0;
        for (Py_ssize_t j = 0; j < k; j++) {
            const float *r = b[1 + 2 * j].view.buf, *a = b[2 + 2 * j].view.buf;
            const Py_ssize_t wj = w[j];
            for (Py_ssize_t i = 0; i < p; i++)
                for (Py_ssize_t q = 0; q < wj; q++) {
                    const float x = r[i * wj + q];
                    const Py_ssize_t at = i * e + off + q;
                    if (isfinite(x) && x >= lo && x <= hi) {
                        double t = (double)x;
                        t *= 2.0;
                        t /= c;
                        T[at] = t;
                        A[at] = a[i * wj + q];
                    } else {
                        T[at] = INFINITY;
                        A[at] = 0.0f;
                    }
                }
            off += wj;
        }
        Py_END_ALLOW_THREADS
    }
    buf_release(b, (int)n_held);
    Py_DECREF(rs);
    Py_DECREF(hs);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"gated_tables", gated_tables, METH_VARARGS, "A frame's gated echo tables of times and heights (see the source)."},
    {"echo_order", echo_order, METH_VARARGS, "Each pulse's echoes in time order (see the source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_echo_table", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__echo_table(void) { return PyModule_Create(&module); }
