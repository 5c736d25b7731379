/* Compiled twins of the integer steps of kernels.waveform's NumPy peak search (kernels/waveform_steps.py).
 *
 * After a bucket of clusters is sampled (NumPy's own exp), _bucket_peaks finds each waveform's local
 * maxima at or above the threshold with a few whole-array comparisons and np.nonzero, and the run of
 * samples above the threshold around each with two np.maximum/minimum.accumulate passes over every
 * sample: 40 % of the search's time for what one pass over each row finds. Only comparisons and
 * indices here, so every result is the NumPy code's exactly. Optional extension: where it is missing,
 * the NumPy code runs.
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

static PyMethodDef methods[] = {
    {"peak_runs", peak_runs, METH_VARARGS, "The waveform's peaks and the runs above the threshold around them."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_waveform_steps", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__waveform_steps(void) { return PyModule_Create(&module); }
