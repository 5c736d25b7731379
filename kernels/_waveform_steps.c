/* Compiled twins of the comparison and bookkeeping steps of kernels.waveform's NumPy code
 * (kernels/waveform_steps.py).
 *
 * After a bucket of clusters is sampled (NumPy's own exp), _bucket_peaks finds each waveform's local
 * maxima at or above the threshold with a few whole-array comparisons and np.nonzero, and the run of
 * samples above the threshold around each with two np.maximum/minimum.accumulate passes over every
 * sample: 40 % of the search's time for what one pass over each row finds. cluster_echoes finds each
 * cluster's first and last echo with a masked min and max over every row per cluster: short rows, where
 * NumPy's reductions cost most. The clusters' samples are gathered and their exponents computed here,
 * their exp left to NumPy, and the echoes added in NumPy's order. Only comparisons, indices and the
 * NumPy code's own float32 and float64 operations here (built with -ffp-contract=off), so every result
 * is the NumPy code's exactly. Optional extension: where it is missing, the NumPy code runs.
 */
#include "_np_twins.h"

/* peak_runs(wave f4 (n, b), threshold, ii i8 out, bi i8 out, lo i8 out, hi i8 out (n * b each)) -> count
 * The samples (ii, bi), in row-major order as np.nonzero gives them, that are at or above the threshold
 * (compared in float32, as NumPy compares a float32 array with a Python float), at least their left
 * neighbour and above their right one (0 beyond either end); lo: the last sample before it below the
 * threshold (-1 if none), hi: the first after it below (b if none). */
static PyObject *peak_runs(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[5];
    Py_ssize_t n, b;
    double threshold;
    if (!PyArg_ParseTuple(args, "OnndOOOO", &o[0], &n, &b, &threshold, &o[1], &o[2], &o[3], &o[4])) return NULL;
    if (n < 0 || b < 1) return PyErr_Format(PyExc_ValueError, "peak_runs: %zd rows of %zd samples", n, b);
    Buf buf[5];
    memset(buf, 0, sizeof buf);
    if (buf_get(&buf[0], o[0], 0, 'f', 4, n * b, "wave") || buf_get(&buf[1], o[1], 1, 'q', 8, n * b, "ii") ||
        buf_get(&buf[2], o[2], 1, 'q', 8, n * b, "bi") || buf_get(&buf[3], o[3], 1, 'q', 8, n * b, "lo") ||
        buf_get(&buf[4], o[4], 1, 'q', 8, n * b, "hi")) {
        buf_release(buf, 5);
        return NULL;
    }
    const float *wave = buf[0].view.buf;
    int64_t *ii = buf[1].view.buf, *bi = buf[2].view.buf, *lo = buf[3].view.buf, *hi = buf[4].view.buf;
    const float thr = (float)threshold;
    Py_ssize_t k = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        const float *w = wave + i * b;
        Py_ssize_t last_below = -1;
        for (Py_ssize_t j = 0; j < b; j++) {
            const float x = w[j];
            if (!(x >= thr)) {
                last_below = j;
                continue;
            }
            const float left = j > 0 ? w[j - 1] : 0.0f, right = j + 1 < b ? w[j + 1] : 0.0f;
            if (!(x >= left && x > right)) continue;
            Py_ssize_t next_below = j + 1;
            while (next_below < b && w[next_below] >= thr) next_below++;
            ii[k] = i;
            bi[k] = j;
            lo[k] = last_below;
            hi[k] = next_below;
            k++;
        }
    }
    Py_END_ALLOW_THREADS
    buf_release(buf, 5);
    return PyLong_FromSsize_t(k);
}

/* clusters(ts f8 (p, e), p, e, gap, span, pad, cid i8 out, start f8 out, spans f8 out (p, e each))
 *   -> (n, width)
 * cluster_echoes' clusters of echo times sorted along each row (what is not finite is no echo, and
 * sorts last): an echo opens a new cluster when it is more than gap after the one before or more than
 * span after its cluster's first; cid (-1: no echo), each cluster's grid start (its first time - pad;
 * NaN for no cluster) and its span (last - first; 0 for no cluster), in columns 0 .. n - 1 of e; n: the
 * most clusters of a row, width: the widest span (0.0 without clusters). The same float64 operations
 * as the NumPy code, so the same values. */
static PyObject *clusters(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[4];
    Py_ssize_t p, e;
    double gap, span, pad;
    if (!PyArg_ParseTuple(args, "OnndddOOO", &o[0], &p, &e, &gap, &span, &pad, &o[1], &o[2], &o[3])) return NULL;
    if (p < 0 || e < 1) return PyErr_Format(PyExc_ValueError, "clusters: %zd rows of %zd echoes", p, e);
    Buf buf[4];
    memset(buf, 0, sizeof buf);
    if (buf_get(&buf[0], o[0], 0, 'd', 8, p * e, "ts") || buf_get(&buf[1], o[1], 1, 'q', 8, p * e, "cid") ||
        buf_get(&buf[2], o[2], 1, 'd', 8, p * e, "start") || buf_get(&buf[3], o[3], 1, 'd', 8, p * e, "spans")) {
        buf_release(buf, 4);
        return NULL;
    }
    const double *ts = buf[0].view.buf;
    int64_t *cid = buf[1].view.buf;
    double *start = buf[2].view.buf, *spans = buf[3].view.buf;
    int64_t most = -1;
    double width = 0.0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < p; i++) {
        const double *t = ts + i * e;
        int64_t *c = cid + i * e;
        double *st = start + i * e, *sp = spans + i * e;
        for (Py_ssize_t j = 0; j < e; j++) {
            st[j] = NAN;
            sp[j] = 0.0;
        }
        int64_t cur = isfinite(t[0]) ? 0 : -1;
        double first = t[0];
        c[0] = cur;
        for (Py_ssize_t j = 1; j < e; j++) {
            const int has = isfinite(t[j]);
            if (has && (t[j] - t[j - 1] > gap || t[j] - first > span)) {
                cur++;
                first = t[j];
            }
            c[j] = has ? cur : -1;
        }
        /* a cluster's echoes are contiguous in time order: its first is its lowest, its last its highest */
        for (Py_ssize_t j = 0; j < e; j++) {
            const int64_t k = c[j];
            if (k < 0) continue;
            const Py_ssize_t a = j;
            while (j + 1 < e && c[j + 1] == k) j++;
            st[k] = t[a] - pad;
            sp[k] = t[j] - t[a];
            if (sp[k] > width) width = sp[k];
            if (k > most) most = k;
        }
    }
    Py_END_ALLOW_THREADS
    buf_release(buf, 4);
    return Py_BuildValue("(nd)", (Py_ssize_t)(most + 1), width);
}

/* members(cid i8 (p, e), p, e, pi i8, ci i8 (n each), first i8 out, count i8 out (n each)) -> most
 * Each cluster (pi, ci)'s first echo column and its number of echoes (its echoes are contiguous), as
 * _bucket_peaks' argmax and sum over cid[pi] == ci find them; most: the largest count. */
static PyObject *members(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[5];
    Py_ssize_t p, e, n;
    if (!PyArg_ParseTuple(args, "OnnnOOOO", &o[0], &p, &e, &n, &o[1], &o[2], &o[3], &o[4])) return NULL;
    Buf buf[5];
    memset(buf, 0, sizeof buf);
    if (buf_get(&buf[0], o[0], 0, 'q', 8, p * e, "cid") || buf_get(&buf[1], o[1], 0, 'q', 8, n, "pi") ||
        buf_get(&buf[2], o[2], 0, 'q', 8, n, "ci") || buf_get(&buf[3], o[3], 1, 'q', 8, n, "first") ||
        buf_get(&buf[4], o[4], 1, 'q', 8, n, "count")) {
        buf_release(buf, 5);
        return NULL;
    }
    const int64_t *cid = buf[0].view.buf, *pi = buf[1].view.buf, *ci = buf[2].view.buf;
    int64_t *first = buf[3].view.buf, *count = buf[4].view.buf;
    int64_t most = 0;
    Py_ssize_t bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        if (pi[i] < 0 || pi[i] >= p) {
            bad = i;
            break;
        }
        const int64_t *row = cid + pi[i] * e;
        int64_t f = -1, c = 0;
        for (Py_ssize_t j = 0; j < e; j++)
            if (row[j] == ci[i]) {
                if (f < 0) f = j;
                c++;
            }
        first[i] = f < 0 ? 0 : f; /* argmax of an all-False row is 0 */
        count[i] = c;
        if (c > most) most = c;
    }
    Py_END_ALLOW_THREADS
    buf_release(buf, 5);
    if (bad >= 0) return PyErr_Format(PyExc_IndexError, "members: pi[%zd] is not a row", bad);
    return PyLong_FromLongLong(most);
}

/* wave_args(t f8 (p, e), amp f4 (p, e), start f8 (n), pi, first, count i8 (n each), p, e, m, b, dt,
 *           coef, arg f4 out (n, m, b), amp_out f4 out (n, m))
 * The exponents of _bucket_peaks' samples: for echo k < m of cluster i (its k-th echo, or none past its
 * count), rel = float32(t - start) (inf for none), amp_out its amplitude (0 for none), and at bin j
 * arg = (coef * d) * d with d = float32(j) * dt - rel, all in float32 as NumPy computes them. */
static PyObject *wave_args(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[8];
    Py_ssize_t p, e, m, b;
    double dt, coef;
    if (!PyArg_ParseTuple(args, "OOOOOOnnnnddOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &p, &e, &m, &b, &dt,
                          &coef, &o[6], &o[7]))
        return NULL;
    Py_ssize_t n = buf_items(o[2], 8);
    if (n < 0) return NULL;
    if (m < 1 || m > e || b < 1) return PyErr_Format(PyExc_ValueError, "wave_args: m %zd of %zd, b %zd", m, e, b);
    Buf buf[8];
    memset(buf, 0, sizeof buf);
    if (buf_get(&buf[0], o[0], 0, 'd', 8, p * e, "t") || buf_get(&buf[1], o[1], 0, 'f', 4, p * e, "amp") ||
        buf_get(&buf[2], o[2], 0, 'd', 8, n, "start") || buf_get(&buf[3], o[3], 0, 'q', 8, n, "pi") ||
        buf_get(&buf[4], o[4], 0, 'q', 8, n, "first") || buf_get(&buf[5], o[5], 0, 'q', 8, n, "count") ||
        buf_get(&buf[6], o[6], 1, 'f', 4, n * m * b, "arg") || buf_get(&buf[7], o[7], 1, 'f', 4, n * m, "amp_out")) {
        buf_release(buf, 8);
        return NULL;
    }
    const double *t = buf[0].view.buf, *start = buf[2].view.buf;
    const float *amp = buf[1].view.buf;
    const int64_t *pi = buf[3].view.buf, *first = buf[4].view.buf, *count = buf[5].view.buf;
    float *arg = buf[6].view.buf, *amp_out = buf[7].view.buf;
    const float dt32 = (float)dt, coef32 = (float)coef;
    Py_ssize_t bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        if (pi[i] < 0 || pi[i] >= p || first[i] < 0 || first[i] + count[i] > e) {
            bad = i;
            break;
        }
        for (Py_ssize_t k = 0; k < m; k++) {
            const int ok = k < count[i];
            const Py_ssize_t col = pi[i] * e + first[i] + k;
            const float rel = ok ? (float)(t[col] - start[i]) : INFINITY;
            amp_out[i * m + k] = ok ? amp[col] : 0.0f;
            float *row = arg + (i * m + k) * b;
            for (Py_ssize_t j = 0; j < b; j++) {
                const float d = (float)j * dt32 - rel;
                row[j] = (coef32 * d) * d;
            }
        }
    }
    Py_END_ALLOW_THREADS
    buf_release(buf, 8);
    if (bad >= 0) return PyErr_Format(PyExc_IndexError, "wave_args: cluster %zd is not in the tables", bad);
    Py_RETURN_NONE;
}

/* wave_sum(g f4 (n, m, b), amp f4 (n, m), n, m, b, wave f4 out (n, b)): wave = (g * amp[:, :, None]).sum(1),
 * the echoes added in order as NumPy adds along that axis. */
static PyObject *wave_sum(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[3];
    Py_ssize_t n, m, b;
    if (!PyArg_ParseTuple(args, "OOnnnO", &o[0], &o[1], &n, &m, &b, &o[2])) return NULL;
    if (n < 0 || m < 1 || b < 1) return PyErr_Format(PyExc_ValueError, "wave_sum: %zd x %zd x %zd", n, m, b);
    Buf buf[3];
    memset(buf, 0, sizeof buf);
    if (buf_get(&buf[0], o[0], 0, 'f', 4, n * m * b, "g") || buf_get(&buf[1], o[1], 0, 'f', 4, n * m, "amp") ||
        buf_get(&buf[2], o[2], 1, 'f', 4, n * b, "wave")) {
        buf_release(buf, 3);
        return NULL;
    }
    const float *g = buf[0].view.buf, *amp = buf[1].view.buf;
    float *wave = buf[2].view.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        float *w = wave + i * b;
        const float *gi = g + i * m * b;
        const float a0 = amp[i * m];
        for (Py_ssize_t j = 0; j < b; j++) w[j] = gi[j] * a0;
        for (Py_ssize_t k = 1; k < m; k++) {
            const float a = amp[i * m + k];
            const float *gk = gi + k * b;
            for (Py_ssize_t j = 0; j < b; j++) w[j] = w[j] + gk[j] * a;
        }
    }
    Py_END_ALLOW_THREADS
    buf_release(buf, 3);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"members", members, METH_VARARGS, "Each cluster's first echo column and echo count (see the source)."},
    {"wave_args", wave_args, METH_VARARGS, "The exponents of the clusters' waveform samples (see the source)."},
    {"wave_sum", wave_sum, METH_VARARGS, "The clusters' waveforms from their samples (see the source)."},
    {"peak_runs", peak_runs, METH_VARARGS, "The waveform's peaks and the runs above the threshold around them."},
    {"clusters", clusters, METH_VARARGS, "cluster_echoes' clusters of sorted echo times (see the source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_waveform_steps", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__waveform_steps(void) { return PyModule_Create(&module); }
