/* The whole CPU waveform search of kernels.waveform (_waveform_returns) in one pass over the pulses:
 * clusters, sampled waveforms, peaks, their log-parabola refinement and echo pulse width, the noisy
 * detection, the return selection and the echo that names each return, pulse by pulse, with the GIL
 * released (kernels/waveform_pulses.py is its Python side).
 *
 * The NumPy code works on whole (pulse, echo) tables in buckets and pays one pass over memory for
 * each of ~60 steps; here each pulse's echoes stay in cache from its first step to its last. Every
 * float operation is the NumPy code's own, in its order and precision (built with -ffp-contract=off),
 * and the exponentials and logarithms are NumPy's: the ufunc loops that np.exp and np.log run on
 * float32 and float64 arrays (their SIMD code, taken from the ufunc objects once, by setup()), called on
 * short buffers of the same values; they compute each element on its own, so the results are NumPy's
 * to the bit (tests/kernels/test_waveform_pulses.py holds the whole search to it).
 *
 * What NumPy leaves to its sort (the order of equal elements in argsort) is not reproduced: a pulse
 * whose candidate returns tie in height (or a multi-return pulse whose kept returns tie in time) is
 * flagged and left to the NumPy code, which the caller runs on those pulses alone. Optional extension:
 * where it is missing, the NumPy code runs.
 */
#include "_np_twins.h"
#include "_np_loops.h"

#include <stdlib.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static NpLoop exp_f, exp_d, log_f;
static int loops_ready = 0;

/* setup(np.exp, np.log) -> bool: take their float32 and float64 loops (False if not found). */
static PyObject *setup(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *exp_u, *log_u;
    if (!PyArg_ParseTuple(args, "OO", &exp_u, &log_u)) return NULL;
    NpLoop a, b, c;
    if (np_loop_find(exp_u, "exp", NP_TYPE_FLOAT, &a) || np_loop_find(exp_u, "exp", NP_TYPE_DOUBLE, &b) ||
        np_loop_find(log_u, "log", NP_TYPE_FLOAT, &c))
        Py_RETURN_FALSE;
    exp_f = a;
    exp_d = b;
    log_f = c;
    loops_ready = 1;
    Py_RETURN_TRUE;
}

#define run_loop np_loop_run

/* _log of kernels.waveform: np.log(np.maximum(x, 1e-38)) in float32 (the maximum here, the log later). */
static inline float log_arg(float x) { return max_np(x, 1e-38f); }

enum { KIND_STRONGEST, KIND_LAST, KIND_FIRST, KIND_STRONGEST_LAST, KIND_TWO_STRONGEST, KIND_MULTI };

typedef struct {
    Py_ssize_t pulse, f, m, b, w_off;
    Py_ssize_t g_off; /* its samples' row in the block's exps; ONE_ROW - s: row s of the one-echo rows */
    Py_ssize_t wl, wn; /* the bins sampled: [wl, wl + wn) (sampled_bins); the others are 0 */
    int k;             /* bucket: log2 of the cluster's bins */
    double start;      /* grid start */
} Cluster;

/* The reach of an echo's samples in bins (REACH_SPARE bins to spare), by the binary exponent of its
 * height over a quarter of the search level's share of it (reach_table): an echo of height a, one of
 * m in its cluster, whose 4 m a / level is below 2^(x + 1), falls below level / (4 m) further than
 * sqrt((x + 1) ln 2 / -coef) from its time. */
#define REACH_EXPONENTS 128
#define REACH_SPARE 2.0

/* reach[x] for x in [0, REACH_EXPONENTS) (bins; ln 2 rounded up, so each a little long); 0 when the
 * level, coefficient or bin are out of range (then every bin is sampled) */
static int reach_table(double *reach, double level, double coef, double dt) {
    if (!(level > 0.0) || !isfinite(level) || !(coef < 0.0) || !isfinite(coef) || !(dt > 0.0) || !isfinite(dt)) return 0;
    for (int x = 0; x < REACH_EXPONENTS; x++) reach[x] = sqrt((double)(x + 1) * 0.69314718056 / -coef) / dt + REACH_SPARE;
    return 1;
}

/* The bins of a cluster of m echoes (times ts, heights am, grid from start, b bins of dt) that can
 * reach the search level, and one more on each side: [*wl, *wl + *wn); reach: reach_table's, or NULL.
 * A bin where every echo's term a q * exp(coef * dd * dd) is below level / (4 m) sums to less than
 * level / 2 whatever the float32 rounding of its exponent, exp and sum (a factor of 2 to spare), so
 * it is below the search level: it is no peak, and it is read only as a peak's neighbour below the
 * level (the one each side of the bins that can reach it, which are sampled) or not at all. The
 * bounds are found in float64 with 2 bins to spare each side (the float32 grid and echo times differ
 * from them by ~1e-5 bin). Outside those bins the waveform is left 0, also below the level: the peaks,
 * the runs above the level around them and every value the refinement reads are the whole grid's, to
 * the bit (tests/kernels/test_waveform_pulses.py). Any echo height that is not positive and finite,
 * or out of the table's range, samples every bin, as before. */
static void sampled_bins(const double *ts, const float *am, Py_ssize_t m, double start, Py_ssize_t b, double level,
                         double inv_dt, const double *reach, Py_ssize_t *wl, Py_ssize_t *wn) {
    *wl = 0;
    *wn = b;
    if (reach == NULL) return;
    const double share = 4.0 * (double)m / level, nb = (double)b;
    double lo = nb + 1.0, hi = -2.0;
    for (Py_ssize_t q = 0; q < m; q++) {
        const double a = (double)am[q];
        if (!(a > 0.0) || !isfinite(a)) return;
        const double x = a * share;
        if (!(x >= 1.0)) continue; /* exp of a non-positive exponent is at most 1: never near the level */
        uint64_t bits;
        memcpy(&bits, &x, sizeof bits);
        const int e = (int)((bits >> 52) & 0x7ff) - 1023; /* x < 2^(e + 1) */
        if (e >= REACH_EXPONENTS) return;
        const double c = (ts[q] - start) * inv_dt, r = reach[e];
        if (!(c - r < lo) && !(c - r >= lo)) return; /* NaN */
        lo = c - r < lo ? c - r : lo;
        hi = c + r > hi ? c + r : hi;
    }
    if (hi < 0.0 || lo > nb - 1.0 || lo > hi) { /* no echo can reach the level inside the grid */
        *wn = 0;
        return;
    }
    /* the first bin that can reach it, less one (>= 0), and the last, plus one, plus one (<= b) */
    const Py_ssize_t first = lo < 1.0 ? 0 : (Py_ssize_t)lo - 1;
    const Py_ssize_t end = hi >= nb - 2.0 ? b : (Py_ssize_t)hi + 3;
    *wl = first;
    *wn = (end < b ? end : b) - first;
}

/* The bucket (log2 of the bins) of a cluster spanning `span` ns: its bins, ceil((span + pad2) / dt) + 2
 * (at least 32), as a power of two. The ceil of a positive finite quotient without libm's call (no
 * SSE4.1 rounding in the baseline x86-64 build): the truncation, plus one where it fell short; then
 * frexp's exponent of the bins less one (an integer >= 31): its bit length. */
static inline int cluster_bucket(double span, double pad2, double dt) {
    const double span_bins = (span + pad2) / dt;
    int64_t want = (int64_t)span_bins;
    want += (double)want < span_bins;
    want += 2;
    return 64 - __builtin_clzll((unsigned long long)((want > 32 ? want : 32) - 1));
}

typedef struct {
    Py_ssize_t cl, bi, lo, hi;
} Peak;

typedef struct {
    int k;     /* the bucket of its cluster */
    double t;  /* refined peak time */
    float amp; /* refined height */
    float epw; /* echo pulse width */
    int valid;
} Cand;

/* detect_noisy_peaks of one candidate: its noisy height against the threshold (valid), its echo pulse
 * width less the noise's share (sw: the pulse's noise sigma, zq: its draw) */
static inline void noisy_detect(Cand *c, double sw, double shot, double zq, double threshold, double epw_c) {
    const double av = (double)c->amp;
    const double s = sqrt(sw * sw + shot * max_np64(av, 0.0));
    c->valid = av + s * zq >= threshold;
    const double w2 = (double)c->epw * (double)c->epw - epw_c;
    c->epw = (float)sqrt(max_np64(w2, 0.0));
}

typedef struct {
    Py_ssize_t pulse, rid;
    double t;
    float amp, epw;
} Ret;

typedef struct {
    void *p;
    Py_ssize_t cap;
} Vec;

/* vec holds at least n items of `item` bytes (-1: out of memory) */
static int need(Vec *v, Py_ssize_t n, size_t item) {
    if (n <= v->cap) return 0;
    Py_ssize_t c = n > 2 * v->cap ? n : 2 * v->cap;
    void *q = realloc(v->p, (size_t)c * item);
    if (q == NULL) return -1;
    v->p = q;
    v->cap = c;
    return 0;
}

#define BLOCK 256
/* A one-echo cluster's samples exp(coef (grid_j - rel)^2) depend on rel, float32(t - (t - pad)), and its
 * bins alone: rel is float32(pad) for nearly every such cluster (it differs only where t - pad rounds
 * across one of float32's steps), so each call keeps the rows of the first ONE_ROWS values of rel, all b
 * bins of each, NumPy's float32 exp of the same exponents (each element on its own: the same bits), and
 * those clusters read their sampled bins from them. The others' rows are made per block, as before. */
#define ONE_ROWS 8
#define ONE_ROW (-1)
#define N_VEC 12
#define CX_ONE (-1) /* cx_at of a return named by its one finite echo j: CX_ONE - j */

/* pulse_returns(t f8 (p, e), amp f4 (p, e), order i8 (p, e) or None (e == 2 only), sigma f8 (p) or None,
 *   z f8 (p, d) or None, p, e, d, consts f8 (12), kind, max_returns, r,
 *   out: pulse i8, rid u1, t f8, amp f4, epw f4, echo i8 (p * r each), fallback u1 (p)) -> (returns, fallbacks)
 * consts: gap, span, pad, 2 pad, dt, coef, sigma^2, the noisy EPW's correction, shot_w, threshold, min
 * separation, search level. Blocks of pulses go through each step together, so that NumPy's exp and log
 * loops run on long buffers. */
static PyObject *pulse_returns(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[13];
    Py_ssize_t p, e, d, r;
    int kind, max_returns;
    if (!PyArg_ParseTuple(args, "OOOOOnnnOiinOOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &p, &e, &d, &o[5], &kind,
                          &max_returns, &r, &o[6], &o[7], &o[8], &o[9], &o[10], &o[11], &o[12]))
        return NULL;
    if (!loops_ready) return PyErr_Format(PyExc_RuntimeError, "pulse_returns: setup() did not find NumPy's loops");
    if (p < 0 || e < 1 || r < 1 || d < 0 || kind < 0 || kind > KIND_MULTI)
        return PyErr_Format(PyExc_ValueError, "pulse_returns: %zd pulses of %zd echoes, %zd returns", p, e, r);
    const int has_order = o[2] != Py_None, noisy = o[3] != Py_None;
    if (!has_order && e != 2) return PyErr_Format(PyExc_ValueError, "pulse_returns: an order is needed for %zd echoes", e);
    if (noisy && (o[4] == Py_None || d < 1)) return PyErr_Format(PyExc_ValueError, "pulse_returns: noise without draws");
    Buf buf[13];
    memset(buf, 0, sizeof buf);
    if (buf_get(&buf[0], o[0], 0, 'd', 8, p * e, "t") || buf_get(&buf[1], o[1], 0, 'f', 4, p * e, "amp") ||
        (has_order && buf_get(&buf[2], o[2], 0, 'q', 8, p * e, "order")) ||
        (noisy && buf_get(&buf[3], o[3], 0, 'd', 8, p, "sigma")) ||
        (noisy && buf_get(&buf[4], o[4], 0, 'd', 8, p * d, "z")) || buf_get(&buf[5], o[5], 0, 'd', 8, 12, "consts") ||
        buf_get(&buf[6], o[6], 1, 'q', 8, p * r, "pulse") || buf_get(&buf[7], o[7], 1, 'B', 1, p * r, "rid") ||
        buf_get(&buf[8], o[8], 1, 'd', 8, p * r, "t_out") || buf_get(&buf[9], o[9], 1, 'f', 4, p * r, "amp_out") ||
        buf_get(&buf[10], o[10], 1, 'f', 4, p * r, "epw_out") || buf_get(&buf[11], o[11], 1, 'q', 8, p * r, "echo") ||
        buf_get(&buf[12], o[12], 1, 'B', 1, p, "fallback")) {
        buf_release(buf, 13);
        return NULL;
    }
    const double *T = buf[0].view.buf, *C = buf[5].view.buf;
    const float *A = buf[1].view.buf;
    const int64_t *ORD = has_order ? buf[2].view.buf : NULL;
    const double *SIG = noisy ? buf[3].view.buf : NULL, *Z = noisy ? buf[4].view.buf : NULL;
    int64_t *out_p = buf[6].view.buf, *out_e = buf[11].view.buf;
    uint8_t *out_r = buf[7].view.buf, *fb = buf[12].view.buf;
    double *out_t = buf[8].view.buf;
    float *out_a = buf[9].view.buf, *out_w = buf[10].view.buf;
    const double gap = C[0], span_max = C[1], pad = C[2], pad2 = C[3], dt = C[4], s2 = C[6], epw_c = C[7];
    const double shot = C[8], threshold = C[9], min_sep = C[10], search = C[11], coef = C[5];
    double reach_bins[REACH_EXPONENTS];
    const double *reach = reach_table(reach_bins, search, coef, dt) ? reach_bins : NULL;
    const float dt32 = (float)C[4], coef32 = (float)C[5], search32 = (float)C[11], log_search32 = (float)log(C[11]);
#if defined(__SSE2__)
    const __m128 level = _mm_set1_ps(search32);
#endif
    Vec v[N_VEC];
    memset(v, 0, sizeof v);
    Vec *v_cl = &v[0], *v_g = &v[1], *v_w = &v[2], *v_pk = &v[3], *v_lg = &v[4], *v_c = &v[5], *v_ex = &v[6];
    Vec *v_ret = &v[7], *v_cx = &v[8], *v_cd = &v[9], *v_rank = &v[10];
    Vec *v_at = &v[11];
    double *ts_b = malloc((size_t)(BLOCK * e) * sizeof(double));
    float *am_b = malloc((size_t)(BLOCK * e) * sizeof(float));
    int64_t *ord_b = malloc((size_t)(BLOCK * e) * sizeof(int64_t));
    Vec v_grid = {NULL, 0};
    Py_ssize_t n_grid = 0;
    Py_ssize_t n_out = 0, n_fb = 0;
    const int k_one = cluster_bucket(0.0, pad2, dt);
    const Py_ssize_t b_one = (Py_ssize_t)1 << k_one;
    float *one_rows = malloc((size_t)(ONE_ROWS * b_one) * sizeof(float));
    uint32_t one_key[ONE_ROWS];
    int n_one = 0;
    int failed = ts_b == NULL || am_b == NULL || ord_b == NULL || one_rows == NULL;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i0 = 0; i0 < p && !failed; i0 += BLOCK) {
        const Py_ssize_t i1 = i0 + BLOCK < p ? i0 + BLOCK : p;
        /* 1. each pulse's echoes in time order (cluster_echoes: no echo is +inf and sorts last), its clusters */
        Py_ssize_t n_cl = 0, g_tot = 0, w_tot = 0;
        for (Py_ssize_t i = i0; i < i1 && !failed; i++) {
            const double *t = T + i * e;
            const float *a = A + i * e;
            double *ts = ts_b + (i - i0) * e;
            float *am = am_b + (i - i0) * e;
            int64_t *ord = ord_b + (i - i0) * e;
            fb[i] = 0;
            if (ORD != NULL) {
                for (Py_ssize_t j = 0; j < e; j++) ord[j] = ORD[i * e + j];
            } else {
                const double t0 = a[0] > 0 ? t[0] : INFINITY, t1 = a[1] > 0 ? t[1] : INFINITY;
                const int swap = (t1 < t0) || (isnan(t0) && !isnan(t1));
                ord[0] = swap;
                ord[1] = !swap;
            }
            for (Py_ssize_t j = 0; j < e; j++) {
                const int64_t c = ord[j];
                ts[j] = a[c] > 0 ? t[c] : INFINITY;
                am[j] = a[c];
            }
            for (Py_ssize_t j = 0; j < e;) {
                if (!isfinite(ts[j])) {
                    j++;
                    continue;
                }
                const Py_ssize_t f = j;
                const double first = ts[j];
                j++;
                while (j < e && isfinite(ts[j]) && !(ts[j] - ts[j - 1] > gap || ts[j] - first > span_max)) j++;
                if (need(v_cl, n_cl + 1, sizeof(Cluster))) {
                    failed = 1;
                    break;
                }
                Cluster *cl = (Cluster *)v_cl->p + n_cl++;
                /* one echo: a span of first - first = 0, the bucket of every such cluster */
                cl->k = j - f == 1 ? k_one : cluster_bucket(ts[j - 1] - first, pad2, dt);
                cl->pulse = i;
                cl->f = f;
                cl->m = j - f;
                cl->b = (Py_ssize_t)1 << cl->k;
                cl->start = first - pad;
                sampled_bins(ts + f, am + f, cl->m, cl->start, cl->b, search, 1.0 / dt, reach, &cl->wl, &cl->wn);
                cl->w_off = w_tot;
                w_tot += cl->b;
                if (cl->m == 1) { /* the row of its rel, made the first time it comes */
                    const float rel = (float)(ts[f] - cl->start);
                    uint32_t key;
                    memcpy(&key, &rel, sizeof key);
                    int s = 0;
                    while (s < n_one && one_key[s] != key) s++;
                    if (s == n_one && n_one < ONE_ROWS) {
                        float *row = one_rows + s * b_one;
                        for (Py_ssize_t jb = 0; jb < b_one; jb++) {
                            const float dd = (float)jb * dt32 - rel;
                            row[jb] = (coef32 * dd) * dd;
                        }
                        run_loop(&exp_f, row, b_one, sizeof(float));
                        one_key[n_one++] = key;
                    }
                    if (s < n_one) {
                        cl->g_off = ONE_ROW - s;
                        continue;
                    }
                }
                cl->g_off = g_tot;
                g_tot += cl->m * cl->wn;
            }
        }
        if (failed || need(v_g, g_tot, sizeof(float)) || need(v_w, w_tot, sizeof(float))) {
            failed = 1;
            break;
        }
        /* 2. the samples' exponents (_bucket_peaks: float32), then NumPy's exp of them all */
        float *G = v_g->p, *W = v_w->p;
        const Cluster *CL = v_cl->p;
        for (Py_ssize_t c = 0; c < n_cl && !failed; c++)
            if (CL[c].b > n_grid) { /* the bins' times, float32(j) * dt as NumPy's grid has them */
                if (need(&v_grid, CL[c].b, sizeof(float))) failed = 1;
                for (Py_ssize_t j = n_grid; j < CL[c].b && !failed; j++) ((float *)v_grid.p)[j] = (float)j * dt32;
                if (!failed) n_grid = CL[c].b;
            }
        if (failed) break;
        const float *grid = v_grid.p;
        for (Py_ssize_t c = 0; c < n_cl; c++) {
            const Cluster *cl = CL + c;
            if (cl->g_off <= ONE_ROW) continue; /* a one-echo row's */
            const double *ts = ts_b + (cl->pulse - i0) * e;
            const Py_ssize_t wl = cl->wl, wn = cl->wn;
            for (Py_ssize_t q = 0; q < cl->m; q++) {
                const float rel = (float)(ts[cl->f + q] - cl->start);
                float *row = G + cl->g_off + q * wn;
                for (Py_ssize_t j = 0; j < wn; j++) {
                    const float dd = grid[wl + j] - rel;
                    row[j] = (coef32 * dd) * dd;
                }
            }
        }
        run_loop(&exp_f, G, g_tot, sizeof(float));
        /* 3. each cluster's waveform (its echoes added in order) and its peaks at or above the search level */
        Py_ssize_t n_pk = 0;
        for (Py_ssize_t c = 0; c < n_cl && !failed; c++) {
            const Cluster *cl = CL + c;
            const float *am = am_b + (cl->pulse - i0) * e;
            const float *g = cl->g_off > ONE_ROW ? G + cl->g_off : one_rows + (ONE_ROW - cl->g_off) * b_one + cl->wl;
            float *w = W + cl->w_off;
            const Py_ssize_t b = cl->b, wl = cl->wl, wn = cl->wn;
            const float a0 = am[cl->f];
            float *ws = w + wl; /* the sampled bins; the others are below the level (sampled_bins) */
            for (Py_ssize_t j = 0; j < wl; j++) w[j] = 0.0f;
            for (Py_ssize_t j = wl + wn; j < b; j++) w[j] = 0.0f;
            for (Py_ssize_t j = 0; j < wn; j++) ws[j] = g[j] * a0;
            for (Py_ssize_t q = 1; q < cl->m; q++) {
                const float aq = am[cl->f + q];
                const float *gq = g + q * wn;
                for (Py_ssize_t j = 0; j < wn; j++) ws[j] = ws[j] + gq[j] * aq;
            }
#if defined(__SSE2__)
            /* the same search four bins at a time (b is a power of two >= 32): each bin's three tests as
             * lane masks (a NaN compares false, as in the scalar tests), a branch only where a chunk has
             * a peak; last_below: the last bin below the search level before the peak */
            /* the chunks that hold the sampled bins: the bins before them are 0, below the level */
            const Py_ssize_t j0 = wl & ~(Py_ssize_t)3, j1 = wn == 0 ? j0 : ((wl + wn + 3) & ~(Py_ssize_t)3);
            Py_ssize_t last_below = j0 - 1;
            for (Py_ssize_t j = j0; j < (j1 < b ? j1 : b) && !failed; j += 4) {
                const __m128 x = _mm_loadu_ps(w + j);
                const __m128 left = j > 0 ? _mm_loadu_ps(w + j - 1) : _mm_set_ps(w[2], w[1], w[0], 0.0f);
                const __m128 right =
                    j + 4 < b ? _mm_loadu_ps(w + j + 1) : _mm_set_ps(0.0f, w[j + 3], w[j + 2], w[j + 1]);
                const int above = _mm_movemask_ps(_mm_cmpge_ps(x, level));
                int peaks = above & _mm_movemask_ps(_mm_cmpge_ps(x, left)) & _mm_movemask_ps(_mm_cmpgt_ps(x, right));
                const int below = ~above & 0xF;
                while (peaks) {
                    const int q = __builtin_ctz((unsigned)peaks);
                    peaks &= peaks - 1;
                    const int below_before = below & ((1 << q) - 1);
                    const Py_ssize_t jj = j + q;
                    /* the first bin after the peak below the level: in this chunk's mask, else four by four
                     * (b is a multiple of 4; a NaN is below, as in the scalar test) */
                    Py_ssize_t next_below;
                    const int below_after = below >> (q + 1);
                    if (below_after) {
                        next_below = jj + 1 + __builtin_ctz((unsigned)below_after);
                    } else {
                        next_below = j + 4;
                        while (next_below < b) {
                            const int ge = _mm_movemask_ps(_mm_cmpge_ps(_mm_loadu_ps(w + next_below), level));
                            if (ge != 0xF) {
                                next_below += __builtin_ctz((unsigned)(~ge & 0xF));
                                break;
                            }
                            next_below += 4;
                        }
                    }
                    if (need(v_pk, n_pk + 1, sizeof(Peak))) {
                        failed = 1;
                        break;
                    }
                    Peak *pk = (Peak *)v_pk->p + n_pk++;
                    pk->cl = c;
                    pk->bi = jj;
                    pk->lo = below_before ? j + 31 - __builtin_clz((unsigned)below_before) : last_below;
                    pk->hi = next_below;
                }
                if (below) last_below = j + 31 - __builtin_clz((unsigned)below);
            }
#else
            Py_ssize_t last_below = wl - 1; /* the bins before the sampled ones are 0, below the level */
            for (Py_ssize_t j = wl; j < wl + wn; j++) {
                const float x = w[j];
                if (!(x >= search32)) {
                    last_below = j;
                    continue;
                }
                const float left = j > 0 ? w[j - 1] : 0.0f, right = j + 1 < b ? w[j + 1] : 0.0f;
                if (!(x >= left && x > right)) continue;
                Py_ssize_t next_below = j + 1;
                while (next_below < b && w[next_below] >= search32) next_below++;
                if (need(v_pk, n_pk + 1, sizeof(Peak))) {
                    failed = 1;
                    break;
                }
                Peak *pk = (Peak *)v_pk->p + n_pk++;
                pk->cl = c;
                pk->bi = j;
                pk->lo = last_below;
                pk->hi = next_below;
            }
#endif
        }
        if (failed || need(v_lg, 7 * n_pk, sizeof(float)) || need(v_c, n_pk, sizeof(Cand)) ||
            need(v_ex, n_pk, sizeof(float))) {
            failed = 1;
            break;
        }
        /* 4. the logs: l0, l1, l2 around each peak, and y0, y1 of each crossing (_crossing) */
        const Peak *PK = v_pk->p;
        float *LG = v_lg->p, *EX = v_ex->p;
        Cand *CA = v_c->p;
        for (Py_ssize_t q = 0; q < n_pk; q++) {
            const Peak *pk = PK + q;
            const Py_ssize_t b = CL[pk->cl].b, bi = pk->bi;
            const float *w = W + CL[pk->cl].w_off;
            float *L = LG + 7 * q;
            L[0] = log_arg(bi > 0 ? w[bi - 1] : 0.0f);
            L[1] = log_arg(w[bi]);
            L[2] = log_arg(bi < b - 1 ? w[bi + 1] : 0.0f);
            const Py_ssize_t jl = pk->lo > 0 ? pk->lo : 0;
            const Py_ssize_t jr = (pk->hi < b - 1 ? pk->hi : b - 1) - 1;
            L[3] = log_arg(w[jl]);
            L[4] = log_arg(w[jl + 1 < b - 1 ? jl + 1 : b - 1]);
            L[5] = log_arg(w[jr]);
            L[6] = log_arg(w[jr + 1 < b - 1 ? jr + 1 : b - 1]);
        }
        run_loop(&log_f, LG, 7 * n_pk, sizeof(float));
        /* 5. the log-parabola's time and the height's exponent, the echo pulse width at the search level */
        for (Py_ssize_t q = 0; q < n_pk; q++) {
            const Peak *pk = PK + q;
            const Cluster *cl = CL + pk->cl;
            const Py_ssize_t b = cl->b;
            const float *L = LG + 7 * q;
            const float den = (L[0] - 2.0f * L[1]) + L[2];
            const float dl = clip_np(den < 0 ? (0.5f * (L[0] - L[2])) / den : 0.0f, -0.5f, 0.5f);
            Cand *c = CA + q;
            c->k = cl->k;
            c->t = cl->start + ((double)pk->bi + (double)dl) * dt;
            double cross[2];
            for (int side = 0; side < 2; side++) {
                const Py_ssize_t j = side == 0 ? (pk->lo > 0 ? pk->lo : 0) : (pk->hi < b - 1 ? pk->hi : b - 1) - 1;
                const float y0 = L[3 + 2 * side], y1 = L[4 + 2 * side];
                const float dy = y1 - y0;
                const float frac = clip_np(fabsf(dy) > 1e-12f ? (log_search32 - y0) / dy : 0.0f, 0.0f, 1.0f);
                cross[side] = ((double)j + (double)frac) * dt;
            }
            c->epw = (float)max_np64(cross[1] - cross[0], 0.0);
            c->valid = 1;
            EX[q] = L[1] - (0.25f * (L[0] - L[2])) * dl;
        }
        run_loop(&exp_f, EX, n_pk, sizeof(float));
        /* 6. per pulse: its candidates in bucket order, the noisy detection, the selection */
        Py_ssize_t n_ret = 0;
        Py_ssize_t q = 0;
        for (Py_ssize_t i = i0; i < i1 && !failed; i++) {
            const Py_ssize_t q0 = q;
            while (q < n_pk && CL[PK[q].cl].pulse == i) q++;
            const Py_ssize_t n_cand = q - q0;
            if (n_cand == 0) continue;
            if (need(v_cd, n_cand, sizeof(Cand)) || need(v_rank, n_cand, sizeof(Py_ssize_t)) ||
                need(v_ret, n_ret + (r < n_cand ? r : n_cand) + 2, sizeof(Ret))) {
                failed = 1;
                break;
            }
            if (n_cand == 1) { /* one candidate: what the steps below do with one, without their loops */
                Cand c1 = CA[q0];
                c1.amp = EX[q0];
                if (noisy) noisy_detect(&c1, SIG[i], shot, Z[i * d], threshold, epw_c);
                if (!c1.valid) continue;
                if (isnan(c1.amp)) { /* a NaN height: left to NumPy, as a tie */
                    fb[i] = 1;
                    n_fb++;
                    continue;
                }
                Py_ssize_t want = kind <= KIND_STRONGEST_LAST ? 1 : kind == KIND_TWO_STRONGEST ? 2 : max_returns;
                if (want > r) want = r;
                if (want < 1) continue;
                Ret *rt = (Ret *)v_ret->p + n_ret++;
                rt->pulse = i;
                rt->rid = 0;
                rt->t = c1.t;
                rt->amp = c1.amp;
                rt->epw = c1.epw;
                continue;
            }
            Cand *cd = v_cd->p;
            Py_ssize_t *rank = v_rank->p;
            for (Py_ssize_t u = 0; u < n_cand; u++) {
                cd[u] = CA[q0 + u];
                cd[u].amp = EX[q0 + u];
            }
            for (Py_ssize_t u = 1; u < n_cand; u++) { /* stable: the NumPy code's per-bucket passes */
                const Cand x = cd[u];
                Py_ssize_t j = u;
                while (j > 0 && cd[j - 1].k > x.k) {
                    cd[j] = cd[j - 1];
                    j--;
                }
                cd[j] = x;
            }
            if (noisy) /* detect_noisy_peaks */
                for (Py_ssize_t u = 0; u < n_cand; u++)
                    noisy_detect(cd + u, SIG[i], shot, u < d ? Z[i * d + u] : 0.0, threshold, epw_c);
            /* select_returns: the greedy suppression from the strongest down (ties: NumPy's sort decides) */
            Py_ssize_t nv = 0;
            int tie = 0;
            for (Py_ssize_t u = 0; u < n_cand; u++) {
                if (!cd[u].valid) continue;
                if (isnan(cd[u].amp)) tie = 1;
                Py_ssize_t j = nv;
                while (j > 0 && cd[rank[j - 1]].amp < cd[u].amp) {
                    rank[j] = rank[j - 1];
                    j--;
                }
                if (j > 0 && cd[rank[j - 1]].amp == cd[u].amp) tie = 1;
                rank[j] = u;
                nv++;
            }
            if (tie) {
                fb[i] = 1;
                n_fb++;
                continue;
            }
            Py_ssize_t nk = 0; /* the kept ones in rank[0 .. nk), strongest first */
            for (Py_ssize_t u = 0; u < nv; u++) {
                const Cand *c = cd + rank[u];
                int close = 0;
                for (Py_ssize_t x = 0; x < nk && !close; x++) close = fabs(cd[rank[x]].t - c->t) < min_sep;
                if (!close) rank[nk++] = rank[u];
            }
            if (nk == 0) continue;
            /* argmax / argmin over the candidates in their order: the first wins a tie */
            Py_ssize_t strongest = rank[0], last = -1, firstc = -1;
            for (Py_ssize_t u = 0; u < n_cand; u++) {
                int kept = 0;
                for (Py_ssize_t x = 0; x < nk && !kept; x++) kept = rank[x] == u;
                if (!kept) continue;
                if (last < 0 || cd[u].t > cd[last].t) last = u;
                if (firstc < 0 || cd[u].t < cd[firstc].t) firstc = u;
            }
            Py_ssize_t sel[128], ns = 0;
            if (kind == KIND_STRONGEST) {
                sel[ns++] = strongest;
            } else if (kind == KIND_LAST) {
                sel[ns++] = last;
            } else if (kind == KIND_FIRST) {
                sel[ns++] = firstc;
            } else if (kind == KIND_STRONGEST_LAST) {
                sel[ns++] = strongest;
                if (nk > 1) sel[ns++] = last == strongest ? rank[1] : last;
            } else {
                Py_ssize_t want = kind == KIND_TWO_STRONGEST ? 2 : max_returns;
                if (want > r) want = r;
                for (Py_ssize_t x = 0; x < nk && ns < want && ns < 128; x++) sel[ns++] = rank[x];
            }
            /* range order: two by one comparison (row_argsort), more by a sort whose ties are NumPy's */
            if (ns == 2 && cd[sel[1]].t < cd[sel[0]].t) {
                const Py_ssize_t x = sel[0];
                sel[0] = sel[1];
                sel[1] = x;
            } else if (ns > 2) {
                for (Py_ssize_t u = 1; u < ns; u++) {
                    const Py_ssize_t x = sel[u];
                    Py_ssize_t j = u;
                    while (j > 0 && cd[sel[j - 1]].t > cd[x].t) {
                        sel[j] = sel[j - 1];
                        j--;
                    }
                    if (j > 0 && cd[sel[j - 1]].t == cd[x].t) tie = 1;
                    sel[j] = x;
                }
                if (tie) {
                    fb[i] = 1;
                    n_fb++;
                    continue;
                }
            }
            if (need(v_ret, n_ret + ns, sizeof(Ret))) {
                failed = 1;
                break;
            }
            for (Py_ssize_t u = 0; u < ns; u++) {
                Ret *rt = (Ret *)v_ret->p + n_ret++;
                rt->pulse = i;
                rt->rid = u;
                rt->t = cd[sel[u]].t;
                rt->amp = cd[sel[u]].amp;
                rt->epw = cd[sel[u]].epw;
            }
        }
        if (failed || need(v_cx, n_ret * e, sizeof(double)) || need(v_at, n_ret, sizeof(Py_ssize_t))) {
            failed = 1;
            break;
        }
        /* 7. the echo contributing most at each peak names its surface. A return with one echo at a
         * finite distance in time is named by it: its value, a positive height (or inf) times an exp of
         * at most 350 below 0, beats every other echo's -1, so its exps are not taken (CX_ONE) */
        double *CX = v_cx->p;
        const Ret *RT = v_ret->p;
        Py_ssize_t *cx_at = v_at->p, n_cx = 0;
        for (Py_ssize_t u = 0; u < n_ret; u++) {
            const double *ts = ts_b + (RT[u].pulse - i0) * e;
            Py_ssize_t n_finite = 0, only = 0;
            for (Py_ssize_t j = 0; j < e; j++)
                if (isfinite(ts[j] - RT[u].t)) {
                    n_finite++;
                    only = j;
                }
            if (n_finite == 1) {
                cx_at[u] = CX_ONE - only;
                continue;
            }
            cx_at[u] = n_cx;
            for (Py_ssize_t j = 0; j < e; j++) {
                const double dd = ts[j] - RT[u].t;
                const double x = dd * dd / s2;
                CX[n_cx + j] = -0.5 * (isnan(x) || x < 700.0 ? x : 700.0);
            }
            n_cx += e;
        }
        run_loop(&exp_d, CX, n_cx, sizeof(double));
        for (Py_ssize_t u = 0; u < n_ret; u++) {
            const Py_ssize_t off = (RT[u].pulse - i0) * e;
            const double *ts = ts_b + off;
            const float *am = am_b + off;
            Py_ssize_t best = 0;
            double best_v = 0.0;
            const Py_ssize_t at = cx_at[u];
            if (at <= CX_ONE) best = CX_ONE - at;
            for (Py_ssize_t j = 0; j < e && at > CX_ONE; j++) {
                const double dd = ts[j] - RT[u].t;
                const double val = isfinite(dd) ? (double)am[j] * CX[at + j] : -1.0;
                if (j == 0 || val > best_v || (isnan(val) && !isnan(best_v))) {
                    best = j;
                    best_v = val;
                    if (isnan(val)) break;
                }
            }
            out_p[n_out] = RT[u].pulse;
            out_r[n_out] = (uint8_t)RT[u].rid;
            out_t[n_out] = RT[u].t;
            out_a[n_out] = RT[u].amp;
            out_w[n_out] = RT[u].epw;
            out_e[n_out] = ord_b[off + best];
            n_out++;
        }
    }
    Py_END_ALLOW_THREADS
    free(ts_b);
    free(am_b);
    free(ord_b);
    free(one_rows);
    for (int k = 0; k < N_VEC; k++) free(v[k].p);
    free(v_grid.p);
    buf_release(buf, 13);
    if (failed) return PyErr_NoMemory();
    return Py_BuildValue("(nn)", n_out, n_fb);
}

/* probe(index, buffer, nin): one of this module's loops run on the buffer (_np_loops.h np_loop_probe) */
static PyObject *probe(PyObject *self, PyObject *args) {
    (void)self;
    static const NpLoop *const loops[] = {&exp_f, &exp_d, &log_f};
    static const Py_ssize_t items[] = {4, 8, 4};
    return np_loop_probe(loops, items, 3, args);
}

static PyMethodDef methods[] = {
    {"probe", probe, METH_VARARGS, "Run one of the loops setup() took on a buffer (see _np_loops.h)."},
    {"setup", setup, METH_VARARGS, "Take NumPy's exp and log loops from np.exp and np.log (see the source)."},
    {"pulse_returns", pulse_returns, METH_VARARGS, "The waveform search, pulse by pulse (see the source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_waveform_pulses", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__waveform_pulses(void) { return PyModule_Create(&module); }
