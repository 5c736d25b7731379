/* Compiled twins of two steps of WorldSource (rt_lidar.pipeline.source_steps), each one pass where
 * NumPy takes several, with the same operations in the same order and types, so the same bits (built
 * with -ffp-contract=off, as an optional extension; where it is missing the NumPy code runs):
 *
 * - first_surfaces: a frame's first hits split into the surfaces the rays end on and the transmissive
 *   ones they pass (glass), every per-ray field filled (NumPy: ~15 passes and as many temporaries);
 * - rotate_f32: sensor-frame directions rotated by each firing's quaternion (sources._rotate_f32);
 * - glass_step: one round of the rays that go on behind glass (the loop of WorldSource._cast without sun):
 *   the surfaces they end on written into the frame's fields, the ones that pass glass again moved on;
 * - glass_mirror_rays / mirror_hits: the mirror rays off the rays' first panes (the ghosts behind glass)
 *   made in one pass, and what they met scattered into every ray's fields in another;
 * - join_scan: a scan's parts (frames' points) joined, their times made relative to the scan start and
 *   its first returns counted (ScanAssembler._finish: NumPy copies, shifts and compares in three passes).
 *
 * The firings' poses are interpolated by unreal_bridge.world._cast_steps.interp_sorted.
 */
#include "_np_twins.h"

/* first_surfaces(distance f4, normal f4 (N, 3), segment u4, material i2, dirs f4 (N, 3), transmission f4
 *                (M), range f4, cos f4, material_out i2, segment_out u4, g_range f4, g_cos f4, g_mat i2,
 *                g_seg u4, g_trans f4, active i8 (N each unless said)) -> number of active rays
 * A hit (finite distance) on a material that transmits (transmission[max(material, 0)] > 0) passes:
 * its ray is active (its index in order in active) and fills the glass fields (distance, |n.d|, material,
 * segment, transmission squared), the others read inf / 0 / -1 / 0 / 1 there; every other ray ends on its
 * hit: range = distance, cos = |n.d| for a hit (0 for a miss and an active ray), material, segment
 * (active rays: inf, 0, -1, 0 until the cast behind the glass fills them). n.d = (n0 d0 + n1 d1) + n2 d2
 * in float32. */
static PyObject *first_surfaces(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[16];
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7],
                          &o[8], &o[9], &o[10], &o[11], &o[12], &o[13], &o[14], &o[15]))
        return NULL;
    Buf b[16];
    memset(b, 0, sizeof b);
    Py_ssize_t n = buf_items(o[0], 4), nt = buf_items(o[5], 4);
    if (n < 0 || nt < 0) return NULL;
    static const char fmt[16] = {'f', 'f', 'I', 'h', 'f', 'f', 'f', 'f', 'h', 'I', 'f', 'f', 'h', 'I', 'f', 'q'};
    static const Py_ssize_t size[16] = {4, 4, 4, 2, 4, 4, 4, 4, 2, 4, 4, 4, 2, 4, 4, 8};
    static const char *names[16] = {"distance", "normal", "segment", "material", "dirs", "transmission",
                                    "range", "cos", "material_out", "segment_out", "g_range", "g_cos",
                                    "g_mat", "g_seg", "g_trans", "active"};
    for (int i = 0; i < 16; i++) {
        Py_ssize_t count = i == 5 ? nt : ((i == 1 || i == 4) ? 3 * n : n);
        if (buf_get(&b[i], o[i], i >= 6, fmt[i], size[i], count, names[i]) != 0) {
            buf_release(b, 16);
            return NULL;
        }
    }
    const float *dist = b[0].view.buf, *nrm = b[1].view.buf, *dir = b[4].view.buf, *tr = b[5].view.buf;
    const uint32_t *seg = b[2].view.buf;
    const int16_t *mat = b[3].view.buf;
    float *range = b[6].view.buf, *cosi = b[7].view.buf, *g_range = b[10].view.buf, *g_cos = b[11].view.buf,
          *g_trans = b[14].view.buf;
    int16_t *mat_out = b[8].view.buf, *g_mat = b[12].view.buf;
    uint32_t *seg_out = b[9].view.buf, *g_seg = b[13].view.buf;
    int64_t *active = b[15].view.buf;
    Py_ssize_t m = 0, bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        const int k = mat[i] < 0 ? 0 : mat[i];
        if (k >= nt) {
            bad = i;
            break;
        }
        const int hit = isfinite(dist[i]);
        const float t = tr[k];
        const float c = fabsf((nrm[3 * i] * dir[3 * i] + nrm[3 * i + 1] * dir[3 * i + 1]) + nrm[3 * i + 2] * dir[3 * i + 2]);
        if (hit && t > 0) {
            active[m++] = i;
            range[i] = INFINITY;
            cosi[i] = 0.0f;
            mat_out[i] = -1;
            seg_out[i] = 0;
            g_range[i] = dist[i];
            g_cos[i] = c;
            g_mat[i] = mat[i];
            g_seg[i] = seg[i];
            g_trans[i] = t * t;
        } else {
            range[i] = dist[i];
            cosi[i] = hit ? c : 0.0f;
            mat_out[i] = mat[i];
            seg_out[i] = seg[i];
            g_range[i] = INFINITY;
            g_cos[i] = 0.0f;
            g_mat[i] = -1;
            g_seg[i] = 0;
            g_trans[i] = 1.0f;
        }
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 16);
    if (bad >= 0) return PyErr_Format(PyExc_IndexError, "first_surfaces: material of ray %zd is not in the table", bad);
    return PyLong_FromSsize_t(m);
}

/* rotate_f32(q f4 (N, 4) or (1, 4), v f4 (N, 3), out f4 (N, 3)): v rotated by the wxyz quaternions (one
 * for every row when q has one row), float32, in sources._rotate_f32's order. */
static PyObject *rotate_f32(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[3];
    if (!PyArg_ParseTuple(args, "OOO", &o[0], &o[1], &o[2])) return NULL;
    Buf b[3];
    memset(b, 0, sizeof b);
    Py_ssize_t n = buf_items(o[1], 12), nq = buf_items(o[0], 16);
    if (n < 0 || nq < 0) return NULL;
    if (nq != 1 && nq != n) return PyErr_Format(PyExc_ValueError, "rotate_f32: %zd quaternions for %zd rows", nq, n);
    if (buf_get(&b[0], o[0], 0, 'f', 4, 4 * nq, "q") || buf_get(&b[1], o[1], 0, 'f', 4, 3 * n, "v") ||
        buf_get(&b[2], o[2], 1, 'f', 4, 3 * n, "out")) {
        buf_release(b, 3);
        return NULL;
    }
    const float *q = b[0].view.buf, *v = b[1].view.buf;
    float *out = b[2].view.buf;
    const Py_ssize_t step = nq == 1 ? 0 : 4;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        const float *qi = q + step * i;
        const float w = qi[0], x = qi[1], y = qi[2], z = qi[3];
        const float vx = v[3 * i], vy = v[3 * i + 1], vz = v[3 * i + 2];
        const float tx = 2.0f * (y * vz - z * vy);
        const float ty = 2.0f * (z * vx - x * vz);
        const float tz = 2.0f * (x * vy - y * vx);
        out[3 * i] = (vx + w * tx) + (y * tz - z * ty);
        out[3 * i + 1] = (vy + w * ty) + (z * tx - x * tz);
        out[3 * i + 2] = (vz + w * tz) + (x * ty - y * tx);
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 3);
    Py_RETURN_NONE;
}

/* glass_step(distance f4 (A), normal f4 (A, 3), material i2 (A), segment u4 (A), travelled f4 (A),
 *            active i8 (A), d f4 (A, 3), org f4 (A, 3), transmission f4 (T), max_range, eps,
 *            range f4 (N), cos f4 (N), material_out i2 (N), segment_out u4 (N), g_trans f4 (N),
 *            org_out f4 (A, 3), travelled_out f4 (A), active_out i8 (A)) -> rays that go on
 * A round of the rays behind glass cast from org along d (their distances so far in travelled, their rows
 * of the frame in active): dist = distance + travelled; a hit is a finite distance with dist <= max_range
 * (float32, as NumPy compares a float32 array with a Python float); its transmission
 * transmission[max(material, 0)] (0 for no hit). A hit that does not transmit ends the ray: range, |n.d|
 * ((n0 d0 + n1 d1) + n2 d2), material and segment of its row. One that transmits multiplies its row's
 * g_trans by the transmission squared and goes on: its origin org + d (distance + eps), travelled +
 * (distance + eps) and its row, in order, into the *_out arrays. Every material is checked first, as
 * NumPy's indexing raises before anything is written. */
static PyObject *glass_step(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[18];
    double max_range, eps;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOddOOOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7],
                          &o[8], &max_range, &eps, &o[9], &o[10], &o[11], &o[12], &o[13], &o[14], &o[15], &o[16]))
        return NULL;
    Buf b[17];
    memset(b, 0, sizeof b);
    Py_ssize_t a = buf_items(o[0], 4), nt = buf_items(o[8], 4), n = buf_items(o[9], 4);
    if (a < 0 || nt < 0 || n < 0) return NULL;
    static const char fmt[17] = {'f', 'f', 'h', 'I', 'f', 'q', 'f', 'f', 'f', 'f', 'f', 'h', 'I', 'f', 'f', 'f', 'q'};
    static const Py_ssize_t size[17] = {4, 4, 2, 4, 4, 8, 4, 4, 4, 4, 4, 2, 4, 4, 4, 4, 8};
    static const char *names[17] = {"distance", "normal", "material", "segment", "travelled", "active", "d",
                                    "org", "transmission", "range", "cos", "material_out", "segment_out",
                                    "g_trans", "org_out", "travelled_out", "active_out"};
    for (int i = 0; i < 17; i++) {
        const Py_ssize_t count = i == 8 ? nt : (i >= 9 && i <= 13) ? n : (i == 1 || i == 6 || i == 7 || i == 14) ? 3 * a : a;
        if (buf_get(&b[i], o[i], i >= 9, fmt[i], size[i], count, names[i]) != 0) {
            buf_release(b, 17);
            return NULL;
        }
    }
    const float *dist = b[0].view.buf, *nrm = b[1].view.buf, *trv = b[4].view.buf, *d = b[6].view.buf,
                *org = b[7].view.buf, *tr = b[8].view.buf;
    const int16_t *mat = b[2].view.buf;
    const uint32_t *seg = b[3].view.buf;
    const int64_t *act = b[5].view.buf;
    float *range = b[9].view.buf, *cosi = b[10].view.buf, *g_trans = b[13].view.buf, *org_out = b[14].view.buf,
          *trv_out = b[15].view.buf;
    int16_t *mat_out = b[11].view.buf;
    uint32_t *seg_out = b[12].view.buf;
    int64_t *act_out = b[16].view.buf;
    const float limit = (float)max_range, epsf = (float)eps;
    Py_ssize_t m = 0, bad = -1, bad_row = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t j = 0; j < a; j++) {
        if ((mat[j] < 0 ? 0 : mat[j]) >= nt) {
            bad = j;
            break;
        }
        if (act[j] < 0 || act[j] >= n) {
            bad_row = j;
            break;
        }
    }
    if (bad < 0 && bad_row < 0) {
        for (Py_ssize_t j = 0; j < a; j++) {
            const float dj = dist[j] + trv[j];
            const int hit = isfinite(dist[j]) && dj <= limit;
            const float t = hit ? tr[mat[j] < 0 ? 0 : mat[j]] : 0.0f;
            const int64_t i = act[j];
            if (hit && t > 0) {
                g_trans[i] = g_trans[i] * (t * t);
                const float step = dist[j] + epsf;
                for (int c = 0; c < 3; c++) org_out[3 * m + c] = org[3 * j + c] + d[3 * j + c] * step;
                trv_out[m] = trv[j] + step;
                act_out[m] = i;
                m++;
            } else if (hit) {
                range[i] = dj;
                cosi[i] = fabsf((nrm[3 * j] * d[3 * j] + nrm[3 * j + 1] * d[3 * j + 1]) + nrm[3 * j + 2] * d[3 * j + 2]);
                mat_out[i] = mat[j];
                seg_out[i] = seg[j];
            }
        }
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 17);
    if (bad >= 0) return PyErr_Format(PyExc_IndexError, "glass_step: material of ray %zd is not in the table", bad);
    if (bad_row >= 0) return PyErr_Format(PyExc_IndexError, "glass_step: active[%zd] is not a row", bad_row);
    return PyLong_FromSsize_t(m);
}

/* glass_mirror_rays(origins f4 (N, 3), dirs f4 (N, 3), rows i8 (M), distance f4 (N), normal f4 (N, 3), eps,
 *                   org_out f4 (M, 3), mdir_out f4 (M, 3), dist_out f4 (M))
 * The mirror rays off the first pane of rays ``rows`` (WorldSource._glass_mirror, in NumPy's float32
 * order): the pane's normal n made unit (n / sqrt((n0 n0 + n1 n1) + n2 n2), einsum's order), d.n =
 * (d0 n0 + d1 n1) + d2 n2, the mirror direction d - (2 d.n) n made unit the same way, its start
 * (o + d dist) + s n eps with s = -1 where d.n > 0, else 1 (the sensor's side of the pane). */
/* The first of the m rows outside [0, n), or -1 when every row lies inside. */
static Py_ssize_t first_row_outside(const int64_t *rows, Py_ssize_t m, Py_ssize_t n) {
    for (Py_ssize_t j = 0; j < m; j++)
        if (rows[j] < 0 || rows[j] >= n)
            return j;
    return -1;
}

static PyObject *glass_mirror_rays(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[8];
    double eps;
    if (!PyArg_ParseTuple(args, "OOOOOdOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &eps, &o[5], &o[6], &o[7]))
        return NULL;
    Buf b[8];
    memset(b, 0, sizeof b);
    Py_ssize_t n = buf_items(o[3], 4), m = buf_items(o[2], 8);
    if (n < 0 || m < 0) return NULL;
    static const char fmt[8] = {'f', 'f', 'q', 'f', 'f', 'f', 'f', 'f'};
    static const Py_ssize_t size[8] = {4, 4, 8, 4, 4, 4, 4, 4};
    static const char *names[8] = {"origins", "dirs", "rows", "distance", "normal", "org_out", "mdir_out", "dist_out"};
    for (int i = 0; i < 8; i++) {
        const Py_ssize_t count = (i == 0 || i == 1 || i == 4) ? 3 * n : (i == 3 ? n : (i == 5 || i == 6) ? 3 * m : m);
        if (buf_get(&b[i], o[i], i >= 5, fmt[i], size[i], count, names[i]) != 0) {
            buf_release(b, 8);
            return NULL;
        }
    }
    const float *org = b[0].view.buf, *dir = b[1].view.buf, *dist = b[3].view.buf, *nrm = b[4].view.buf;
    const int64_t *rows = b[2].view.buf;
    float *org_out = b[5].view.buf, *mdir = b[6].view.buf, *dist_out = b[7].view.buf;
    const float epsf = (float)eps;
    Py_ssize_t bad;
    Py_BEGIN_ALLOW_THREADS
    bad = first_row_outside(rows, m, n);
    if (bad < 0)
        for (Py_ssize_t j = 0; j < m; j++) {
            const int64_t i = rows[j];
            const float *d = dir + 3 * i, *o_ = org + 3 * i;
            float u[3] = {nrm[3 * i], nrm[3 * i + 1], nrm[3 * i + 2]};
            const float un = sqrtf((u[0] * u[0] + u[1] * u[1]) + u[2] * u[2]);
            for (int c = 0; c < 3; c++) u[c] = u[c] / un;
            const float dn = (d[0] * u[0] + d[1] * u[1]) + d[2] * u[2];
            const float side = dn > 0 ? -1.0f : 1.0f, dn2 = 2.0f * dn, r = dist[i];
            float md[3];
            for (int c = 0; c < 3; c++) md[c] = d[c] - dn2 * u[c];
            const float mn = sqrtf((md[0] * md[0] + md[1] * md[1]) + md[2] * md[2]);
            for (int c = 0; c < 3; c++) {
                mdir[3 * j + c] = md[c] / mn;
                org_out[3 * j + c] = (o_[c] + d[c] * r) + (side * u[c]) * epsf;
            }
            dist_out[j] = r;
        }
    Py_END_ALLOW_THREADS
    buf_release(b, 8);
    if (bad >= 0) return PyErr_Format(PyExc_IndexError, "glass_mirror_rays: rows[%zd] is not a ray", bad);
    Py_RETURN_NONE;
}

/* mirror_hits(rows i8 (M), dist f4 (M), hit_distance f4 (M), hit_normal f4 (M, 3), hit_material i2 (M),
 *             hit_segment u4 (M), mdir f4 (M, 3), max_range, range f4 (N), cos f4 (N), material i2 (N),
 *             segment u4 (N))
 * What the mirror rays of rays ``rows`` met (WorldSource._mirror_cast after its cast): every ray's fields
 * first none (inf, 0, -1, 0); then where the mirror ray hit (a finite distance) within the sensor's range
 * (total = dist + distance <= max_range, float32 as NumPy compares a float32 array with a Python
 * float), its row's range = total, cos = |(n0 m0 + n1 m1) + n2 m2|, material and segment. */
static PyObject *mirror_hits(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[11];
    double max_range;
    if (!PyArg_ParseTuple(args, "OOOOOOOdOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &max_range, &o[7],
                          &o[8], &o[9], &o[10]))
        return NULL;
    Buf b[11];
    memset(b, 0, sizeof b);
    Py_ssize_t m = buf_items(o[0], 8), n = buf_items(o[7], 4);
    if (n < 0 || m < 0) return NULL;
    static const char fmt[11] = {'q', 'f', 'f', 'f', 'h', 'I', 'f', 'f', 'f', 'h', 'I'};
    static const Py_ssize_t size[11] = {8, 4, 4, 4, 2, 4, 4, 4, 4, 2, 4};
    static const char *names[11] = {"rows", "dist", "hit_distance", "hit_normal", "hit_material", "hit_segment",
                                    "mdir", "range", "cos", "material", "segment"};
    for (int i = 0; i < 11; i++) {
        const Py_ssize_t count = (i == 3 || i == 6) ? 3 * m : (i >= 7 ? n : m);
        if (buf_get(&b[i], o[i], i >= 7, fmt[i], size[i], count, names[i]) != 0) {
            buf_release(b, 11);
            return NULL;
        }
    }
    const int64_t *rows = b[0].view.buf;
    const float *dist = b[1].view.buf, *hd = b[2].view.buf, *hn = b[3].view.buf, *md = b[6].view.buf;
    const int16_t *hm = b[4].view.buf;
    const uint32_t *hs = b[5].view.buf;
    float *range = b[7].view.buf, *cosi = b[8].view.buf;
    int16_t *mat = b[9].view.buf;
    uint32_t *seg = b[10].view.buf;
    const float limit = (float)max_range;
    Py_ssize_t bad;
    Py_BEGIN_ALLOW_THREADS
    bad = first_row_outside(rows, m, n);
    if (bad < 0) {
        for (Py_ssize_t i = 0; i < n; i++) {
            range[i] = INFINITY;
            cosi[i] = 0.0f;
            mat[i] = -1;
            seg[i] = 0;
        }
        for (Py_ssize_t j = 0; j < m; j++) {
            const float total = dist[j] + hd[j];
            if (!(isfinite(hd[j]) && total <= limit)) continue;
            const int64_t i = rows[j];
            const float *a = hn + 3 * j, *c = md + 3 * j;
            range[i] = total;
            cosi[i] = fabsf((a[0] * c[0] + a[1] * c[1]) + a[2] * c[2]);
            mat[i] = hm[j];
            seg[i] = hs[j];
        }
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 11);
    if (bad >= 0) return PyErr_Format(PyExc_IndexError, "mirror_hits: rows[%zd] is not a ray", bad);
    Py_RETURN_NONE;
}

/* join_scan(parts (sequence of contiguous byte buffers of whole records), out u1 (the parts' bytes),
 *           itemsize, t_offset, return_id_offset, start) -> records whose return_id is 0
 * out gets the parts one after another, each record's int64 t (at t_offset) less start, wrapping as
 * NumPy's int64 subtraction does. */
static PyObject *join_scan(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *parts, *outobj;
    Py_ssize_t itemsize, t_off, rid_off;
    long long start;
    if (!PyArg_ParseTuple(args, "OOnnnL", &parts, &outobj, &itemsize, &t_off, &rid_off, &start)) return NULL;
    if (itemsize < 1 || t_off < 0 || t_off + 8 > itemsize || rid_off < 0 || rid_off >= itemsize)
        return PyErr_Format(PyExc_ValueError, "join_scan: fields outside a record of %zd bytes", itemsize);
    PyObject *seq = PySequence_Fast(parts, "join_scan: parts must be a sequence");
    if (seq == NULL) return NULL;
    const Py_ssize_t np_ = PySequence_Fast_GET_SIZE(seq);
    Py_buffer out;
    if (PyObject_GetBuffer(outobj, &out, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) != 0) {
        Py_DECREF(seq);
        return NULL;
    }
    Py_buffer *views = PyMem_Calloc((size_t)(np_ ? np_ : 1), sizeof(Py_buffer));
    Py_ssize_t got = 0, total = 0;
    if (views == NULL) PyErr_NoMemory();
    for (; views != NULL && got < np_; got++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, got), &views[got], PyBUF_C_CONTIGUOUS) != 0) break;
        total += views[got].len;
        if (views[got].len % itemsize) {
            PyErr_Format(PyExc_ValueError, "join_scan: part %zd is not whole records of %zd bytes", got, itemsize);
            got++;
            break;
        }
    }
    long long returned = -1;
    if (views != NULL && got == np_ && !PyErr_Occurred()) {
        if (total != out.len) {
            PyErr_Format(PyExc_ValueError, "join_scan: out has %zd bytes for %zd", out.len, total);
        } else {
            returned = 0;
            const uint64_t shift = (uint64_t)start;
            Py_BEGIN_ALLOW_THREADS
            char *dst = out.buf;
            for (Py_ssize_t k = 0; k < np_; k++) {
                const char *src = views[k].buf;
                const Py_ssize_t n = views[k].len / itemsize;
                memcpy(dst, src, (size_t)views[k].len);
                for (Py_ssize_t j = 0; j < n; j++, dst += itemsize) {
                    uint64_t t;
                    memcpy(&t, dst + t_off, 8);
                    t -= shift;
                    memcpy(dst + t_off, &t, 8);
                    returned += dst[rid_off] == 0;
                }
            }
            Py_END_ALLOW_THREADS
        }
    }
    for (Py_ssize_t k = 0; k < got; k++) PyBuffer_Release(&views[k]);
    PyMem_Free(views);
    PyBuffer_Release(&out);
    Py_DECREF(seq);
    if (returned < 0) return NULL;
    return PyLong_FromLongLong(returned);
}

static PyMethodDef methods[] = {
    {"first_surfaces", first_surfaces, METH_VARARGS, "WorldSource._cast's first-surface step (see the source)."},
    {"rotate_f32", rotate_f32, METH_VARARGS, "Directions rotated by quaternions, float32 (see the source)."},
    {"glass_step", glass_step, METH_VARARGS, "One round of the rays behind glass (see the source)."},
    {"glass_mirror_rays", glass_mirror_rays, METH_VARARGS, "The mirror rays off the rays' first panes (see the source)."},
    {"mirror_hits", mirror_hits, METH_VARARGS, "What the mirror rays met, every ray's fields (see the source)."},
    {"join_scan", join_scan, METH_VARARGS, "A scan's parts joined, times shifted, first returns counted (see the source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_source_steps", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__source_steps(void) { return PyModule_Create(&module); }
