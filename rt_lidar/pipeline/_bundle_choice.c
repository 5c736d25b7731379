/* Which pulses of a --beam full frame get the bundle (rt_lidar/pipeline/beam_full.py _neighbour_pairs and
 * bundle_pulses) in one pass, with the GIL released (rt_lidar/pipeline/beam_steps.py choose_bundles is its
 * Python side): the firings sorted by (ring in elevation order, azimuth) with a stable merge sort (a
 * stable sort's order is the only one), each one's neighbour along its ring and in the ring above, and
 * for each pair the tests of a depth edge, glass and a retro-reflector. The NumPy code's float32 and
 * float64 operations in its order (built with -ffp-contract=off), float32 comparisons where it compares
 * float32 arrays with Python floats, and its hypot NumPy's own loop (_np_loops.h), so the same marks
 * (tests/rt_lidar/test_beam_steps.py). Optional extension: where it is missing, the NumPy code runs.
 */
#include "_np_twins.h"
#include "_np_loops.h"

#include <stdlib.h>

static NpLoop hypot_f;
static int loops_ready = 0;

/* setup(np.hypot) -> bool: take its float32 loop (False if not found). */
static PyObject *setup(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *u;
    if (!PyArg_ParseTuple(args, "O", &u)) return NULL;
    NpLoop a;
    if (np_loop_find_n(u, "hypot", 2, NP_TYPE_FLOAT, &a)) Py_RETURN_FALSE;
    hypot_f = a;
    loops_ready = 1;
    Py_RETURN_TRUE;
}

static inline float min_np(float a, float b) { return isnan(a) ? a : (isnan(b) ? b : (a < b ? a : b)); }

/* indices 0 .. n - 1 sorted by key, equal keys in index order (bottom-up merge sort through tmp) */
static void stable_argsort(const double *key, int64_t *idx, int64_t *tmp, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) idx[i] = i;
    int64_t *a = idx, *b = tmp;
    for (Py_ssize_t w = 1; w < n; w *= 2) {
        for (Py_ssize_t lo = 0; lo < n; lo += 2 * w) {
            const Py_ssize_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            Py_ssize_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) b[k++] = key[a[j]] < key[a[i]] ? a[j++] : a[i++];
            while (i < mid) b[k++] = a[i++];
            while (j < hi) b[k++] = a[j++];
        }
        int64_t *t = a;
        a = b;
        b = t;
    }
    if (a != idx) memcpy(idx, a, (size_t)n * sizeof(int64_t));
}

/* a[0 .. n - 1] sorted by key, equal keys in index order, where a holds indices in ascending order:
 * its strictly decreasing runs reversed (no equal keys in them), then its non-decreasing runs merged
 * pairwise (through b, the left one's first where keys are equal) until one is left */
static void natural_merge(const double *key, int64_t *a, int64_t *b, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n;) {
        Py_ssize_t j = i + 1;
        if (j < n && key[a[j]] < key[a[i]]) {
            while (j + 1 < n && key[a[j + 1]] < key[a[j]]) j++;
            for (Py_ssize_t p = i, q = j; p < q; p++, q--) {
                const int64_t t = a[p];
                a[p] = a[q];
                a[q] = t;
            }
            i = j + 1;
        } else {
            while (j < n && !(key[a[j]] < key[a[j - 1]])) j++;
            i = j;
        }
    }
    for (;;) {
        Py_ssize_t i = 0, k = 0, runs = 0;
        while (i < n) {
            Py_ssize_t mid = i + 1;
            while (mid < n && !(key[a[mid]] < key[a[mid - 1]])) mid++;
            Py_ssize_t hi = mid;
            if (mid < n) {
                hi = mid + 1;
                while (hi < n && !(key[a[hi]] < key[a[hi - 1]])) hi++;
            }
            Py_ssize_t p = i, q = mid;
            while (p < mid && q < hi) b[k++] = key[a[q]] < key[a[p]] ? a[q++] : a[p++];
            while (p < mid) b[k++] = a[p++];
            while (q < hi) b[k++] = a[q++];
            runs++;
            i = hi;
        }
        memcpy(a, b, (size_t)n * sizeof(int64_t));
        if (runs <= 1) return;
    }
}

/* idx: 0 .. n - 1 sorted by key, equal keys in index order (stable_argsort's order, the only one), for
 * keys rank * 720 + azimuth + 360 of ring ranks rank >= 0: where every rank's keys lie below the next
 * rank's (azimuths in [-180, 180)), the indices are put rank by rank in index order and each rank's
 * merged from its runs (the firings of a ring come in azimuth order, one wrap a frame: one or two runs),
 * in O(n) where the merge sort takes O(n log n) indirect reads; else (or where a rank is n or more, or
 * the rank tables cannot be had) stable_argsort. */
static void ring_argsort(const double *key, const int64_t *rank, int64_t *idx, int64_t *tmp, Py_ssize_t n) {
    int64_t max_rank = -1;
    int ok = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (rank[i] < 0 || isnan(key[i])) ok = 0;
        if (rank[i] > max_rank) max_rank = rank[i];
    }
    if (max_rank >= n) ok = 0; /* ranks of rings in elevation order are fewer than the firings */
    const size_t r_n = (size_t)(max_rank + 1);
    Py_ssize_t *start = ok ? calloc(r_n + 1, sizeof(Py_ssize_t)) : NULL;
    double *lo = ok ? malloc(r_n * sizeof(double)) : NULL, *hi = ok ? malloc(r_n * sizeof(double)) : NULL;
    if (!start || !lo || !hi) ok = 0;
    if (ok) {
        for (size_t r = 0; r < r_n; r++) {
            lo[r] = INFINITY;
            hi[r] = -INFINITY;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            const int64_t r = rank[i];
            start[r + 1]++;
            if (key[i] < lo[r]) lo[r] = key[i];
            if (key[i] > hi[r]) hi[r] = key[i];
        }
        double below = -INFINITY;
        for (size_t r = 0; r < r_n && ok; r++) {
            if (start[r + 1] == 0) continue;
            if (!(lo[r] > below)) ok = 0;
            below = hi[r];
        }
    }
    if (ok) {
        for (size_t r = 0; r < r_n; r++) start[r + 1] += start[r];
        for (Py_ssize_t i = 0; i < n; i++) idx[start[rank[i]]++] = i; /* start[r]: now rank r's end */
        Py_ssize_t s = 0;
        for (size_t r = 0; r < r_n; r++) {
            natural_merge(key, idx + s, tmp, start[r] - s);
            s = start[r];
        }
    }
    free(start);
    free(lo);
    free(hi);
    if (!ok) stable_argsort(key, idx, tmp, n);
}

#define CHUNK 512

/* choose(rank i8, az_deg f8, az f4, el f4, cos_el f4, range f4, segment u4, glass u1, glass_range f4, retro u1,
 *        n, max_deg, footprint, spread_m, edge_m, edge u1 out, glass u1 out, retro u1 out (n each)
 *        [, marked_i i8 out, marked_j i8 out (2 n + 1 each)]) -> pairs
 * rank: each firing's ring's rank in elevation; az_deg: its azimuth (degrees, float64); az, el: in radians
 * (float32); cos_el: np.cos(el); the marks are 0 or 1. With marked_i / marked_j, the pairs that marked
 * their two pulses (for any reason) are written there, in the order of the pairs, and their count is
 * returned instead of the pairs'. */
static PyObject *choose(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[15] = {NULL};
    Py_ssize_t n;
    double max_deg, foot_d, spread_d, edge_d;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOnddddOOO|OO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7],
                          &o[8], &o[9], &n, &max_deg, &foot_d, &spread_d, &edge_d, &o[10], &o[11], &o[12], &o[13],
                          &o[14]))
        return NULL;
    const int with_pairs = o[13] != NULL && o[14] != NULL;
    if (!loops_ready) return PyErr_Format(PyExc_RuntimeError, "choose: setup() did not find NumPy's hypot loop");
    Buf b[15];
    memset(b, 0, sizeof b);
    const char fmt[15] = {'q', 'd', 'f', 'f', 'f', 'f', 'I', 'B', 'f', 'B', 'B', 'B', 'B', 'q', 'q'};
    const Py_ssize_t size[15] = {8, 8, 4, 4, 4, 4, 4, 1, 4, 1, 1, 1, 1, 8, 8};
    static const char *names[15] = {"rank", "az_deg", "az", "el", "cos_el", "range", "segment", "glass",
                                    "glass_range", "retro", "edge_out", "glass_out", "retro_out", "marked_i",
                                    "marked_j"};
    const int nbuf = with_pairs ? 15 : 13;
    for (int k = 0; k < nbuf; k++)
        if (buf_get(&b[k], o[k], k >= 10, fmt[k], size[k], k >= 13 ? 2 * n + 1 : n, names[k])) {
            buf_release(b, nbuf);
            return NULL;
        }
    int64_t *MI = with_pairs ? b[13].view.buf : NULL, *MJ = with_pairs ? b[14].view.buf : NULL;
    Py_ssize_t n_marked = 0;
    const int64_t *RANK = b[0].view.buf;
    const double *AZD = b[1].view.buf;
    const float *AZ = b[2].view.buf, *EL = b[3].view.buf, *CEL = b[4].view.buf, *RNG = b[5].view.buf;
    const float *GRNG = b[8].view.buf;
    const uint32_t *SEG = b[6].view.buf;
    const uint8_t *GL = b[7].view.buf, *RT = b[9].view.buf;
    uint8_t *m_edge = b[10].view.buf, *m_glass = b[11].view.buf, *m_retro = b[12].view.buf;
    const float foot = (float)foot_d, spread_m = (float)spread_d, edge_m = (float)edge_d;
    double *key = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    int64_t *order = malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    int64_t *tmp = malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    int64_t *left = malloc((size_t)(2 * n + 1) * sizeof(int64_t)), *right = malloc((size_t)(2 * n + 1) * sizeof(int64_t));
    if (key == NULL || order == NULL || tmp == NULL || left == NULL || right == NULL) {
        free(key);
        free(order);
        free(tmp);
        free(left);
        free(right);
        buf_release(b, nbuf);
        return PyErr_NoMemory();
    }
    Py_ssize_t np_ = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        m_edge[i] = m_glass[i] = m_retro[i] = 0;
        key[i] = (double)RANK[i] * 720.0 + (AZD[i] + 360.0);
    }
    if (n >= 2) {
        ring_argsort(key, RANK, order, tmp, n);
        /* along the ring: the next in azimuth */
        for (Py_ssize_t k = 0; k + 1 < n; k++) {
            const int64_t a = order[k], c = order[k + 1];
            if (RANK[c] == RANK[a] && fabs(AZD[c] - AZD[a]) <= max_deg) {
                left[np_] = a;
                right[np_] = c;
                np_++;
            }
        }
        /* the ring above: (rank + 1, azimuth) searched among the sorted keys, the nearer of the two */
        Py_ssize_t pos = 0;
        for (Py_ssize_t k = 0; k < n; k++) {
            const int64_t a = order[k];
            const double want = key[a] + 720.0;
            if (k > 0 && want < key[order[k - 1]] + 720.0) pos = 0; /* keys sorted: never, but stay exact */
            while (pos < n && key[order[pos]] < want) pos++;
            const Py_ssize_t lo = pos - 1 < 0 ? 0 : (pos - 1 > n - 1 ? n - 1 : pos - 1);
            const Py_ssize_t hi = pos > n - 1 ? n - 1 : pos;
            const int64_t l = order[lo], h = order[hi];
            const double d_lo = RANK[l] == RANK[a] + 1 ? fabs(AZD[l] - AZD[a]) : INFINITY;
            const double d_hi = RANK[h] == RANK[a] + 1 ? fabs(AZD[h] - AZD[a]) : INFINITY;
            const int64_t pick = d_lo <= d_hi ? l : h;
            if ((d_lo < d_hi ? d_lo : d_hi) <= max_deg) {
                left[np_] = a;
                right[np_] = pick;
                np_++;
            }
        }
        /* the tests of each pair, the angle between the two rays by NumPy's float32 hypot */
        float x[CHUNK], y[CHUNK], sep[CHUNK];
        for (Py_ssize_t q0 = 0; q0 < np_; q0 += CHUNK) {
            const Py_ssize_t m = np_ - q0 < CHUNK ? np_ - q0 : CHUNK;
            for (Py_ssize_t q = 0; q < m; q++) {
                const int64_t i = left[q0 + q], j = right[q0 + q];
                x[q] = (AZ[i] - AZ[j]) * CEL[i];
                y[q] = EL[i] - EL[j];
            }
            np_loop_run2(&hypot_f, x, y, sep, m, sizeof(float));
            for (Py_ssize_t q = 0; q < m; q++) {
                const int64_t i = left[q0 + q], j = right[q0 + q];
                const float scale = min_np(1.0f, foot / max_np(sep[q], 1e-9f));
                const float dr = fabsf(RNG[i] - RNG[j]);
                const float spread = dr * scale;
                const float jump = SEG[i] != SEG[j] ? dr : 0.0f;
                const float g_spread = fabsf(GRNG[i] - GRNG[j]) * scale;
                const int hit_i = isfinite(RNG[i]), hit_j = isfinite(RNG[j]);
                const int edge = (hit_i != hit_j) || (hit_i && hit_j && (spread > spread_m || jump > edge_m));
                const int glass = (GL[i] != GL[j]) || (GL[i] && GL[j] && g_spread > edge_m);
                const int retro = RT[i] != RT[j];
                if (edge) m_edge[i] = m_edge[j] = 1;
                if (glass) m_glass[i] = m_glass[j] = 1;
                if (retro) m_retro[i] = m_retro[j] = 1;
                if (with_pairs && (edge || glass || retro)) {
                    MI[n_marked] = i;
                    MJ[n_marked] = j;
                    n_marked++;
                }
            }
        }
    }
    Py_END_ALLOW_THREADS
    free(key);
    free(order);
    free(tmp);
    free(left);
    free(right);
    buf_release(b, nbuf);
    return PyLong_FromSsize_t(with_pairs ? n_marked : np_);
}

static inline double min_np_d(double a, double b) { return isnan(a) ? a : (isnan(b) ? b : (a < b ? a : b)); }

/* seam(rank i8 (n), az_deg f8 (n), n, seam_steps, max_deg, keys i8 out (2 n)) -> count
 * rt_lidar/pipeline/beam_probe.py seam_keys in one pass: the firings sorted by (ring rank, azimuth) as
 * choose() sorts them, each one's step along its ring (the nearer azimuth neighbour), and the nearest
 * pulse of the ring next above and below (a merge walk over the sorted keys, where NumPy searches each);
 * a pulse whose neighbouring ring is in the frame (a rank of the firings) but farther than
 * min(seam_steps x its step, max_deg) in azimuth probes that way. keys: side * n + pulse of those
 * probes (side 2 down, 3 up), ascending; returns their count. The azimuths are finite and the ranks
 * >= 0 (the Python side checks). */
static PyObject *seam(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[3];
    Py_ssize_t n;
    double seam_steps, max_deg;
    if (!PyArg_ParseTuple(args, "OOnddO", &o[0], &o[1], &n, &seam_steps, &max_deg, &o[2])) return NULL;
    if (n < 0) return PyErr_Format(PyExc_ValueError, "seam: n = %zd", n);
    Buf b[3];
    memset(b, 0, sizeof b);
    if (buf_get(&b[0], o[0], 0, 'q', 8, n, "rank") || buf_get(&b[1], o[1], 0, 'd', 8, n, "az_deg") ||
        buf_get(&b[2], o[2], 1, 'q', 8, 2 * n, "keys")) {
        buf_release(b, 3);
        return NULL;
    }
    const int64_t *RANK = b[0].view.buf;
    const double *AZD = b[1].view.buf;
    int64_t *OUT = b[2].view.buf;
    int64_t max_rank = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (RANK[i] < 0 || RANK[i] >= n) {
            buf_release(b, 3);
            return PyErr_Format(PyExc_ValueError, "seam: a ring rank outside 0..%zd", n - 1);
        }
        if (RANK[i] > max_rank) max_rank = RANK[i];
    }
    const size_t m = (size_t)(n > 0 ? n : 1);
    double *key = malloc(m * sizeof(double)), *ks = malloc(m * sizeof(double)), *as = malloc(m * sizeof(double));
    double *far = malloc(m * sizeof(double));
    int64_t *order = malloc(m * sizeof(int64_t)), *tmp = malloc(m * sizeof(int64_t)), *rs = malloc(m * sizeof(int64_t));
    uint8_t *lone = calloc(2 * m, 1), *present = calloc((size_t)(max_rank + 3), 1);
    if (!key || !ks || !as || !far || !order || !tmp || !rs || !lone || !present) {
        free(key); free(ks); free(as); free(far); free(order); free(tmp); free(rs); free(lone); free(present);
        buf_release(b, 3);
        return PyErr_NoMemory();
    }
    Py_ssize_t count = 0;
    Py_BEGIN_ALLOW_THREADS
    if (n >= 2) {
        for (Py_ssize_t i = 0; i < n; i++) {
            key[i] = (double)RANK[i] * 720.0 + (AZD[i] + 360.0);
            present[RANK[i]] = 1;
        }
        ring_argsort(key, RANK, order, tmp, n);
        for (Py_ssize_t k = 0; k < n; k++) {
            ks[k] = key[order[k]];
            rs[k] = RANK[order[k]];
            as[k] = AZD[order[k]];
        }
        /* each pulse's step along its ring: the nearer of its azimuth neighbours (none: max_deg) */
        for (Py_ssize_t k = 0; k < n; k++) {
            const double left = k > 0 && rs[k] == rs[k - 1] ? fabs(as[k] - as[k - 1]) : INFINITY;
            const double right = k + 1 < n && rs[k + 1] == rs[k] ? fabs(as[k + 1] - as[k]) : INFINITY;
            far[k] = min_np_d(seam_steps * min_np_d(left, right), max_deg);
        }
        for (int s = 0; s < 2; s++) { /* the ring above (side 3, up), then below (side 2, down) */
            const int64_t step = s == 0 ? 1 : -1;
            Py_ssize_t pos = 0;
            for (Py_ssize_t k = 0; k < n; k++) {
                const double want = ks[k] + 720.0 * (double)step; /* ks ascending: so is want */
                while (pos < n && ks[pos] < want) pos++;
                const Py_ssize_t lo = pos > 0 ? pos - 1 : 0;
                const Py_ssize_t hi = pos < n ? pos : n - 1;
                const int64_t r = rs[k] + step; /* -1 .. max_rank + 1 */
                if (r < 0 || !present[r]) continue;
                const double d_lo = rs[lo] == r ? fabs(as[lo] - as[k]) : INFINITY;
                const double d_hi = rs[hi] == r ? fabs(as[hi] - as[k]) : INFINITY;
                if (min_np_d(d_lo, d_hi) > far[k]) lone[(step > 0 ? m : 0) + (size_t)order[k]] = 1;
            }
        }
        for (Py_ssize_t side = 0; side < 2; side++) /* side 2 (down) then 3 (up): ascending keys */
            for (Py_ssize_t i = 0; i < n; i++)
                if (lone[(size_t)side * m + (size_t)i]) OUT[count++] = (2 + side) * n + i;
    }
    Py_END_ALLOW_THREADS
    free(key); free(ks); free(as); free(far); free(order); free(tmp); free(rs); free(lone); free(present);
    buf_release(b, 3);
    return PyLong_FromSsize_t(count);
}

/* probe(index, buffer, nin): one of this module's loops run on the buffer (_np_loops.h np_loop_probe) */
static PyObject *probe(PyObject *self, PyObject *args) {
    (void)self;
    static const NpLoop *const loops[] = {&hypot_f};
    static const Py_ssize_t items[] = {4};
    return np_loop_probe(loops, items, 1, args);
}

static PyMethodDef methods[] = {
    {"probe", probe, METH_VARARGS, "Run one of the loops setup() took on a buffer (see _np_loops.h)."},
    {"setup", setup, METH_VARARGS, "Take NumPy's float32 hypot loop (see the source)."},
    {"choose", choose, METH_VARARGS, "The marks of a --beam full frame's pulses (see the source)."},
    {"seam", seam, METH_VARARGS, "The seam probes' keys of a --beam full frame (see the source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_bundle_choice", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__bundle_choice(void) { return PyModule_Create(&module); }
