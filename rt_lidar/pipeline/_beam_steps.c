/* The sub-rays of a bundle in one pass (rt_lidar/pipeline/beam_steps.py is its Python side): each
 * pulse's beam frame, its sub-ray directions (sensor/beam.py subray_directions) and, with an exit
 * aperture, their start points rotated into the world (exit_offsets and pose.quat_rotate), with the
 * pose repeated for every sub-ray, as WorldSource.beam_hits makes them with NumPy. The same float64
 * operations in the same order (np.linalg.norm's sum of three squares adds them left to right, np.cross
 * subtracts the second product from the first; built with -ffp-contract=off), so the same bits
 * (tests/rt_lidar/test_beam_steps.py). Optional extension: where it is missing, the NumPy code runs.
 */
#include "_np_twins.h"

/* The beam frame of a nominal direction d (_beam_frame): h = z x d normalised (y for a vertical beam),
 * v = d x h; f = {h0, h1, h2, v0, v1, v2}. */
static inline void beam_frame(double d0, double d1, double d2, double *f) {
    double h0 = -d1, h1 = d0, h2 = 0.0;
    const double hn = sqrt((h0 * h0 + h1 * h1) + h2 * h2);
    if (hn < 1e-9) {
        h0 = 0.0;
        h1 = 1.0;
        h2 = 0.0;
    }
    const double hn2 = sqrt((h0 * h0 + h1 * h1) + h2 * h2);
    h0 /= hn2;
    h1 /= hn2;
    h2 /= hn2;
    f[0] = h0;
    f[1] = h1;
    f[2] = h2;
    f[3] = d1 * h2 - d2 * h1;
    f[4] = d2 * h0 - d0 * h2;
    f[5] = d0 * h1 - d1 * h0;
}

/* Sub-ray k of the pulse of nominal direction d (its beam frame f), pose pp / pq, into row r of the outputs. */
static inline void sub_ray(const double *d, const double *f, const double *pp, const double *pq, const double *th,
                           const double *tv, const double *oh, const double *ov, Py_ssize_t k, int nominal_exact,
                           int with_exit, Py_ssize_t r, float *dir_out, double *pos_out, double *quat_out) {
    const double d0 = d[0], d1 = d[1], d2 = d[2];
    const double h0 = f[0], h1 = f[1], h2 = f[2], v0 = f[3], v1 = f[4], v2 = f[5];
    const double w = pq[0], x = pq[1], y = pq[2], z = pq[3];
    double o0 = (d0 + th[k] * h0) + tv[k] * v0;
    double o1 = (d1 + th[k] * h1) + tv[k] * v1;
    double o2 = (d2 + th[k] * h2) + tv[k] * v2;
    const double nrm = sqrt((o0 * o0 + o1 * o1) + o2 * o2);
    o0 /= nrm;
    o1 /= nrm;
    o2 /= nrm;
    if (nominal_exact && k == 0) {
        o0 = d0;
        o1 = d1;
        o2 = d2;
    }
    dir_out[3 * r] = (float)o0;
    dir_out[3 * r + 1] = (float)o1;
    dir_out[3 * r + 2] = (float)o2;
    for (int c = 0; c < 4; c++) quat_out[4 * r + c] = pq[c];
    if (!with_exit) {
        for (int c = 0; c < 3; c++) pos_out[3 * r + c] = pp[c];
        return;
    }
    /* exit_offsets, then quat_rotate: v + w t + u x t with t = 2 u x v */
    const double ex = oh[k] * h0 + ov[k] * v0, ey = oh[k] * h1 + ov[k] * v1, ez = oh[k] * h2 + ov[k] * v2;
    const double tx = 2.0 * (y * ez - z * ey), ty = 2.0 * (z * ex - x * ez), tz = 2.0 * (x * ey - y * ex);
    pos_out[3 * r] = pp[0] + ((ex + w * tx) + (y * tz - z * ty));
    pos_out[3 * r + 1] = pp[1] + ((ey + w * ty) + (z * tx - x * tz));
    pos_out[3 * r + 2] = pp[2] + ((ez + w * tz) + (x * ty - y * tx));
}

/* bundle_rays(d f4 (P, 3), th, tv, oh, ov f8 (N each), pos f8 (P, 3), quat f8 (P, 4), P, N, nominal_exact,
 *             with_exit, dir_out f4 (P * N, 3), pos_out f8 (P * N, 3), quat_out f8 (P * N, 4))
 * th, tv: tan of the sub-rays' horizontal and vertical offsets; oh, ov: their exit offsets (m);
 * nominal_exact: sub-ray 0 is the nominal ray itself; with_exit: start points across the aperture. */
static PyObject *bundle_rays(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[10];
    Py_ssize_t p, n;
    int nominal_exact, with_exit;
    if (!PyArg_ParseTuple(args, "OOOOOOOnniiOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &p, &n,
                          &nominal_exact, &with_exit, &o[7], &o[8], &o[9]))
        return NULL;
    if (p < 0 || n < 1) return PyErr_Format(PyExc_ValueError, "bundle_rays: %zd pulses of %zd sub-rays", p, n);
    Buf b[10];
    memset(b, 0, sizeof b);
    if (buf_get(&b[0], o[0], 0, 'f', 4, 3 * p, "d") || buf_get(&b[1], o[1], 0, 'd', 8, n, "th") ||
        buf_get(&b[2], o[2], 0, 'd', 8, n, "tv") || buf_get(&b[3], o[3], 0, 'd', 8, n, "oh") ||
        buf_get(&b[4], o[4], 0, 'd', 8, n, "ov") || buf_get(&b[5], o[5], 0, 'd', 8, 3 * p, "pos") ||
        buf_get(&b[6], o[6], 0, 'd', 8, 4 * p, "quat") || buf_get(&b[7], o[7], 1, 'f', 4, 3 * p * n, "dir_out") ||
        buf_get(&b[8], o[8], 1, 'd', 8, 3 * p * n, "pos_out") ||
        buf_get(&b[9], o[9], 1, 'd', 8, 4 * p * n, "quat_out")) {
        buf_release(b, 10);
        return NULL;
    }
    const float *D = b[0].view.buf;
    const double *th = b[1].view.buf, *tv = b[2].view.buf, *oh = b[3].view.buf, *ov = b[4].view.buf;
    const double *POS = b[5].view.buf, *Q = b[6].view.buf;
    float *dir_out = b[7].view.buf;
    double *pos_out = b[8].view.buf, *quat_out = b[9].view.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < p; i++) {
        const double d[3] = {D[3 * i], D[3 * i + 1], D[3 * i + 2]};
        double f[6];
        beam_frame(d[0], d[1], d[2], f);
        for (Py_ssize_t k = 0; k < n; k++)
            sub_ray(d, f, POS + 3 * i, Q + 4 * i, th, tv, oh, ov, k, nominal_exact, with_exit, i * n + k, dir_out,
                    pos_out, quat_out);
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 10);
    Py_RETURN_NONE;
}

/* bundle_rows(d f4 (P, 3), th, tv, oh, ov f8 (N each), pos f8 (P, 3), quat f8 (P, 4), pulse i8 (R,),
 *             sub i8 (R,), P, N, R, nominal_exact, with_exit, dir_out f4 (R, 3), pos_out f8 (R, 3),
 *             quat_out f8 (R, 4)): rows pulse[j] * N + sub[j] of what bundle_rays gives, and only those. */
static PyObject *bundle_rows(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[12];
    Py_ssize_t p, n, m;
    int nominal_exact, with_exit;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOnnniiOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7],
                          &o[8], &p, &n, &m, &nominal_exact, &with_exit, &o[9], &o[10], &o[11]))
        return NULL;
    if (p < 0 || n < 1 || m < 0)
        return PyErr_Format(PyExc_ValueError, "bundle_rows: %zd rows of %zd pulses of %zd sub-rays", m, p, n);
    Buf b[12];
    memset(b, 0, sizeof b);
    if (buf_get(&b[0], o[0], 0, 'f', 4, 3 * p, "d") || buf_get(&b[1], o[1], 0, 'd', 8, n, "th") ||
        buf_get(&b[2], o[2], 0, 'd', 8, n, "tv") || buf_get(&b[3], o[3], 0, 'd', 8, n, "oh") ||
        buf_get(&b[4], o[4], 0, 'd', 8, n, "ov") || buf_get(&b[5], o[5], 0, 'd', 8, 3 * p, "pos") ||
        buf_get(&b[6], o[6], 0, 'd', 8, 4 * p, "quat") || buf_get(&b[7], o[7], 0, 'q', 8, m, "pulse") ||
        buf_get(&b[8], o[8], 0, 'q', 8, m, "sub") || buf_get(&b[9], o[9], 1, 'f', 4, 3 * m, "dir_out") ||
        buf_get(&b[10], o[10], 1, 'd', 8, 3 * m, "pos_out") || buf_get(&b[11], o[11], 1, 'd', 8, 4 * m, "quat_out")) {
        buf_release(b, 12);
        return NULL;
    }
    const float *D = b[0].view.buf;
    const double *th = b[1].view.buf, *tv = b[2].view.buf, *oh = b[3].view.buf, *ov = b[4].view.buf;
    const double *POS = b[5].view.buf, *Q = b[6].view.buf;
    const long long *PULSE = b[7].view.buf, *SUB = b[8].view.buf;
    for (Py_ssize_t j = 0; j < m; j++)
        if (PULSE[j] < 0 || PULSE[j] >= p || SUB[j] < 0 || SUB[j] >= n) {
            buf_release(b, 12);
            return PyErr_Format(PyExc_IndexError, "bundle_rows: row %zd (pulse %lld, sub-ray %lld) out of range", j,
                                PULSE[j], SUB[j]);
        }
    float *dir_out = b[9].view.buf;
    double *pos_out = b[10].view.buf, *quat_out = b[11].view.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t j = 0; j < m; j++) {
        const Py_ssize_t i = (Py_ssize_t)PULSE[j];
        const double d[3] = {D[3 * i], D[3 * i + 1], D[3 * i + 2]};
        double f[6];
        beam_frame(d[0], d[1], d[2], f);
        sub_ray(d, f, POS + 3 * i, Q + 4 * i, th, tv, oh, ov, (Py_ssize_t)SUB[j], nominal_exact, with_exit, j,
                dir_out, pos_out, quat_out);
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 12);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"bundle_rays", bundle_rays, METH_VARARGS, "A bundle's sub-ray directions and start points (see the source)."},
    {"bundle_rows", bundle_rows, METH_VARARGS, "Chosen rows of bundle_rays' output, alone (see the source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_beam_steps", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__beam_steps(void) { return PyModule_Create(&module); }
