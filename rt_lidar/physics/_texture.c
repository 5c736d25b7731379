/* The surface texture of a batch of hits in one pass (rt_lidar/physics/texture.py texture_apply and
 * rt_lidar/kernels/texture.py texture_factor; rt_lidar/physics/texture_fused.py is its Python side): the
 * textured rays, their world points and footprints, the hash of each footprint-scale cube and of the
 * patches' lattice corners (an Irwin-Hall value each, no log or cos), the log-normal factor, and the
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
#define MAX_OCTAVE 16 /* rt_lidar/kernels/texture.py MAX_OCTAVE */
#define GRAZING_COS_MIN 0.02 /* rt_lidar/physics/texture.py GRAZING_COS_MIN */
static const uint64_t PATCH_SALT = 0xD6E8FEB86659FD93ULL;
/* rt_lidar/kernels/texture.py _CORNER_PRIMES, _IRWIN_HALL_MEAN, _IRWIN_HALL_SD */
static const uint64_t CORNER_PRIMES[2] = {0x9E3779B97F4A7C15ULL, 0xC2B2AE3D27D4EB4FULL};
#define IRWIN_HALL_MEAN 131070.0
#define IRWIN_HALL_SD 37837.22723720648

/* _patch_field: value noise of unit variance at p on a horizontal lattice of pm under key
 * (kernels/texture.py: the same operations in its order). */
static inline double patch_field(const double p[3], double pm, uint64_t key, const double shift[3]) {
    double weight[2][2];
    uint64_t axis_hash[2][2];
    for (int c = 0; c < 2; c++) {
        const double sc = p[c] / pm + shift[c];
        const double fl = floor(sc);
        const double t = sc - fl;
        const uint64_t lo = (uint64_t)(int64_t)fl * CORNER_PRIMES[c];
        axis_hash[c][0] = lo;
        axis_hash[c][1] = lo + CORNER_PRIMES[c];
        weight[c][0] = 1.0 - t;
        weight[c][1] = t;
    }
    const uint64_t pkey = key ^ PATCH_SALT;
    double num = 0.0, wsq = 0.0;
    for (int c = 0; c < 4; c++) { /* (x, y) = (0, 0), (1, 0), (0, 1), (1, 1) */
        const int bx = c & 1, by = c >> 1;
        const double w = weight[0][bx] * weight[1][by];
        const uint64_t h = mix(pkey ^ axis_hash[0][bx] ^ axis_hash[1][by]);
        const uint64_t total = (h & 0xFFFF) + ((h >> 16) & 0xFFFF) + ((h >> 32) & 0xFFFF) + (h >> 48);
        num = num + w * ((double)total - IRWIN_HALL_MEAN);
        wsq = wsq + w * w;
    }
    return num / (IRWIN_HALL_SD * sqrt(wsq));
}

/* The hash of cube (c0, c1, c2) under key: the two uniforms of its Box-Muller draw (u2 already 2 pi u). */
static inline void cube_uniforms(uint64_t c0, uint64_t c1, uint64_t c2, uint64_t key, double *u1, double *u2) {
    uint64_t h = mix(c0 ^ key);
    h = mix(h ^ c1);
    h = mix(h ^ c2);
    const uint64_t h2 = mix(h ^ GOLDEN);
    *u1 = ((double)(h >> 11) + 0.5) / 9007199254740992.0;
    *u2 = 2.0 * M_PI * ((double)(h2 >> 11) / 9007199254740992.0);
}

/* apply(direction f4 (N, 3), range f4 (N), cos f4 (N), material i2 (N), sigma f8 (M), cell f8 (M),
 *       seed i8 (M: uint64 bits), patch_sigma f8 (M) or None, patch_m f8 (M), pose f8 (7) or None,
 *       beam f8 (3: exit diameter, divergences h and v in rad) or None, subrays, N, M,
 *       power f4 (N) in/out, refl f4 (N) in/out) -> textured rays
 * pose: the float32 pose start's position and unit quaternion (wxyz) in float64; None: the sensor frame.
 * beam None: a point footprint (area 0). */
static PyObject *apply(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[13];
    Py_ssize_t n, m, subrays;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOnnnOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &o[8],
                          &o[9], &o[10], &subrays, &n, &m, &o[11], &o[12]))
        return NULL;
    if (!loops_ready) return PyErr_Format(PyExc_RuntimeError, "apply: setup() did not find NumPy's loops");
    const int patched = o[7] != Py_None, posed = o[9] != Py_None, beamed = o[10] != Py_None;
    Buf b[13];
    memset(b, 0, sizeof b);
    if (buf_get(&b[0], o[0], 0, 'f', 4, 3 * n, "direction") || buf_get(&b[1], o[1], 0, 'f', 4, n, "range") ||
        buf_get(&b[2], o[2], 0, 'f', 4, n, "cos") || buf_get(&b[3], o[3], 0, 'h', 2, n, "material") ||
        buf_get(&b[4], o[4], 0, 'd', 8, m, "sigma") || buf_get(&b[5], o[5], 0, 'd', 8, m, "cell") ||
        buf_get(&b[6], o[6], 0, 'q', 8, m, "seed") ||
        (patched && buf_get(&b[7], o[7], 0, 'd', 8, m, "patch_sigma")) ||
        buf_get(&b[8], o[8], 0, 'd', 8, m, "patch_m") || (posed && buf_get(&b[9], o[9], 0, 'd', 8, 7, "pose")) ||
        (beamed && buf_get(&b[10], o[10], 0, 'd', 8, 3, "beam")) ||
        buf_get(&b[11], o[11], 1, 'f', 4, n, "power") || buf_get(&b[12], o[12], 1, 'f', 4, n, "refl")) {
        buf_release(b, 13);
        return NULL;
    }
    if (subrays < 1) {
        buf_release(b, 13);
        return PyErr_Format(PyExc_ValueError, "apply: subrays must be >= 1");
    }
    const float *D = b[0].view.buf, *R = b[1].view.buf, *COS = b[2].view.buf;
    const int16_t *MAT = b[3].view.buf;
    const double *SIG = b[4].view.buf, *CELL = b[5].view.buf, *PSIG = patched ? b[7].view.buf : NULL,
                 *PM = b[8].view.buf, *POSE = posed ? b[9].view.buf : NULL, *BEAM = beamed ? b[10].view.buf : NULL;
    const uint64_t *SEED = (const uint64_t *)b[6].view.buf;
    float *power = b[11].view.buf, *refl = b[12].view.buf;
    static const double shift[3] = {0.3183098861837907, 0.5772156649015329, 0.4142135623730951};
    const double sub = (double)subrays, sqrt_sub = sqrt(sub);
    Py_ssize_t done = 0;
    Py_ssize_t rays[CHUNK];
    double s_eff[CHUNK], patch[CHUNK];
    char has_patch[CHUNK];
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
            double area = 0.0, along = 0.0; /* footprint_area_m2, footprint_along_m */
            if (BEAM != NULL) {
                const double wide = BEAM[0] + BEAM[1] * r, tall = BEAM[0] + BEAM[2] * r;
                double c = (double)COS[i];
                c = c > GRAZING_COS_MIN ? c : GRAZING_COS_MIN; /* np.maximum (no NaN on a hit) */
                area = (0.7853981633974483 * wide * tall) / c / sub;
                along = (0.8862269254527579 * tall) / c / sqrt_sub;
            }
            const double cell = CELL[mat];
            double scale = cell;
            uint64_t octave = 0;
            if (BEAM != NULL) { /* cell 2^k, the largest no wider than the footprint across */
                const double across = area / along;
                for (int j = 0; j < MAX_OCTAVE; j++)
                    if (scale * 2.0 <= across) {
                        scale = scale * 2.0;
                        octave++;
                    }
            }
            uint64_t cells[3];
            for (int c = 0; c < 3; c++) cells[c] = (uint64_t)(int64_t)floor(p[c] / scale + shift[c]);
            const uint64_t key = SEED[mat] * GOLDEN;
            cube_uniforms(cells[0], cells[1], cells[2], key ^ (octave * M2), &u1[k], &u2[k]);
            const double s = SIG[mat];
            s_eff[k] = area > cell * cell ? s * (cell / sqrt(area > 1e-300 ? area : 1e-300)) : s;
            patch[k] = 0.0;
            has_patch[k] = 0;
            if (PSIG != NULL && PSIG[mat] > 0) { /* materials without patches skip them (nothing to add) */
                const double pm = PM[mat], zp = patch_field(p, pm, key, shift);
                /* the patches averaged along the footprint (none without a beam: along 0) */
                const double ps = along > pm ? PSIG[mat] * sqrt(pm / along) : PSIG[mat];
                patch[k] = ps * zp - 0.5 * ps * ps;
                has_patch[k] = 1;
            }
            rays[k++] = i;
        }
        np_loop_run(&log_d, u1, k, sizeof(double));
        np_loop_run(&cos_d, u2, k, sizeof(double));
        for (Py_ssize_t q = 0; q < k; q++) {
            const double s = s_eff[q];
            const double z = sqrt(-2.0 * u1[q]) * u2[q];
            double log_f = s * z - 0.5 * s * s;
            if (has_patch[q]) log_f = log_f + patch[q];
            u1[q] = log_f;
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
    buf_release(b, 13);
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
