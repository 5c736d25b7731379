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
    int k;      /* bucket: log2 of the cluster's bins */
    double t;   /* refined peak time */
    float amp;  /* refined height */
    float epw;  /* echo pulse width */
    int valid;
} Cand;

typedef struct {
    double gap, span, pad, pad2, dt, coef, s2, epw_c, shot_w, threshold, min_sep;
    float search32, log_search32, dt32, coef32;
    int kind, max_returns, noisy;
    Py_ssize_t p, e, d;
} Params;

typedef struct {
    float *g;      /* m x b exponents, then samples */
    float *wave;   /* b */
    float *logs;   /* 7 per peak */
    float *expo;   /* 1 per peak */
    Py_ssize_t *pk_bi, *pk_lo, *pk_hi;
    Cand *cand;
    double *ex;    /* e: the contributions' exponents */
    Py_ssize_t cap_g, cap_pk, cap_cand;
} Scratch;

static int grow(void **p, Py_ssize_t *cap, Py_ssize_t need, size_t item) {
    if (need <= *cap) return 0;
    Py_ssize_t n = need > 2 * *cap ? need : 2 * *cap;
    void *q = realloc(*p, (size_t)n * item);
    if (q == NULL) return -1;
    *p = q;
    *cap = n;
    return 0;
}

/* The peaks of one cluster (echoes ts[f .. f + m), heights am) appended to the pulse's candidates. */
static int cluster_peaks(const Params *P, Scratch *S, const double *ts, const float *am, Py_ssize_t f,
                         Py_ssize_t m, double start, double span, Py_ssize_t *n_cand) {
    const int64_t need = (int64_t)ceil((span + P->pad2) / P->dt) + 2;
    int k;
    frexp((double)((need > 32 ? need : 32) - 1), &k);
    const Py_ssize_t b = (Py_ssize_t)1 << k;
    if (grow((void **)&S->g, &S->cap_g, m * b + b, sizeof(float))) return -1;
    if (b > S->cap_pk) { /* a cluster has at most b peaks: every per-peak array holds b */
        Py_ssize_t cap = S->cap_pk;
        if (grow((void **)&S->pk_bi, &cap, b, sizeof(Py_ssize_t))) return -1;
        cap = S->cap_pk;
        if (grow((void **)&S->pk_lo, &cap, b, sizeof(Py_ssize_t))) return -1;
        cap = S->cap_pk;
        if (grow((void **)&S->pk_hi, &cap, b, sizeof(Py_ssize_t))) return -1;
        cap = S->cap_pk;
        if (grow((void **)&S->expo, &cap, b, sizeof(float))) return -1;
        cap = S->cap_pk;
        if (grow((void **)&S->logs, &cap, 7 * b, sizeof(float))) return -1;
        S->cap_pk = b;
    }
    float *g = S->g, *w = S->g + m * b;
    for (Py_ssize_t q = 0; q < m; q++) {
        const float rel = (float)(ts[f + q] - start);
        float *row = g + q * b;
        for (Py_ssize_t j = 0; j < b; j++) {
            const float d = (float)j * P->dt32 - rel;
            row[j] = (P->coef32 * d) * d;
        }
    }
    run_loop(&exp_f, g, m * b, sizeof(float));
    const float a0 = am[f];
    for (Py_ssize_t j = 0; j < b; j++) w[j] = g[j] * a0;
    for (Py_ssize_t q = 1; q < m; q++) {
        const float a = am[f + q];
        const float *gq = g + q * b;
        for (Py_ssize_t j = 0; j < b; j++) w[j] = w[j] + gq[j] * a;
    }
    /* peaks at or above the search level, and the runs above it around them (peak_runs) */
    const float thr = P->search32;
    Py_ssize_t npk = 0, last_below = -1;
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
        S->pk_bi[npk] = j;
        S->pk_lo[npk] = last_below;
        S->pk_hi[npk] = next_below;
        npk++;
    }
    if (npk == 0) return 0;
    /* the logs: l0, l1, l2 around the peak, and y0, y1 of each crossing (_crossing) */
    float *lg = S->logs;
    for (Py_ssize_t q = 0; q < npk; q++) {
        const Py_ssize_t bi = S->pk_bi[q];
        float *L = lg + 7 * q;
        L[0] = log_arg(bi > 0 ? w[bi - 1] : 0.0f);
        L[1] = log_arg(w[bi]);
        L[2] = log_arg(bi < b - 1 ? w[bi + 1] : 0.0f);
        const Py_ssize_t jl = S->pk_lo[q] > 0 ? S->pk_lo[q] : 0;
        const Py_ssize_t jr = (S->pk_hi[q] < b - 1 ? S->pk_hi[q] : b - 1) - 1;
        L[3] = log_arg(w[jl]);
        L[4] = log_arg(w[jl + 1 < b - 1 ? jl + 1 : b - 1]);
        L[5] = log_arg(w[jr]);
        L[6] = log_arg(w[jr + 1 < b - 1 ? jr + 1 : b - 1]);
    }
    run_loop(&log_f, lg, 7 * npk, sizeof(float));
    float *delta = S->expo; /* delta first, then the height's exponent in place */
    for (Py_ssize_t q = 0; q < npk; q++) {
        const float *L = lg + 7 * q;
        const float den = (L[0] - 2.0f * L[1]) + L[2];
        float dl = den < 0 ? (0.5f * (L[0] - L[2])) / den : 0.0f;
        delta[q] = clip_np(dl, -0.5f, 0.5f);
    }
    if (grow((void **)&S->cand, &S->cap_cand, *n_cand + npk, sizeof(Cand))) return -1;
    for (Py_ssize_t q = 0; q < npk; q++) {
        const float *L = lg + 7 * q;
        const Py_ssize_t bi = S->pk_bi[q];
        Cand *c = S->cand + *n_cand + q;
        c->k = k;
        c->t = start + ((double)bi + (double)delta[q]) * P->dt;
        /* echo pulse width: the crossings of the search level, log-linear between two samples */
        double cross[2];
        for (int side = 0; side < 2; side++) {
            const Py_ssize_t j = side == 0 ? (S->pk_lo[q] > 0 ? S->pk_lo[q] : 0)
                                           : (S->pk_hi[q] < b - 1 ? S->pk_hi[q] : b - 1) - 1;
            const float y0 = L[3 + 2 * side], y1 = L[4 + 2 * side];
            const float den = y1 - y0;
            const int ok = fabsf(den) > 1e-12f;
            float frac = ok ? (P->log_search32 - y0) / den : 0.0f;
            frac = clip_np(frac, 0.0f, 1.0f);
            cross[side] = ((double)j + (double)frac) * P->dt;
        }
        c->epw = (float)max_np64(cross[1] - cross[0], 0.0);
        c->valid = 1;
        delta[q] = L[1] - (0.25f * (L[0] - L[2])) * delta[q];
    }
    run_loop(&exp_f, delta, npk, sizeof(float));
    for (Py_ssize_t q = 0; q < npk; q++) S->cand[*n_cand + q].amp = delta[q];
    *n_cand += npk;
    return 0;
}

/* pulse_returns(t f8 (p, e), amp f4 (p, e), order i8 (p, e) or None (e == 2 only), sigma f8 (p) or None,
 *   z f8 (p, d) or None, d, consts f8 (11), kind, max_returns,
 *   out: pulse i8, rid u1, t f8, amp f4, epw f4, echo i8 (p * r each), fallback u1 (p)) -> (returns, fallbacks)
 * consts: gap, span, pad, pad2, dt, coef, sigma^2, the noisy EPW's correction, shot_w, threshold, min
 * separation; then search level as consts[11]. */
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
    Params P = {C[0], C[1], C[2], C[3], C[4], C[5], C[6], C[7], C[8], C[9], C[10],
                (float)C[11], (float)log(C[11]), (float)C[4], (float)C[5], kind, max_returns, noisy, p, e, d};
    Scratch S;
    memset(&S, 0, sizeof S);
    double *ts = malloc((size_t)e * sizeof(double));
    float *am = malloc((size_t)e * sizeof(float));
    int64_t *ord = malloc((size_t)e * sizeof(int64_t));
    S.ex = malloc((size_t)e * sizeof(double));
    Py_ssize_t *rank = malloc((size_t)(e + 1) * 64 * sizeof(Py_ssize_t));
    Py_ssize_t cap_rank = (e + 1) * 64;
    Py_ssize_t n_out = 0, n_fb = 0;
    int failed = ts == NULL || am == NULL || ord == NULL || S.ex == NULL || rank == NULL;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < p && !failed; i++) {
        const double *t = T + i * e;
        const float *a = A + i * e;
        fb[i] = 0;
        /* sorted in time (cluster_echoes): no echo is +inf, and sorts last */
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
        /* clusters and their peaks */
        Py_ssize_t n_cand = 0;
        for (Py_ssize_t j = 0; j < e;) {
            if (!isfinite(ts[j])) {
                j++;
                continue;
            }
            const Py_ssize_t f = j;
            const double first = ts[j];
            j++;
            while (j < e && isfinite(ts[j]) && !(ts[j] - ts[j - 1] > P.gap || ts[j] - first > P.span)) j++;
            if (cluster_peaks(&P, &S, ts, am, f, j - f, first - P.pad, ts[j - 1] - first, &n_cand)) {
                failed = 1;
                break;
            }
        }
        if (failed || n_cand == 0) continue;
        Cand *cd = S.cand;
        /* the candidates in bucket order (a stable sort: the NumPy code's per-bucket passes) */
        for (Py_ssize_t q = 1; q < n_cand; q++) {
            Cand x = cd[q];
            Py_ssize_t j = q;
            while (j > 0 && cd[j - 1].k > x.k) {
                cd[j] = cd[j - 1];
                j--;
            }
            cd[j] = x;
        }
        if (noisy) { /* detect_noisy_peaks */
            const double sw = SIG[i];
            for (Py_ssize_t q = 0; q < n_cand; q++) {
                const double zq = q < d ? Z[i * d + q] : 0.0;
                const double av = (double)cd[q].amp;
                const double s = sqrt(sw * sw + P.shot_w * max_np64(av, 0.0));
                cd[q].valid = av + s * zq >= P.threshold;
                const double w2 = (double)cd[q].epw * (double)cd[q].epw - P.epw_c;
                cd[q].epw = (float)sqrt(max_np64(w2, 0.0));
            }
        }
        /* select_returns: the greedy suppression from the strongest down */
        if (grow((void **)&rank, &cap_rank, n_cand, sizeof(Py_ssize_t))) {
            failed = 1;
            break;
        }
        Py_ssize_t nv = 0;
        int tie = 0;
        for (Py_ssize_t q = 0; q < n_cand; q++) {
            if (!cd[q].valid) continue;
            if (isnan(cd[q].amp)) tie = 1;
            Py_ssize_t j = nv;
            while (j > 0 && cd[rank[j - 1]].amp < cd[q].amp) {
                rank[j] = rank[j - 1];
                j--;
            }
            if (j > 0 && cd[rank[j - 1]].amp == cd[q].amp) tie = 1;
            rank[j] = q;
            nv++;
        }
        if (tie) {
            fb[i] = 1;
            n_fb++;
            continue;
        }
        Py_ssize_t nk = 0; /* the kept ones in rank[0 .. nk), strongest first */
        for (Py_ssize_t v = 0; v < nv; v++) {
            const Cand *c = cd + rank[v];
            int close = 0;
            for (Py_ssize_t u = 0; u < nk && !close; u++) close = fabs(cd[rank[u]].t - c->t) < P.min_sep;
            if (!close) rank[nk++] = rank[v];
        }
        if (nk == 0) continue;
        Py_ssize_t sel[128];
        Py_ssize_t ns = 0;
        /* argmax / argmin over the candidates in their order: the first one wins a tie */
        Py_ssize_t strongest = rank[0], last = -1, firstc = -1;
        for (Py_ssize_t q = 0; q < n_cand; q++) {
            int kept = 0;
            for (Py_ssize_t u = 0; u < nk && !kept; u++) kept = rank[u] == q;
            if (!kept) continue;
            if (last < 0 || cd[q].t > cd[last].t) last = q;
            if (firstc < 0 || cd[q].t < cd[firstc].t) firstc = q;
        }
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
            for (Py_ssize_t u = 0; u < nk && ns < want && ns < 128; u++) sel[ns++] = rank[u];
        }
        /* range order: two by one comparison (row_argsort), more by a sort whose ties are NumPy's */
        if (ns == 2) {
            if (cd[sel[1]].t < cd[sel[0]].t) {
                const Py_ssize_t x = sel[0];
                sel[0] = sel[1];
                sel[1] = x;
            }
        } else if (ns > 2) {
            for (Py_ssize_t q = 1; q < ns; q++) {
                const Py_ssize_t x = sel[q];
                Py_ssize_t j = q;
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
        /* the echo contributing most at each peak names its surface */
        for (Py_ssize_t q = 0; q < ns; q++) {
            const Cand *c = cd + sel[q];
            for (Py_ssize_t j = 0; j < e; j++) {
                const double dd = ts[j] - c->t;
                const double x = dd * dd / P.s2;
                S.ex[j] = -0.5 * (isnan(x) || x < 700.0 ? x : 700.0);
            }
            run_loop(&exp_d, S.ex, e, sizeof(double));
            Py_ssize_t best = 0;
            double best_v = 0.0;
            for (Py_ssize_t j = 0; j < e; j++) {
                const double dd = ts[j] - c->t;
                const double v = isfinite(dd) ? (double)am[j] * S.ex[j] : -1.0;
                if (j == 0 || v > best_v || (isnan(v) && !isnan(best_v))) {
                    best = j;
                    best_v = v;
                    if (isnan(v)) break;
                }
            }
            out_p[n_out] = i;
            out_r[n_out] = (uint8_t)q;
            out_t[n_out] = c->t;
            out_a[n_out] = c->amp;
            out_w[n_out] = c->epw;
            out_e[n_out] = ord[best];
            n_out++;
        }
    }
    Py_END_ALLOW_THREADS
    free(ts);
    free(am);
    free(ord);
    free(S.ex);
    free(rank);
    free(S.g);
    free(S.pk_bi);
    free(S.pk_lo);
    free(S.pk_hi);
    free(S.logs);
    free(S.expo);
    free(S.cand);
    buf_release(buf, 13);
    if (failed) return PyErr_NoMemory();
    return Py_BuildValue("(nn)", n_out, n_fb);
}

static PyMethodDef methods[] = {
    {"setup", setup, METH_VARARGS, "Take NumPy's exp and log loops from np.exp and np.log (see the source)."},
    {"pulse_returns", pulse_returns, METH_VARARGS, "The waveform search, pulse by pulse (see the source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_waveform_pulses", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__waveform_pulses(void) { return PyModule_Create(&module); }
