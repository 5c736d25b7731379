/* The surface texture of a batch of hits in one pass (rt_lidar/physics/texture.py texture_apply and
 * rt_lidar/kernels/texture.py texture_factor; rt_lidar/physics/texture_fused.py is its Python side): the
 * textured rays, their world points, the hash of each point's cube, its log-normal factor, and the
 * echoes scaled by it, with the GIL released. The NumPy code's float64 operations in its order (built
 * with -ffp-contract=off), its wrapping uint64 arithmetic, and its log, cos and exp NumPy's own loops
 * (_np_loops.h), so the same bits (tests/rt_lidar/test_texture_fused.py). Optional extension: where it is
 * missing, the NumPy code runs.
 */
#include "_np_twins.h"
#include "_np_loops.h"

static NpLoop log_d, cos_d, exp_d;
static int loops_ready = 0;

/* setup(np.log, np.cos, np.exp) -> bool: take their float64 loops (False if not found). */
static PyObject *setup(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *u[3];
    if (!PyArg_ParseTuple(args, "OOO", &u[0], &u[1], &u[2])) return NULL;
    NpLoop a, b, c;
    if (np_loop_find(u[0], "log", NP_TYPE_DOUBLE, &a) || np_loop_find(u[1], "cos", NP_TYPE_DOUBLE, &b) ||
        np_loop_find(u[2], "exp", NP_TYPE_DOUBLE, &c))
        Py_RETURN_FALSE;
    log_d = a;
    cos_d = b;
    exp_d = c;
    loops_ready = 1;
    Py_RETURN_TRUE;
}

static const uint64_t M1 = 0xBF58476D1CE4E5B9ULL, M2 = 0x94D049BB133111EBULL, GOLDEN = 0x9E3779B97F4A7C15ULL;

static inline uint64_t mix(uint64_t h) {
    h = h ^ (h >> 30);
    h = h * M1;
    h = h ^ (h >> 27);
    h = h * M2;
    return h ^ (h >> 31);
}

#define CHUNK 256

/* apply(direction f4 (N, 3), range f4 (N), material i2 (N), sigma f8 (M), cell f8 (M), seed i8 (M: uint64 bits), pose f8 (7)
 *       or None, N, M, power f4 (N) in/out, refl f4 (N) in/out) -> textured rays
 * pose: the float32 pose start's position and unit quaternion (wxyz) in float64; None: the sensor frame. */
static PyObject *apply(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[9];
    Py_ssize_t n, m;
    if (!PyArg_ParseTuple(args, "OOOOOOOnnOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &n, &m, &o[7], &o[8]))
        return NULL;
    if (!loops_ready) return PyErr_Format(PyExc_RuntimeError, "apply: setup() did not find NumPy's loops");
    const int posed = o[6] != Py_None;
    Buf b[9];
    memset(b, 0, sizeof b);
    if (buf_get(&b[0], o[0], 0, 'f', 4, 3 * n, "direction") || buf_get(&b[1], o[1], 0, 'f', 4, n, "range") ||
        buf_get(&b[2], o[2], 0, 'h', 2, n, "material") || buf_get(&b[3], o[3], 0, 'd', 8, m, "sigma") ||
        buf_get(&b[4], o[4], 0, 'd', 8, m, "cell") || buf_get(&b[5], o[5], 0, 'q', 8, m, "seed") ||
        (posed && buf_get(&b[6], o[6], 0, 'd', 8, 7, "pose")) || buf_get(&b[7], o[7], 1, 'f', 4, n, "power") ||
        buf_get(&b[8], o[8], 1, 'f', 4, n, "refl")) {
        buf_release(b, 9);
        return NULL;
    }
    const float *D = b[0].view.buf, *R = b[1].view.buf;
    const int16_t *MAT = b[2].view.buf;
    const double *SIG = b[3].view.buf, *CELL = b[4].view.buf, *POSE = posed ? b[6].view.buf : NULL;
    const uint64_t *SEED = (const uint64_t *)b[5].view.buf;
    float *power = b[7].view.buf, *refl = b[8].view.buf;
    static const double shift[3] = {0.3183098861837907, 0.5772156649015329, 0.4142135623730951};
    Py_ssize_t done = 0;
    Py_ssize_t rays[CHUNK];
    double u1[CHUNK], u2[CHUNK];
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t i = 0;
    while (i < n) {
        Py_ssize_t k = 0;
        for (; i < n && k < CHUNK; i++) {
            const int mat = MAT[i];
            if (mat < 0 || mat >= m || !(SIG[mat] > 0) || !isfinite(R[i])) continue;
            const double r = (double)R[i];
            double p[3] = {(double)D[3 * i] * r, (double)D[3 * i + 1] * r, (double)D[3 * i + 2] * r};
            if (POSE != NULL) { /* p0 + quat_rotate(q0 / |q0|, local) */
                const double w = POSE[3], x = POSE[4], y = POSE[5], z = POSE[6];
                const double tx = 2.0 * (y * p[2] - z * p[1]), ty = 2.0 * (z * p[0] - x * p[2]),
                             tz = 2.0 * (x * p[1] - y * p[0]);
                const double q0 = (p[0] + w * tx) + (y * tz - z * ty), q1 = (p[1] + w * ty) + (z * tx - x * tz),
                             q2 = (p[2] + w * tz) + (x * ty - y * tx);
                p[0] = POSE[0] + q0;
                p[1] = POSE[1] + q1;
                p[2] = POSE[2] + q2;
            }
            uint64_t cells[3];
            for (int c = 0; c < 3; c++) cells[c] = (uint64_t)(int64_t)floor(p[c] / CELL[mat] + shift[c]);
            uint64_t h = mix(cells[0] ^ (SEED[mat] * GOLDEN));
            h = mix(h ^ cells[1]);
            h = mix(h ^ cells[2]);
            const uint64_t h2 = mix(h ^ GOLDEN);
            u1[k] = ((double)(h >> 11) + 0.5) / 9007199254740992.0;
            u2[k] = 2.0 * M_PI * ((double)(h2 >> 11) / 9007199254740992.0);
            rays[k++] = i;
        }
        np_loop_run(&log_d, u1, k, sizeof(double));
        np_loop_run(&cos_d, u2, k, sizeof(double));
        for (Py_ssize_t q = 0; q < k; q++) {
            const double s = SIG[MAT[rays[q]]];
            const double z = sqrt(-2.0 * u1[q]) * u2[q];
            u1[q] = s * z - 0.5 * s * s;
        }
        np_loop_run(&exp_d, u1, k, sizeof(double));
        for (Py_ssize_t q = 0; q < k; q++) {
            const float f = (float)u1[q];
            power[rays[q]] *= f;
            refl[rays[q]] *= f;
        }
        done += k;
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 9);
    return PyLong_FromSsize_t(done);
}

/* probe(index, buffer, nin): one of this module's loops run on the buffer (_np_loops.h np_loop_probe) */
static PyObject *probe(PyObject *self, PyObject *args) {
    (void)self;
    static const NpLoop *const loops[] = {&log_d, &cos_d, &exp_d};
    static const Py_ssize_t items[] = {8, 8, 8};
    return np_loop_probe(loops, items, 3, args);
}

static PyMethodDef methods[] = {
    {"probe", probe, METH_VARARGS, "Run one of the loops setup() took on a buffer (see _np_loops.h)."},
    {"setup", setup, METH_VARARGS, "Take NumPy's log, cos and exp loops (see the source)."},
    {"apply", apply, METH_VARARGS, "Scale a batch's echoes by the texture at each hit (see the source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_texture", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__texture(void) { return PyModule_Create(&module); }
