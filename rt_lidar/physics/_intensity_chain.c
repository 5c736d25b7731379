/* The intensity chain of rt_lidar/physics/intensity_chain.py in one pass over the detections
 * (rt_lidar/physics/intensity_fused.py is its Python side): each detection's measured amplitude, the
 * reflectivity scaled by it, the intensity the sensor reports (Velodyne's calibrated reflectivity, read
 * in whole steps of each laser's raw reading where steps are given, the
 * HDL-64E S2's raw 8-bit reading or Ouster's photon counts, quantised) and the SATURATED flag, as SensorPhysics.apply makes them with
 * NumPy. The NumPy code's float32 and float64 operations in its order (built with -ffp-contract=off), and
 * its log10 and expm1 NumPy's own loops (_np_loops.h), so the same bits
 * (tests/rt_lidar/test_intensity_fused.py). Optional extension: where it is missing, NumPy runs.
 */
#include "_np_twins.h"
#include "_np_loops.h"

static NpLoop log10_f, expm1_d;
static int loops_ready = 0;

/* setup(np.log10, np.expm1) -> bool: take their float32 / float64 loops (False if not found). */
static PyObject *setup(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *log10_u, *expm1_u;
    if (!PyArg_ParseTuple(args, "OO", &log10_u, &expm1_u)) return NULL;
    NpLoop a, b;
    if (np_loop_find(log10_u, "log10", NP_TYPE_FLOAT, &a) || np_loop_find(expm1_u, "expm1", NP_TYPE_DOUBLE, &b))
        Py_RETURN_FALSE;
    log10_f = a;
    expm1_d = b;
    loops_ready = 1;
    Py_RETURN_TRUE;
}

static inline float min_np(float a, float b) { return isnan(a) ? a : (isnan(b) ? b : (a < b ? a : b)); }
static inline double min_np64(double a, double b) { return isnan(a) ? a : (isnan(b) ? b : (a < b ? a : b)); }
static inline double clip_np64(double x, double lo, double hi) {
    if (isnan(x)) return x;
    x = x < lo ? lo : x;
    return x > hi ? hi : x;
}

enum { P_SHOT, P_THR, P_SAT, P_KIND, P_DMAX, P_IMAX, P_NEAR, P_CAT, P_SATC, P_STEP, P_WEAK, P_LOG_RETRO, P_FLAG, P_KNEE, P_N };

/* chain(power f4 (M), sigma f8 (P) or None, idx i8 (M), z f8 (M), refl f4 (M), range f4 (M), flags u1 (M),
 *       params f8 (P_N), M, P, refl_out f4, intensity_out f4, flags_out u1 (M each), steps f8 (M) or None)
 *       -> None
 * params: shot_w, threshold, saturation, kind (0 calibrated reflectivity, 1 received power, 2 raw intensity),
 * diffuse max (raw intensity: its gain),
 * intensity max, near-field range (0: none), counts at the threshold, saturation counts (0: none),
 * intensity step, weak-zero SNR, log10 of the retro saturation, the SATURATED flag's bit, the raw
 * intensity's knee (0: linear; above it knee - w expm1((knee - x) / w), w = intensity max - knee). */
static PyObject *chain(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[12];
    Py_ssize_t m, p;
    if (!PyArg_ParseTuple(args, "OOOOOOOOnnOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &m, &p,
                          &o[8], &o[9], &o[10], &o[11]))
        return NULL;
    if (!loops_ready) return PyErr_Format(PyExc_RuntimeError, "chain: setup() did not find NumPy's loops");
    const int noisy = o[1] != Py_None, table = o[11] != Py_None;
    Buf b[12];
    memset(b, 0, sizeof b);
    if (buf_get(&b[0], o[0], 0, 'f', 4, m, "power") || (noisy && buf_get(&b[1], o[1], 0, 'd', 8, p, "sigma")) ||
        (noisy && buf_get(&b[2], o[2], 0, 'q', 8, m, "idx")) || (noisy && buf_get(&b[3], o[3], 0, 'd', 8, m, "z")) ||
        buf_get(&b[4], o[4], 0, 'f', 4, m, "refl") || buf_get(&b[5], o[5], 0, 'f', 4, m, "range") ||
        buf_get(&b[6], o[6], 0, 'B', 1, m, "flags") || buf_get(&b[7], o[7], 0, 'd', 8, P_N, "params") ||
        buf_get(&b[8], o[8], 1, 'f', 4, m, "refl_out") || buf_get(&b[9], o[9], 1, 'f', 4, m, "intensity_out") ||
        buf_get(&b[10], o[10], 1, 'B', 1, m, "flags_out") ||
        (table && buf_get(&b[11], o[11], 0, 'd', 8, m, "steps"))) {
        buf_release(b, 12);
        return NULL;
    }
    const float *pw = b[0].view.buf, *refl = b[4].view.buf, *rng = b[5].view.buf;
    const double *sig = noisy ? b[1].view.buf : NULL, *z = noisy ? b[3].view.buf : NULL, *P = b[7].view.buf;
    const double *steps = table ? b[11].view.buf : NULL;
    const int64_t *idx = noisy ? b[2].view.buf : NULL;
    const uint8_t *flags = b[6].view.buf;
    float *refl_out = b[8].view.buf, *int_out = b[9].view.buf;
    uint8_t *flags_out = b[10].view.buf;
    const int calibrated = P[P_KIND] == 0.0, raw = P[P_KIND] == 2.0, knee = raw && P[P_KNEE] > 0;
    const double knee_w = P[P_IMAX] - P[P_KNEE];
    const float dmax32 = (float)P[P_DMAX];
    const double weak_level = P[P_WEAK] * P[P_THR];
    const uint8_t sat_flag = (uint8_t)P[P_FLAG];
    Py_ssize_t bad = -1;
    double chunk_amp[256], chunk_x[256], chunk_raw[256];
    float chunk_s[256];
    Py_ssize_t bright[256];
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t a0 = 0; a0 < m && bad < 0; a0 += 256) {
        const Py_ssize_t n = m - a0 < 256 ? m - a0 : 256;
        Py_ssize_t nb = 0; /* the bright ones (their log10 is NumPy's, below) */
        for (Py_ssize_t q = 0; q < n; q++) {
            const Py_ssize_t i = a0 + q;
            const double pv = (double)pw[i];
            double amp = pv;
            if (noisy) {
                const int64_t k = idx[i];
                if (k < 0 || k >= p) {
                    bad = i;
                    break;
                }
                const double s = sqrt(sig[k] * sig[k] + P[P_SHOT] * max_np64(pv, 0.0));
                amp = max_np64(pv + s * z[i], P[P_THR]);
            }
            chunk_amp[q] = amp;
            const double gain = pw[i] > 0 ? amp / pv : 1.0;
            const float r32 = (float)((double)refl[i] * gain);
            refl_out[i] = r32;
            if (calibrated) {
                const float s = max_np(r32, 0.0f);
                int_out[i] = min_np(s, 1.0f) * dmax32;
                chunk_s[q] = s;
                if (s > 1.0f) bright[nb++] = q;
            } else if (raw) {
                chunk_raw[q] = max_np64((double)r32, 0.0) * P[P_DMAX];
                if (knee) chunk_x[q] = (P[P_KNEE] - chunk_raw[q]) / knee_w;
            } else if (P[P_NEAR] > 0) {
                const double r = (double)rng[i] / P[P_NEAR];
                chunk_x[q] = -r * r;
            }
        }
        if (bad >= 0) break;
        if (calibrated && nb) { /* bright: log10 of the float32 reflectivity, NumPy's */
            float lg[256];
            for (Py_ssize_t u = 0; u < nb; u++) lg[u] = chunk_s[bright[u]];
            np_loop_run(&log10_f, lg, nb, sizeof(float));
            for (Py_ssize_t u = 0; u < nb; u++) {
                const Py_ssize_t i = a0 + bright[u];
                const double frac = clip_np64((double)lg[u] / P[P_LOG_RETRO], 0.0, 1.0);
                int_out[i] = (float)((P[P_DMAX] + 1.0) + frac * (P[P_IMAX] - P[P_DMAX] - 1.0));
            }
        }
        if (knee || (!calibrated && !raw && P[P_NEAR] > 0)) np_loop_run(&expm1_d, chunk_x, n, sizeof(double));
        for (Py_ssize_t q = 0; q < n; q++) {
            const Py_ssize_t i = a0 + q;
            const double amp = chunk_amp[q];
            double val;
            if (calibrated) {
                val = (double)int_out[i];
                if (steps && val <= P[P_DMAX]) /* the laser's table: whole steps of the raw reading */
                    val = min_np64(nearbyint(val / steps[i]) * steps[i], P[P_DMAX]);
            } else if (raw) {
                const double x = chunk_raw[q];
                val = min_np64(knee && x > P[P_KNEE] ? P[P_KNEE] - knee_w * chunk_x[q] : x, P[P_IMAX]);
            } else {
                double x = amp;
                if (P[P_NEAR] > 0) x = x * -chunk_x[q];
                double counts = clip_np64(x / P[P_THR] * P[P_CAT], 0.0, INFINITY);
                if (P[P_SATC] > 0) counts = counts / (1.0 + counts / P[P_SATC]);
                val = min_np64(counts, P[P_IMAX]);
            }
            if (P[P_STEP] > 0) val = clip_np64(nearbyint(val / P[P_STEP]) * P[P_STEP], P[P_STEP], P[P_IMAX]);
            if (P[P_WEAK] > 0 && amp < weak_level) val = 0.0;
            int_out[i] = (float)val;
            flags_out[i] = flags[i] | (amp > P[P_SAT] ? sat_flag : 0);
        }
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 12);
    if (bad >= 0) return PyErr_Format(PyExc_IndexError, "chain: idx[%zd] is not a pulse", bad);
    Py_RETURN_NONE;
}

/* probe(index, buffer, nin): one of this module's loops run on the buffer (_np_loops.h np_loop_probe) */
static PyObject *probe(PyObject *self, PyObject *args) {
    (void)self;
    static const NpLoop *const loops[] = {&log10_f, &expm1_d};
    static const Py_ssize_t items[] = {4, 8};
    return np_loop_probe(loops, items, 2, args);
}

static PyMethodDef methods[] = {
    {"probe", probe, METH_VARARGS, "Run one of the loops setup() took on a buffer (see _np_loops.h)."},
    {"setup", setup, METH_VARARGS, "Take NumPy's log10 and expm1 loops (see the source)."},
    {"chain", chain, METH_VARARGS, "The intensity chain of a batch's detections (see the source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_intensity_chain", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__intensity_chain(void) { return PyModule_Create(&module); }
