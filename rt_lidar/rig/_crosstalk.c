/* The echoes of one sensor's pulses in another's listening windows (rt_lidar/rig/crosstalk.py _pairs and
 * _echoes) in one pass over the pairs of pulses, with the GIL released (rt_lidar/rig/crosstalk_fused.py
 * is its Python side). The NumPy code's float64 operations in its order: np.linalg.norm adds the three
 * squares left to right, einsum("ij,ij->i") adds the first and third products, then the second (held
 * by the tests on random and real pulses), and the cosines and exponentials are NumPy's own loops
 * (_np_loops.h); built with -ffp-contract=off. The same echoes in the same order, bit for bit
 * (tests/rig/test_crosstalk_fused.py). Optional extension: where it is missing, the NumPy code runs.
 */
#include "_np_twins.h"
#include "_np_loops.h"

#include <stdlib.h>

static NpLoop cos_d, exp_d;

static inline double min_np64(double a, double b) { return isnan(a) ? a : (isnan(b) ? b : (a < b ? a : b)); }
static int loops_ready = 0;

/* setup(np.cos, np.exp) -> bool: take their float64 loops (False if not found). */
static PyObject *setup(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cos_u, *exp_u;
    if (!PyArg_ParseTuple(args, "OO", &cos_u, &exp_u)) return NULL;
    NpLoop a, b;
    if (np_loop_find(cos_u, "cos", NP_TYPE_DOUBLE, &a) || np_loop_find(exp_u, "exp", NP_TYPE_DOUBLE, &b))
        Py_RETURN_FALSE;
    cos_d = a;
    exp_d = b;
    loops_ready = 1;
    Py_RETURN_TRUE;
}

/* np.searchsorted of a float64 key in int64 values sorted ascending (compared as float64): left gives the
 * first index whose value is >= key, right the first whose value is > key. */
static Py_ssize_t search(const int64_t *t, Py_ssize_t n, double key, int right) {
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        const Py_ssize_t mid = lo + (hi - lo) / 2;
        const double v = (double)t[mid];
        if (right ? v <= key : v < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* pair_bounds(t_a i8 (A), t_b_sorted i8 (B), before, after, lo i8 out, hi i8 out (A each)) -> pairs */
static PyObject *pair_bounds(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[4];
    Py_ssize_t na, nb;
    double before, after;
    if (!PyArg_ParseTuple(args, "OOnnddOO", &o[0], &o[1], &na, &nb, &before, &after, &o[2], &o[3])) return NULL;
    Buf b[4];
    memset(b, 0, sizeof b);
    if (buf_get(&b[0], o[0], 0, 'q', 8, na, "t_a") || buf_get(&b[1], o[1], 0, 'q', 8, nb, "t_b") ||
        buf_get(&b[2], o[2], 1, 'q', 8, na, "lo") || buf_get(&b[3], o[3], 1, 'q', 8, na, "hi")) {
        buf_release(b, 4);
        return NULL;
    }
    const int64_t *ta = b[0].view.buf, *tb = b[1].view.buf;
    int64_t *lo = b[2].view.buf, *hi = b[3].view.buf;
    Py_ssize_t total = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < na; i++) {
        const double k_lo = (double)ta[i] - before, k_hi = (double)ta[i] + after;
        if (i > 0 && ta[i] >= ta[i - 1]) { /* pulses in time order: walk on from the last bounds */
            Py_ssize_t l = lo[i - 1], h = hi[i - 1];
            while (l < nb && (double)tb[l] < k_lo) l++;
            while (h < nb && (double)tb[h] <= k_hi) h++;
            lo[i] = l;
            hi[i] = h;
        } else {
            lo[i] = search(tb, nb, k_lo, 0);
            hi[i] = search(tb, nb, k_hi, 1);
        }
        if (hi[i] > lo[i]) total += hi[i] - lo[i];
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 4);
    return PyLong_FromSsize_t(total);
}

static inline double dot_einsum(const double *a, const double *b) { return (a[0] * b[0] + a[2] * b[2]) + a[1] * b[1]; }
static inline double norm3(const double *v) { return sqrt((v[0] * v[0] + v[1] * v[1]) + v[2] * v[2]); }

/* Whether a cosine c is below cos(angle) for certain, without taking the cosine: cos x >= 1 - x^2 / 2 for
 * every real x, so c below that bound (less a margin far above the bound's rounding and the last bits of
 * NumPy's cos) fails the test c >= cos(angle) whatever NumPy's cos gives. A NaN angle or cosine is never
 * out for certain here: the exact test decides it. */
#define CONE_MARGIN 1e-9
static inline int cone_out(double c, double angle) { return c < (1.0 - 0.5 * (angle * angle)) - CONE_MARGIN; }

/* Pairs that fail the NumPy code's tests for certain, found without a square root or a division (each a
 * bound with margins far above the rounding of the exact expressions; a NaN never fails here, so the
 * exact test decides it):
 * - behind: the spot behind A's beam (the cone's numerator d <= 0, so cosang = d / m <= 0) while the
 *   cone's half-angle th_a + th_b rb / m stays below 1.4 rad (m >= the largest |v_c|), whose cosine is
 *   positive: cosang >= cos(limit) fails;
 * - beyond: the spot farther from A than A's own ray reaches (|v| > range_a + tol, on the squares);
 * - looks_away: B's origin outside A's receiver cone, -ab.dir_a / |ab| below cos(th_a) (> 0.5) less
 *   1e-6 (on the squares where it is positive). */
static inline double max_abs3(const double *v) {
    const double x = fabs(v[0]), y = fabs(v[1]), z = fabs(v[2]);
    return x > y ? (x > z ? x : z) : (y > z ? y : z);
}
static inline int behind(double d, const double *v, double rb, const double *K);
static inline int beyond(const double *v, double reach) {
    const double ss = (v[0] * v[0] + v[1] * v[1]) + v[2] * v[2], r = reach * (1.0 + 1e-9);
    return reach >= 0.0 && ss > r * r;
}
static inline int looks_away(const double *ab, const double *da, double cos_th_a) {
    const double s = -((ab[0] * da[0] + ab[2] * da[2]) + ab[1] * da[1]);
    const double ss = (ab[0] * ab[0] + ab[1] * ab[1]) + ab[2] * ab[2], c = cos_th_a - 1e-6;
    return s <= 0.0 || s * s < (c * c) * ss;
}

enum { K_TH_A, K_TH_B, K_COS_TH_A, K_TOL, K_C, K_HALF_C, K_NEG_EXT, K_POWER_S, K_HALF_AP, K_AREA_AP, K_POWER_D, K_N };
#define CHUNK 512

static inline int behind(double d, const double *v, double rb, const double *K) {
    const double vmax = max_abs3(v);
    return d <= 0.0 && rb >= 0.0 && K[K_TH_A] * vmax + K[K_TH_B] * rb < 1.4 * vmax;
}

/* echoes(lo, hi i8 (A), order i8 (B), t_a i8, origin_a f8 (A, 3), dir_a f8 (A, 3), range_a f8, cos_a f8 (A each),
 *        t_b i8, origin_b f8 (B, 3), dir_b f8 (B, 3), range_b f8, material_b i8 (B each), rho f8 (M), consts f8,
 *        A, B, M, scattered i8, r f8, p f8 out, direct i8, r f8, p f8 out (pairs each)) -> (scattered, direct) */
static PyObject *echoes(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[21];
    Py_ssize_t na, nb, nm, total;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOOOnnnnOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7],
                          &o[8], &o[9], &o[10], &o[11], &o[12], &o[13], &o[14], &na, &nb, &nm, &total, &o[15], &o[16],
                          &o[17], &o[18], &o[19], &o[20]))
        return NULL;
    if (!loops_ready) return PyErr_Format(PyExc_RuntimeError, "echoes: setup() did not find NumPy's loops");
    Buf b[21];
    memset(b, 0, sizeof b);
    const Py_ssize_t sizes[21] = {na, na, nb, na, 3 * na, 3 * na, na, na, nb, 3 * nb, 3 * nb, nb, nb, nm, K_N,
                                  total, total, total, total, total, total};
    const char fmts[21] = {'q', 'q', 'q', 'q', 'd', 'd', 'd', 'd', 'q', 'd', 'd', 'd', 'q', 'd', 'd',
                           'q', 'd', 'd', 'q', 'd', 'd'};
    static const char *names[21] = {"lo", "hi", "order", "t_a", "origin_a", "dir_a", "range_a", "cos_a", "t_b",
                                    "origin_b", "dir_b", "range_b", "material_b", "rho", "consts", "s_i", "s_r",
                                    "s_p", "d_i", "d_r", "d_p"};
    for (int k = 0; k < 21; k++)
        if (buf_get(&b[k], o[k], k >= 15, fmts[k], 8, sizes[k], names[k])) {
            buf_release(b, 21);
            return NULL;
        }
    const int64_t *LO = b[0].view.buf, *HI = b[1].view.buf, *ORD = b[2].view.buf, *TA = b[3].view.buf;
    const double *OA = b[4].view.buf, *DA = b[5].view.buf, *RA = b[6].view.buf, *CA = b[7].view.buf;
    const int64_t *TB = b[8].view.buf, *MB = b[12].view.buf;
    const double *OB = b[9].view.buf, *DB = b[10].view.buf, *RB = b[11].view.buf, *RHO = b[13].view.buf;
    const double *K = b[14].view.buf;
    int64_t *s_i = b[15].view.buf, *d_i = b[18].view.buf;
    double *s_r = b[16].view.buf, *s_p = b[17].view.buf, *d_r = b[19].view.buf, *d_p = b[20].view.buf;
    Py_ssize_t ns = 0, nd = 0, bad = -1;
    int64_t ci[CHUNK], cj[CHUNK];
    double dist[CHUNK], cosang[CHUNK], arg[CHUNK], len_[CHUNK], dot_b[CHUNK], dot_a[CHUNK];
    /* the tests without a square root or a division below hold for half-angles in [0, 0.5] rad */
    const int quick = K[K_TH_A] >= 0.0 && K[K_TH_A] <= 0.5 && K[K_TH_B] >= 0.0 && K[K_COS_TH_A] > 0.5;
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t i = 0, jj = na > 0 ? LO[0] : 0;
    while (i < na && bad < 0) {
        /* the next chunk of pairs, in _pairs' order: by A's pulse, then B's in time order */
        Py_ssize_t n = 0;
        while (n < CHUNK && i < na) {
            if (jj < LO[i]) jj = LO[i];
            if (jj >= HI[i]) {
                i++;
                if (i < na) jj = LO[i];
                continue;
            }
            const int64_t j = ORD[jj];
            if (j < 0 || j >= nb) {
                bad = jj;
                break;
            }
            ci[n] = i;
            cj[n] = j;
            n++;
            jj++;
        }
        if (bad >= 0) break;
        /* scattered: B's spot in A's receiver cone and not hidden from A. The cone's cosine is taken
         * only for the pairs that pass the other tests and are not out of the cone for certain
         * (cone_out); each cosine is NumPy's own of that angle, so the pairs seen are the same. */
        Py_ssize_t cand_n = 0;
        Py_ssize_t cand[CHUNK];
        for (Py_ssize_t q = 0; q < n; q++) {
            const int64_t a = ci[q], j = cj[q];
            const double rb = RB[j];
            if (!isfinite(rb)) continue;
            double v[3];
            for (int c = 0; c < 3; c++) v[c] = (OB[3 * j + c] + DB[3 * j + c] * rb) - OA[3 * a + c];
            const double d = dot_einsum(v, DA + 3 * a); /* cosang's numerator, as below */
            if (quick && (behind(d, v, rb, K) || beyond(v, RA[a] + K[K_TOL]))) continue;
            dist[q] = norm3(v);
            const double m = max_np64(dist[q], 1e-9);
            cosang[q] = d / m;
            const double limit = K[K_TH_A] + K[K_TH_B] * rb / m;
            if (!(RA[a] >= dist[q] - K[K_TOL]) || cone_out(cosang[q], limit)) continue;
            arg[cand_n] = limit;
            cand[cand_n++] = q;
        }
        np_loop_run(&cos_d, arg, cand_n, sizeof(double));
        Py_ssize_t seen_n = 0;
        Py_ssize_t seen[CHUNK];
        for (Py_ssize_t u = 0; u < cand_n; u++)
            if (cosang[cand[u]] >= arg[u]) seen[seen_n++] = cand[u];
        double ex[CHUNK];
        for (Py_ssize_t u = 0; u < seen_n; u++) {
            const Py_ssize_t q = seen[u];
            ex[u] = K[K_NEG_EXT] * (RB[cj[q]] + dist[q]);
        }
        np_loop_run(&exp_d, ex, seen_n, sizeof(double));
        for (Py_ssize_t u = 0; u < seen_n; u++) {
            const Py_ssize_t q = seen[u];
            const int64_t a = ci[q], j = cj[q];
            const double rb = RB[j];
            const double arrival = (double)TB[j] + (rb + dist[q]) / K[K_C];
            const int64_t mat = MB[j] > 0 ? MB[j] : 0;
            const double rho = mat < nm ? RHO[mat] : NAN;
            if (mat >= nm) bad = j;
            const double cos_out = max_np64(CA[a], 0.0);
            const double m = max_np64(dist[q], 1e-3);
            s_i[ns] = a;
            s_r[ns] = K[K_HALF_C] * (arrival - (double)TA[a]);
            s_p[ns] = K[K_POWER_S] * rho * cos_out * ex[u] / (16.0 * (m * m));
            ns++;
        }
        /* direct: A's aperture in B's beam, B in A's receiver cone, nothing in between (the beam's
         * cosine taken as the scattered cone's above: only where the other tests pass) */
        cand_n = 0;
        for (Py_ssize_t q = 0; q < n; q++) {
            const int64_t a = ci[q], j = cj[q];
            double ab[3], u[3], neg[3];
            for (int c = 0; c < 3; c++) ab[c] = OA[3 * a + c] - OB[3 * j + c];
            if (quick && looks_away(ab, DA + 3 * a, K[K_COS_TH_A])) continue;
            len_[q] = max_np64(norm3(ab), 1e-6);
            for (int c = 0; c < 3; c++) {
                u[c] = ab[c] / len_[q];
                neg[c] = -u[c];
            }
            dot_b[q] = dot_einsum(u, DB + 3 * j);
            dot_a[q] = dot_einsum(neg, DA + 3 * a);
            const double l = len_[q], limit = K[K_TH_B] + K[K_HALF_AP] / l;
            if (!(dot_a[q] >= K[K_COS_TH_A] && RB[j] >= l - K[K_TOL] && RA[a] >= l - K[K_TOL]) ||
                cone_out(dot_b[q], limit))
                continue;
            arg[cand_n] = limit;
            cand[cand_n++] = q;
        }
        np_loop_run(&cos_d, arg, cand_n, sizeof(double));
        for (Py_ssize_t w = 0; w < cand_n; w++) {
            const Py_ssize_t q = cand[w];
            const int64_t a = ci[q], j = cj[q];
            const double l = len_[q];
            if (!(dot_b[q] >= arg[w])) continue;
            const double m = max_np64(l * K[K_TH_B], 1e-6);
            const double spot_area = M_PI * (m * m);
            const double frac = min_np64(K[K_AREA_AP] / spot_area, 1.0);
            d_i[nd] = a;
            d_r[nd] = K[K_HALF_C] * (((double)TB[j] + l / K[K_C]) - (double)TA[a]);
            d_p[nd] = K[K_POWER_D] * frac;
            nd++;
        }
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 21);
    if (bad >= 0) return PyErr_Format(PyExc_IndexError, "echoes: an index out of range (%zd)", bad);
    return Py_BuildValue("(nn)", ns, nd);
}

#define ROT_BLOCK 256
/* The m unit directions of v (f4, (m, 3)) rotated by the quaternions (w, r) at Q + k * q_step into out (f8,
 * (m, 3)): x = v + w t + r x t with t = 2 r x v, divided by its norm. Each pass over the block is one loop
 * the compiler vectorises (built for AVX2 too where the CPU has it: the same IEEE operations on each
 * element, in the same order, no contraction). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define ROT_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define ROT_CLONES
#endif
ROT_CLONES static void rotate_block(const double *Q, Py_ssize_t q_step,
                                                                          const float *V, Py_ssize_t m, double *out) {
    double x0[ROT_BLOCK], x1[ROT_BLOCK], x2[ROT_BLOCK], nrm[ROT_BLOCK];
    for (Py_ssize_t k = 0; k < m; k++) {
        const double *q = Q + q_step * k;
        const double w = q[0], r0 = q[1], r1 = q[2], r2 = q[3];
        const double v0 = V[3 * k], v1 = V[3 * k + 1], v2 = V[3 * k + 2];
        const double t0 = 2.0 * (r1 * v2 - r2 * v1), t1 = 2.0 * (r2 * v0 - r0 * v2), t2 = 2.0 * (r0 * v1 - r1 * v0);
        x0[k] = (v0 + w * t0) + (r1 * t2 - r2 * t1);
        x1[k] = (v1 + w * t1) + (r2 * t0 - r0 * t2);
        x2[k] = (v2 + w * t2) + (r0 * t1 - r1 * t0);
    }
    for (Py_ssize_t k = 0; k < m; k++) nrm[k] = sqrt((x0[k] * x0[k] + x1[k] * x1[k]) + x2[k] * x2[k]);
    for (Py_ssize_t k = 0; k < m; k++) {
        out[3 * k] = x0[k] / nrm[k];
        out[3 * k + 1] = x1[k] / nrm[k];
        out[3 * k + 2] = x2[k] / nrm[k];
    }
}

/* rotate_unit(q f8 (N, 4), v f4 (N, 3), N, out f8 (N, 3)[, one]): crosstalk._rotate of v (as float64) by the
 * wxyz quaternions q, v + w t + r x t with t = 2 r x v (np.cross's products and differences), then divided
 * by its np.linalg.norm, as _pulses makes each pulse's world direction. With one = 1, q is a single
 * quaternion (1, 4) that every direction takes (a sensor that does not turn: the broadcast rows of
 * interpolate_pose_samples, read in place instead of copied row by row); the same values. */
static PyObject *rotate_unit(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[3];
    Py_ssize_t n;
    int one = 0;
    if (!PyArg_ParseTuple(args, "OOnO|p", &o[0], &o[1], &n, &o[2], &one)) return NULL;
    Buf b[3];
    memset(b, 0, sizeof b);
    if (buf_get(&b[0], o[0], 0, 'd', 8, one ? 4 : 4 * n, "q") || buf_get(&b[1], o[1], 0, 'f', 4, 3 * n, "v") ||
        buf_get(&b[2], o[2], 1, 'd', 8, 3 * n, "out")) {
        buf_release(b, 3);
        return NULL;
    }
    const double *Q = b[0].view.buf;
    const float *V = b[1].view.buf;
    double *out = b[2].view.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i0 = 0; i0 < n; i0 += ROT_BLOCK) {
        const Py_ssize_t m = n - i0 < ROT_BLOCK ? n - i0 : ROT_BLOCK;
        rotate_block(one ? Q : Q + 4 * i0, one ? 0 : 4, V + 3 * i0, m, out + 3 * i0);
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 3);
    Py_RETURN_NONE;
}

/* probe(index, buffer, nin): one of this module's loops run on the buffer (_np_loops.h np_loop_probe) */
static PyObject *probe(PyObject *self, PyObject *args) {
    (void)self;
    static const NpLoop *const loops[] = {&cos_d, &exp_d};
    static const Py_ssize_t items[] = {8, 8};
    return np_loop_probe(loops, items, 2, args);
}

static PyMethodDef methods[] = {
    {"probe", probe, METH_VARARGS, "Run one of the loops setup() took on a buffer (see _np_loops.h)."},
    {"rotate_unit", rotate_unit, METH_VARARGS, "Pulses' world directions from their quaternions (see the source)."},
    {"setup", setup, METH_VARARGS, "Take NumPy's cos and exp loops (see the source)."},
    {"pair_bounds", pair_bounds, METH_VARARGS, "Each A pulse's range of B pulses in its window (see the source)."},
    {"echoes", echoes, METH_VARARGS, "The scattered and direct echoes of B's pulses in A's windows (see the source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_crosstalk", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__crosstalk(void) { return PyModule_Create(&module); }
