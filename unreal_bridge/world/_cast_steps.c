/* Compiled twins of steps of World.cast, each one pass where NumPy takes several:
 *
 * - object_frame_rays (moving._object_frame_rays): a moving object's candidate rays moved into its frame,
 *   each at its own pose, and kept where they meet its bounding box. The NumPy version spends ~30 array
 *   operations on the few hundred candidate rays of one object in one frame, each costing more in call
 *   overhead than in arithmetic. This does the same float64 rotation (the conjugate of each ray's pose
 *   quaternion, component by component in the NumPy version's order), the same conversions to float32
 *   and the same float32 slab test;
 * - gather_faces: the normals, materials and owners of the static faces hit (np.take, mode="wrap");
 * - face_the_rays: normals turned to face their rays, and the segment ids of the objects hit;
 * - merge_hits: a moving object's hits written into the batch's rows, their normals rotated back into the
 *   world at each ray's own pose (quat_rotate's float64 formula);
 * - bounds: the per-axis minimum and maximum of the origins (np.min / np.max, NaN propagating);
 * - interp_sorted: np.interp of every column of a table at times in order (interp.interp_columns: the
 *   sensor's firing poses between their 1 ms samples, a waypoint path's positions at each ray's time).
 * - straight_poses: a ConstantVelocity path's positions and rotations at a zero yaw rate (the street's
 *   moving cars at each candidate ray's time).
 *
 * These give the NumPy versions' values bit for bit (built with -ffp-contract=off: no fused
 * multiply-adds). Two are not twins: cone_candidates, the moving objects' cone cull, computes its
 * float32 dot product its own way instead of through BLAS (whose threads a matrix product wakes), and
 * sphere_candidates, their cull for scattered origins (the rays that go on behind glass), tests in
 * float64 in one pass: a cull only has to keep every ray that may meet the object, and both have
 * slack enough (1e-4 in the cosine; 1 % and 5 cm^2 in the squared radius) that the rays they keep or
 * drop at the edge cannot. Built by setuptools as an optional extension: where it is missing, the
 * NumPy versions are used.
 */
#include "_np_twins.h"

/* v rotated by the conjugate of the unit quaternion q = (w, x, y, z), as pose.quat_rotate computes
 * it for quat_conjugate(q) (x, y, z negated). */
static inline void rotate_conj(const double *q, const double v[3], float out[3]) {
    const double w = q[0], x = q[1] * -1.0, y = q[2] * -1.0, z = q[3] * -1.0;
    const double vx = v[0], vy = v[1], vz = v[2];
    const double tx = 2.0 * (y * vz - z * vy);
    const double ty = 2.0 * (z * vx - x * vz);
    const double tz = 2.0 * (x * vy - y * vx);
    out[0] = (float)((vx + w * tx) + (y * tz - z * ty));
    out[1] = (float)((vy + w * ty) + (z * tx - x * tz));
    out[2] = (float)((vz + w * tz) + (x * ty - y * tx));
}

/* object_frame_rays(o, d, cand, p, q, lo, hi, ol, dl, keep) -> m
 * o, d: float32 (N, 3) world-frame origins and directions; cand: int64 (K,) rows of them; p: float64
 * (K, 3) and q: float64 (K, 4) each candidate's object position and rotation (wxyz); lo, hi: float32
 * (3,) the object-frame box. Writes the candidates that meet the box (the forward half of the ray,
 * np.fmin / np.fmax slabs) to ol, dl (float32 (K, 3), object frame) and their positions in cand to
 * keep (int64 (K,)), in order; returns how many. */
static PyObject *object_frame_rays(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[10];
    if (!PyArg_ParseTuple(args, "OOOOOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &o[8], &o[9]))
        return NULL;
    Buf b[10];
    memset(b, 0, sizeof b);
    Py_ssize_t n = buf_items(o[0], 12), k = buf_items(o[2], 8);
    if (n < 0 || k < 0) return NULL;
    if (buf_get(&b[0], o[0], 0, 'f', 4, 3 * n, "o") || buf_get(&b[1], o[1], 0, 'f', 4, 3 * n, "d") ||
        buf_get(&b[2], o[2], 0, 'q', 8, k, "cand") || buf_get(&b[3], o[3], 0, 'd', 8, 3 * k, "p") ||
        buf_get(&b[4], o[4], 0, 'd', 8, 4 * k, "q") || buf_get(&b[5], o[5], 0, 'f', 4, 3, "lo") ||
        buf_get(&b[6], o[6], 0, 'f', 4, 3, "hi") || buf_get(&b[7], o[7], 1, 'f', 4, 3 * k, "ol") ||
        buf_get(&b[8], o[8], 1, 'f', 4, 3 * k, "dl") || buf_get(&b[9], o[9], 1, 'q', 8, k, "keep")) {
        buf_release(b, 10);
        return NULL;
    }
    const float *of = b[0].view.buf, *df = b[1].view.buf, *lof = b[5].view.buf, *hif = b[6].view.buf;
    const int64_t *cand = b[2].view.buf;
    const double *pd = b[3].view.buf, *qd = b[4].view.buf;
    float *olf = b[7].view.buf, *dlf = b[8].view.buf;
    int64_t *kept = b[9].view.buf;
    Py_ssize_t m = 0, bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t j = 0; j < k; j++) {
        const int64_t r = cand[j];
        if (r < 0 || r >= n) {
            bad = j;
            break;
        }
        const double vo[3] = {(double)of[3 * r] - pd[3 * j], (double)of[3 * r + 1] - pd[3 * j + 1],
                              (double)of[3 * r + 2] - pd[3 * j + 2]};
        const double vd[3] = {(double)df[3 * r], (double)df[3 * r + 1], (double)df[3 * r + 2]};
        float a[3], c[3];
        rotate_conj(qd + 4 * j, vo, a);
        rotate_conj(qd + 4 * j, vd, c);
        float near = 0.0f, far = INFINITY;
        for (int ax = 0; ax < 3; ax++) {
            const float inv = 1.0f / c[ax];
            const float t1 = (lof[ax] - a[ax]) * inv, t2 = (hif[ax] - a[ax]) * inv;
            near = fmax_np(near, fmin_np(t1, t2));
            far = fmin_np(far, fmax_np(t1, t2));
        }
        if (far >= near) {
            memcpy(olf + 3 * m, a, sizeof a);
            memcpy(dlf + 3 * m, c, sizeof c);
            kept[m++] = j;
        }
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 10);
    if (bad >= 0) return PyErr_Format(PyExc_IndexError, "object_frame_rays: cand[%zd] is not a row", bad);
    return PyLong_FromSsize_t(m);
}

/* gather_faces(face i4 (N), normals f4 (F + 1, 3), material i2 (F + 1), owner i4 (F + 1), normal_out f4
 *              (N, 3), material_out i2, owner_out i4 (N))
 * Each ray's row of the per-face tables, face -1 (a miss) reading the last row (np.take, mode="wrap"). */
static PyObject *gather_faces(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[7];
    if (!PyArg_ParseTuple(args, "OOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6])) return NULL;
    Buf b[7];
    memset(b, 0, sizeof b);
    Py_ssize_t n = buf_items(o[0], 4), rows = buf_items(o[2], 2);
    if (n < 0 || rows < 0) return NULL;
    if (rows < 1) return PyErr_Format(PyExc_ValueError, "gather_faces: the tables need their trailing row");
    if (buf_get(&b[0], o[0], 0, 'i', 4, n, "face") || buf_get(&b[1], o[1], 0, 'f', 4, 3 * rows, "normals") ||
        buf_get(&b[2], o[2], 0, 'h', 2, rows, "material") || buf_get(&b[3], o[3], 0, 'i', 4, rows, "owner") ||
        buf_get(&b[4], o[4], 1, 'f', 4, 3 * n, "normal_out") ||
        buf_get(&b[5], o[5], 1, 'h', 2, n, "material_out") || buf_get(&b[6], o[6], 1, 'i', 4, n, "owner_out")) {
        buf_release(b, 7);
        return NULL;
    }
    const int32_t *f = b[0].view.buf, *ow = b[3].view.buf;
    const float *nr = b[1].view.buf;
    const int16_t *ma = b[2].view.buf;
    float *no = b[4].view.buf;
    int16_t *mo = b[5].view.buf;
    int32_t *oo = b[6].view.buf;
    Py_ssize_t bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t k = f[i] < 0 ? rows + f[i] : f[i];
        if (k < 0 || k >= rows) {
            bad = i;
            break;
        }
        memcpy(no + 3 * i, nr + 3 * k, 12);
        mo[i] = ma[k];
        oo[i] = ow[k];
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 7);
    if (bad >= 0) return PyErr_Format(PyExc_IndexError, "gather_faces: face of ray %zd is not in the tables", bad);
    Py_RETURN_NONE;
}

/* face_the_rays(normal f4 (N, 3) in/out, d f4 (N, 3), obj_index i4 (N), segments u4 (O + 1), segment_out
 *               u4 (N))
 * Normals whose dot product with their ray ((n0 d0 + n1 d1) + n2 d2, float32) is positive are negated;
 * each ray's segment is that of the object it hit, index -1 (a miss) reading the last entry. The
 * indices are checked first: a bad one changes nothing. */
static PyObject *face_the_rays(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[5];
    if (!PyArg_ParseTuple(args, "OOOOO", &o[0], &o[1], &o[2], &o[3], &o[4])) return NULL;
    Buf b[5];
    memset(b, 0, sizeof b);
    Py_ssize_t n = buf_items(o[2], 4), count = buf_items(o[3], 4);
    if (n < 0 || count < 0) return NULL;
    if (buf_get(&b[0], o[0], 1, 'f', 4, 3 * n, "normal") || buf_get(&b[1], o[1], 0, 'f', 4, 3 * n, "d") ||
        buf_get(&b[2], o[2], 0, 'i', 4, n, "obj_index") || buf_get(&b[3], o[3], 0, 'I', 4, count, "segments") ||
        buf_get(&b[4], o[4], 1, 'I', 4, n, "segment_out")) {
        buf_release(b, 5);
        return NULL;
    }
    float *nr = b[0].view.buf;
    const float *dr = b[1].view.buf;
    const int32_t *oi = b[2].view.buf;
    const uint32_t *sg = b[3].view.buf;
    uint32_t *so = b[4].view.buf;
    Py_ssize_t bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++)
        if (oi[i] < -count || oi[i] >= count) {
            bad = i;
            break;
        }
    if (bad < 0)
        for (Py_ssize_t i = 0; i < n; i++) {
            float *v = nr + 3 * i;
            const float *w = dr + 3 * i;
            const float dot = (v[0] * w[0] + v[1] * w[1]) + v[2] * w[2];
            if (dot > 0) {
                v[0] = -v[0];
                v[1] = -v[1];
                v[2] = -v[2];
            }
            so[i] = sg[oi[i] < 0 ? count + oi[i] : oi[i]];
        }
    Py_END_ALLOW_THREADS
    buf_release(b, 5);
    if (bad >= 0) return PyErr_Format(PyExc_IndexError, "face_the_rays: object of ray %zd is not one", bad);
    Py_RETURN_NONE;
}

/* bounds(o f4 (N, 3)) -> (min x, min y, min z, max x, max y, max z), NaN where a NaN is (N >= 1). */
static PyObject *bounds(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj;
    if (!PyArg_ParseTuple(args, "O", &obj)) return NULL;
    Py_ssize_t n = buf_items(obj, 12);
    if (n < 0) return NULL;
    if (n < 1) return PyErr_Format(PyExc_ValueError, "bounds: no rows");
    Buf b[1];
    memset(b, 0, sizeof b);
    if (buf_get(&b[0], obj, 0, 'f', 4, 3 * n, "o")) {
        buf_release(b, 1);
        return NULL;
    }
    const float *o = b[0].view.buf;
    float lo[3] = {o[0], o[1], o[2]}, hi[3] = {o[0], o[1], o[2]};
    int nan[3] = {isnan(o[0]), isnan(o[1]), isnan(o[2])};
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 1; i < n; i++)
        for (int k = 0; k < 3; k++) {
            const float x = o[3 * i + k];
            nan[k] |= isnan(x);
            lo[k] = x < lo[k] ? x : lo[k];
            hi[k] = x > hi[k] ? x : hi[k];
        }
    Py_END_ALLOW_THREADS
    buf_release(b, 1);
    for (int k = 0; k < 3; k++)
        if (nan[k]) lo[k] = hi[k] = NAN;
    return Py_BuildValue("dddddd", (double)lo[0], (double)lo[1], (double)lo[2], (double)hi[0], (double)hi[1],
                         (double)hi[2]);
}

/* cone_candidates(d f4 (N, 3), u f4 (3,), cos_min f4 (1,), out i8 (N)) -> m: the rays with
 * (d0 u0 + d1 u1) + d2 u2 >= cos_min in float32, their indices in order into out (not BLAS's dot
 * product: see the top of this file). */
static PyObject *cone_candidates(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[4];
    if (!PyArg_ParseTuple(args, "OOOO", &o[0], &o[1], &o[2], &o[3])) return NULL;
    Buf b[4];
    memset(b, 0, sizeof b);
    Py_ssize_t n = buf_items(o[0], 12);
    if (n < 0) return NULL;
    if (buf_get(&b[0], o[0], 0, 'f', 4, 3 * n, "d") || buf_get(&b[1], o[1], 0, 'f', 4, 3, "u") ||
        buf_get(&b[2], o[2], 0, 'f', 4, 1, "cos_min") || buf_get(&b[3], o[3], 1, 'q', 8, n, "out")) {
        buf_release(b, 4);
        return NULL;
    }
    const float *dv = b[0].view.buf, *uv = b[1].view.buf;
    const float cmin = *(const float *)b[2].view.buf, u0 = uv[0], u1 = uv[1], u2 = uv[2];
    int64_t *idx = b[3].view.buf;
    Py_ssize_t m = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        const float dot = (dv[3 * i] * u0 + dv[3 * i + 1] * u1) + dv[3 * i + 2] * u2;
        idx[m] = i;
        m += dot >= cmin;
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 4);
    return PyLong_FromSsize_t(m);
}

/* The arguments of swept_box and swept_sphere: p f8 (S, 3), q f8 (S, 4), a third f8 array of
 * ``n_third`` items named ``third``, out f8 (``n_out``,), into b[0..3]; S (1..``max_s``) on success, -1
 * with the error set (and nothing held) otherwise. */
static Py_ssize_t sampled_poses(PyObject *args, const char *fn, const char *third, Py_ssize_t n_third,
                                Py_ssize_t n_out, Py_ssize_t max_s, Buf b[4]) {
    PyObject *o[4];
    if (!PyArg_ParseTuple(args, "OOOO", &o[0], &o[1], &o[2], &o[3])) return -1;
    memset(b, 0, 4 * sizeof *b);
    Py_ssize_t S = buf_items(o[0], 24);
    if (S < 0) return -1;
    if (S < 1) {
        PyErr_Format(PyExc_ValueError, "%s: no samples", fn);
        return -1;
    }
    if (S > max_s) {
        PyErr_Format(PyExc_ValueError, "%s: at most %zd samples, got %zd", fn, max_s, S);
        return -1;
    }
    if (buf_get(&b[0], o[0], 0, 'd', 8, 3 * S, "p") || buf_get(&b[1], o[1], 0, 'd', 8, 4 * S, "q") ||
        buf_get(&b[2], o[2], 0, 'd', 8, n_third, third) || buf_get(&b[3], o[3], 1, 'd', 8, n_out, "out")) {
        buf_release(b, 4);
        return -1;
    }
    return S;
}

/* swept_box(p f8 (S, 3), q f8 (S, 4) wxyz, corners f8 (8, 3), out f8 (6,)): the world bounds (lo, hi)
 * of an object's box corners posed at S sampled times (rotated by q, moved by p), grown by the longest
 * step of a corner between consecutive samples and a centimetre: a box that holds the object over the
 * samples' span (MovingObjects.swept_boxes; a cull's bound, so not NumPy's bits). */
static PyObject *swept_box(PyObject *self, PyObject *args) {
    (void)self;
    Buf b[4];
    const Py_ssize_t S = sampled_poses(args, "swept_box", "corners", 24, 6, PY_SSIZE_T_MAX, b);
    if (S < 0) return NULL;
    const double *p = b[0].view.buf, *q = b[1].view.buf, *c = b[2].view.buf;
    double *out = b[3].view.buf;
    double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    double prev[8][3], step2 = 0.0;
    for (Py_ssize_t s = 0; s < S; s++) {
        const double w = q[4 * s], x = q[4 * s + 1], y = q[4 * s + 2], z = q[4 * s + 3];
        const double r[3][3] = {{1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)},
                                {2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)},
                                {2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)}};
        for (int k = 0; k < 8; k++) {
            double v[3];
            for (int a = 0; a < 3; a++) {
                v[a] = p[3 * s + a] + r[a][0] * c[3 * k] + r[a][1] * c[3 * k + 1] + r[a][2] * c[3 * k + 2];
                lo[a] = v[a] < lo[a] ? v[a] : lo[a];
                hi[a] = v[a] > hi[a] ? v[a] : hi[a];
            }
            if (s > 0) {
                const double dx = v[0] - prev[k][0], dy = v[1] - prev[k][1], dz = v[2] - prev[k][2];
                const double d2 = dx * dx + dy * dy + dz * dz;
                step2 = d2 > step2 ? d2 : step2;
            }
            memcpy(prev[k], v, sizeof v);
        }
    }
    const double grow = sqrt(step2) + 1e-2;
    for (int a = 0; a < 3; a++) {
        out[a] = lo[a] - grow;
        out[3 + a] = hi[a] + grow;
    }
    buf_release(b, 4);
    Py_RETURN_NONE;
}

/* swept_sphere(p f8 (S, 3), q f8 (S, 4) wxyz, center f8 (3,), out f8 (5,)): the twin of
 * MovingObjects._swept_sphere's NumPy lines, bit for bit: the object's centre at each sample (p +
 * quat_rotate(q, center), pose.quat_rotate's products in its order), the midpoint of their bounds, the
 * farthest sample from it and the longest step between samples -> out = (mid x, y, z, far, step). A
 * NaN anywhere carries through as np.min / np.max carry it. */
static PyObject *swept_sphere(PyObject *self, PyObject *args) {
    (void)self;
    Buf b[4];
    const Py_ssize_t S = sampled_poses(args, "swept_sphere", "center", 3, 5, 64, b);
    if (S < 0) return NULL;
    const double *p = b[0].view.buf, *q = b[1].view.buf, *v = b[2].view.buf;
    double *out = b[3].view.buf;
    const double vx = v[0], vy = v[1], vz = v[2];
    double c[64][3], lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (Py_ssize_t s = 0; s < S; s++) {
        const double w = q[4 * s], x = q[4 * s + 1], y = q[4 * s + 2], z = q[4 * s + 3];
        const double tx = 2.0 * (y * vz - z * vy), ty = 2.0 * (z * vx - x * vz), tz = 2.0 * (x * vy - y * vx);
        const double r[3] = {vx + w * tx + (y * tz - z * ty), vy + w * ty + (z * tx - x * tz),
                             vz + w * tz + (x * ty - y * tx)};
        for (int a = 0; a < 3; a++) {
            const double ca = p[3 * s + a] + r[a];
            c[s][a] = ca;
            lo[a] = (ca < lo[a] || ca != ca) && lo[a] == lo[a] ? ca : lo[a]; /* np.min: NaN wins */
            hi[a] = (ca > hi[a] || ca != ca) && hi[a] == hi[a] ? ca : hi[a];
        }
    }
    double mid[3], far = -INFINITY, step = S > 1 ? -INFINITY : 0.0;
    for (int a = 0; a < 3; a++) mid[a] = 0.5 * (lo[a] + hi[a]);
    for (Py_ssize_t s = 0; s < S; s++) {
        const double dx = c[s][0] - mid[0], dy = c[s][1] - mid[1], dz = c[s][2] - mid[2];
        const double f = sqrt(0.0 + dx * dx + dy * dy + dz * dz);
        far = (f > far || f != f) && far == far ? f : far;
        if (s > 0) {
            const double ex = c[s][0] - c[s - 1][0], ey = c[s][1] - c[s - 1][1], ez = c[s][2] - c[s - 1][2];
            const double g = sqrt(0.0 + ex * ex + ey * ey + ez * ez);
            step = (g > step || g != g) && step == step ? g : step;
        }
    }
    out[0] = mid[0];
    out[1] = mid[1];
    out[2] = mid[2];
    out[3] = far;
    out[4] = step;
    buf_release(b, 4);
    Py_RETURN_NONE;
}

/* box_candidates(o f4 (N, 3), d f4 (N, 3), cand i8 (K,), lo f8 (3,), hi f8 (3,), out i8 (K,)) -> m: of the
 * rays cand (indices into o and d, in order), those whose forward half meets the box [lo, hi] (a slab
 * test in float64), into out in order. A second cull after the sphere's, by a box that holds an object
 * over a batch's times: only a cull, so the callers give it slack and the object-frame test decides. */
static PyObject *box_candidates(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[6];
    if (!PyArg_ParseTuple(args, "OOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5])) return NULL;
    Buf b[6];
    memset(b, 0, sizeof b);
    Py_ssize_t n = buf_items(o[0], 12), k = buf_items(o[2], 8);
    if (n < 0 || k < 0) return NULL;
    if (buf_get(&b[0], o[0], 0, 'f', 4, 3 * n, "o") || buf_get(&b[1], o[1], 0, 'f', 4, 3 * n, "d") ||
        buf_get(&b[2], o[2], 0, 'q', 8, k, "cand") || buf_get(&b[3], o[3], 0, 'd', 8, 3, "lo") ||
        buf_get(&b[4], o[4], 0, 'd', 8, 3, "hi") || buf_get(&b[5], o[5], 1, 'q', 8, k, "out")) {
        buf_release(b, 6);
        return NULL;
    }
    const float *ov = b[0].view.buf, *dv = b[1].view.buf;
    const int64_t *cand = b[2].view.buf;
    const double *lo = b[3].view.buf, *hi = b[4].view.buf;
    int64_t *out = b[5].view.buf;
    Py_ssize_t m = 0;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t j = 0; j < k; j++) {
        const int64_t i = cand[j];
        if (i < 0 || i >= n) {
            bad = 1;
            break;
        }
        double t_near = 0.0, t_far = INFINITY;
        for (int a = 0; a < 3; a++) {
            const double ca = (double)ov[3 * i + a], da = (double)dv[3 * i + a];
            if (da != 0.0) {
                double t1 = (lo[a] - ca) / da, t2 = (hi[a] - ca) / da;
                if (t1 > t2) {
                    const double t = t1;
                    t1 = t2;
                    t2 = t;
                }
                t_near = t1 > t_near ? t1 : t_near;
                t_far = t2 < t_far ? t2 : t_far;
            } else if (ca < lo[a] || ca > hi[a]) {
                t_far = -1.0;
            }
        }
        out[m] = i;
        m += t_near <= t_far;
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 6);
    if (bad) return PyErr_Format(PyExc_IndexError, "box_candidates: a candidate lies outside the %zd rays", n);
    return PyLong_FromSsize_t(m);
}

/* sphere_candidates(o f4 (N, 3), d f4 (N, 3), c f8 (3,), r2 f8 (1,), out i8 (N)) -> m: the rays whose
 * forward half comes within sqrt(r2) of c (tca = (c - o).d, d2 = |c - o|^2 - tca^2 <= r2 and
 * tca + sqrt(r2 - d2) >= 0), in float64, their indices in order into out. A cull for scattered
 * origins (MovingObjects._cull_rays' twin): r2 carries the slack of its float32 version, so every ray
 * that meets the sphere is kept, and a ray kept that does not passes within that slack of it. */
static PyObject *sphere_candidates(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[5];
    if (!PyArg_ParseTuple(args, "OOOOO", &o[0], &o[1], &o[2], &o[3], &o[4])) return NULL;
    Buf b[5];
    memset(b, 0, sizeof b);
    Py_ssize_t n = buf_items(o[0], 12);
    if (n < 0) return NULL;
    if (buf_get(&b[0], o[0], 0, 'f', 4, 3 * n, "o") || buf_get(&b[1], o[1], 0, 'f', 4, 3 * n, "d") ||
        buf_get(&b[2], o[2], 0, 'd', 8, 3, "c") || buf_get(&b[3], o[3], 0, 'd', 8, 1, "r2") ||
        buf_get(&b[4], o[4], 1, 'q', 8, n, "out")) {
        buf_release(b, 5);
        return NULL;
    }
    const float *of = b[0].view.buf, *df = b[1].view.buf;
    const double *c = b[2].view.buf, r2 = *(const double *)b[3].view.buf;
    int64_t *idx = b[4].view.buf;
    Py_ssize_t m = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        const double ox = c[0] - of[3 * i], oy = c[1] - of[3 * i + 1], oz = c[2] - of[3 * i + 2];
        const double tca = ox * df[3 * i] + oy * df[3 * i + 1] + oz * df[3 * i + 2];
        const double d2 = ox * ox + oy * oy + oz * oz - tca * tca;
        idx[m] = i;
        m += d2 <= r2 && tca + sqrt(r2 - d2) >= 0.0;
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 5);
    return PyLong_FromSsize_t(m);
}

/* The rows of interp_sorted for `cols` columns; returns the first time out of order, or -1. Inlined
 * with the column counts the callers use (3: positions, 4: quaternions), so the column loops unroll. */
static inline __attribute__((always_inline)) Py_ssize_t interp_rows(const double *t, Py_ssize_t n, const double *xp,
                                                                    Py_ssize_t k, const double *fp, const double *sl,
                                                                    double *out, Py_ssize_t cols) {
    Py_ssize_t j = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const double x = t[i];
        double *row = out + i * cols;
        if (i > 0 && !(x >= t[i - 1])) return i;
        if (x < xp[0]) {
            memcpy(row, fp, sizeof(double) * cols);
        } else if (x >= xp[k - 1]) {
            memcpy(row, fp + (k - 1) * cols, sizeof(double) * cols);
        } else {
            while (xp[j + 1] <= x) j++;
            if (x == xp[j]) {
                memcpy(row, fp + j * cols, sizeof(double) * cols);
            } else {
                const double dt = x - xp[j];
                for (Py_ssize_t c = 0; c < cols; c++) row[c] = sl[j * cols + c] * dt + fp[j * cols + c];
            }
        }
    }
    return -1;
}

/* interp_sorted(t f8 (N, in order), xp f8 (K >= 2, increasing), fp f8 (K, C), slopes f8 (K - 1, C),
 *               out f8 (N, C)): np.interp(t, xp, fp[:, c]) for every column: fp[0] before xp[0], fp[K-1]
 * at and after xp[K-1], fp[j] exactly on xp[j], else slopes[j] * (t - xp[j]) + fp[j]. */
static PyObject *interp_sorted(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[5];
    Py_ssize_t cols;
    if (!PyArg_ParseTuple(args, "OOOOOn", &o[0], &o[1], &o[2], &o[3], &o[4], &cols)) return NULL;
    Buf b[5];
    memset(b, 0, sizeof b);
    Py_ssize_t n = buf_items(o[0], 8), k = buf_items(o[1], 8);
    if (n < 0 || k < 0) return NULL;
    if (k < 2 || cols < 1) return PyErr_Format(PyExc_ValueError, "interp_sorted: needs 2 samples and 1 column");
    if (buf_get(&b[0], o[0], 0, 'd', 8, n, "t") || buf_get(&b[1], o[1], 0, 'd', 8, k, "xp") ||
        buf_get(&b[2], o[2], 0, 'd', 8, k * cols, "fp") || buf_get(&b[3], o[3], 0, 'd', 8, (k - 1) * cols, "slopes") ||
        buf_get(&b[4], o[4], 1, 'd', 8, n * cols, "out")) {
        buf_release(b, 5);
        return NULL;
    }
    const double *t = b[0].view.buf, *xp = b[1].view.buf, *fp = b[2].view.buf, *sl = b[3].view.buf;
    double *out = b[4].view.buf;
    Py_ssize_t bad;
    Py_BEGIN_ALLOW_THREADS
    if (cols == 3) bad = interp_rows(t, n, xp, k, fp, sl, out, 3);
    else if (cols == 4) bad = interp_rows(t, n, xp, k, fp, sl, out, 4);
    else bad = interp_rows(t, n, xp, k, fp, sl, out, cols);
    Py_END_ALLOW_THREADS
    buf_release(b, 5);
    if (bad >= 0) return PyErr_Format(PyExc_ValueError, "interp_sorted: t[%zd] is out of order", bad);
    Py_RETURN_NONE;
}

/* merge_hits(cand i8 (M), q f8 (M, 4), hd f4 (M), hf i8 (M), hn f4 (M, 3), limit f4 (M), face_material
 *            i2 (F), index, dist f4 (N), normal f4 (N, 3), material i2 (N), obj_index i4 (N)) -> hits
 * A moving object's hits merged into the batch (MovingObjects._cast_moving_at): candidate j hit it when
 * hf[j] >= 0 and hd[j] < limit[j]; its row cand[j] then takes the distance, the object-frame normal hn[j]
 * rotated by q[j] (quat_rotate in float64, then float32), the face's material and the object's index.
 * The indices are checked first: a bad one changes nothing. */
static PyObject *merge_hits(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[11];
    int index;
    if (!PyArg_ParseTuple(args, "OOOOOOOiOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &index, &o[7],
                          &o[8], &o[9], &o[10]))
        return NULL;
    Buf b[11];
    memset(b, 0, sizeof b);
    Py_ssize_t m = buf_items(o[0], 8), faces = buf_items(o[6], 2), n = buf_items(o[7], 4);
    if (m < 0 || faces < 0 || n < 0) return NULL;
    if (buf_get(&b[0], o[0], 0, 'q', 8, m, "cand") || buf_get(&b[1], o[1], 0, 'd', 8, 4 * m, "q") ||
        buf_get(&b[2], o[2], 0, 'f', 4, m, "hd") || buf_get(&b[3], o[3], 0, 'q', 8, m, "hf") ||
        buf_get(&b[4], o[4], 0, 'f', 4, 3 * m, "hn") || buf_get(&b[5], o[5], 0, 'f', 4, m, "limit") ||
        buf_get(&b[6], o[6], 0, 'h', 2, faces, "face_material") || buf_get(&b[7], o[7], 1, 'f', 4, n, "dist") ||
        buf_get(&b[8], o[8], 1, 'f', 4, 3 * n, "normal") || buf_get(&b[9], o[9], 1, 'h', 2, n, "material") ||
        buf_get(&b[10], o[10], 1, 'i', 4, n, "obj_index")) {
        buf_release(b, 11);
        return NULL;
    }
    const int64_t *cand = b[0].view.buf, *hf = b[3].view.buf;
    const double *qd = b[1].view.buf;
    const float *hd = b[2].view.buf, *hn = b[4].view.buf, *lim = b[5].view.buf;
    const int16_t *fm = b[6].view.buf;
    float *dist = b[7].view.buf, *normal = b[8].view.buf;
    int16_t *mat = b[9].view.buf;
    int32_t *owner = b[10].view.buf;
    Py_ssize_t bad = -1, hits = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t j = 0; j < m; j++)
        if (cand[j] < 0 || cand[j] >= n || hf[j] >= faces) {
            bad = j;
            break;
        }
    if (bad < 0)
        for (Py_ssize_t j = 0; j < m; j++) {
            if (!(hf[j] >= 0 && hd[j] < lim[j])) continue;
            const int64_t r = cand[j];
            const double *q = qd + 4 * j;
            const double w = q[0], x = q[1], y = q[2], z = q[3];
            const double vx = hn[3 * j], vy = hn[3 * j + 1], vz = hn[3 * j + 2];
            const double tx = 2.0 * (y * vz - z * vy);
            const double ty = 2.0 * (z * vx - x * vz);
            const double tz = 2.0 * (x * vy - y * vx);
            dist[r] = hd[j];
            normal[3 * r] = (float)((vx + w * tx) + (y * tz - z * ty));
            normal[3 * r + 1] = (float)((vy + w * ty) + (z * tx - x * tz));
            normal[3 * r + 2] = (float)((vz + w * tz) + (x * ty - y * tx));
            mat[r] = fm[hf[j]];
            owner[r] = index;
            hits++;
        }
    Py_END_ALLOW_THREADS
    buf_release(b, 11);
    if (bad >= 0) return PyErr_Format(PyExc_IndexError, "merge_hits: candidate %zd is not a row or a face", bad);
    return PyLong_FromSsize_t(hits);
}

/* straight_poses(t f8 (K,), p0 f8 (3,), v f8 (3,), rows f8 (2, 4), pos f8 (K, 3), quat f8 (K, 4)) -> ok:
 * trajectory.ConstantVelocity.positions_rotations at a zero yaw rate: each column p0 + (v t), in NumPy's
 * order (the product first, then the sum), and each time's rotation the row of ``rows``
 * (the start rotation at yaw +0, then -0) that the sign of the yaw 0 t picks. Returns False, with the
 * outputs incomplete, where a yaw 0 t is NaN (a NaN or infinite time: the NumPy code then decides). */
static PyObject *straight_poses(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[6];
    if (!PyArg_ParseTuple(args, "OOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5])) return NULL;
    Buf b[6];
    memset(b, 0, sizeof b);
    Py_ssize_t k = buf_items(o[0], 8);
    if (k < 0) return NULL;
    if (buf_get(&b[0], o[0], 0, 'd', 8, k, "t") || buf_get(&b[1], o[1], 0, 'd', 8, 3, "p0") ||
        buf_get(&b[2], o[2], 0, 'd', 8, 3, "v") || buf_get(&b[3], o[3], 0, 'd', 8, 8, "rows") ||
        buf_get(&b[4], o[4], 1, 'd', 8, 3 * k, "pos") || buf_get(&b[5], o[5], 1, 'd', 8, 4 * k, "quat")) {
        buf_release(b, 6);
        return NULL;
    }
    const double *t = b[0].view.buf, *p0 = b[1].view.buf, *v = b[2].view.buf, *rows = b[3].view.buf;
    double *pos = b[4].view.buf, *quat = b[5].view.buf;
    int ok = 1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < k; i++) {
        const double ti = t[i], yaw = 0.0 * ti;
        if (isnan(yaw)) {
            ok = 0;
            break;
        }
        pos[3 * i] = p0[0] + v[0] * ti;
        pos[3 * i + 1] = p0[1] + v[1] * ti;
        pos[3 * i + 2] = p0[2] + v[2] * ti;
        memcpy(quat + 4 * i, rows + (signbit(yaw) ? 4 : 0), 4 * sizeof(double));
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 6);
    return PyBool_FromLong(ok);
}

static PyMethodDef methods[] = {
    {"object_frame_rays", object_frame_rays, METH_VARARGS,
     "object_frame_rays(o, d, cand, p, q, lo, hi, ol, dl, keep) -> m: see the module source."},
    {"gather_faces", gather_faces, METH_VARARGS, "The per-face rows of the static faces hit (see the source)."},
    {"face_the_rays", face_the_rays, METH_VARARGS, "Normals facing their rays, and the segments (see the source)."},
    {"bounds", bounds, METH_VARARGS, "Per-axis min and max of (N, 3) float32 rows."},
    {"cone_candidates", cone_candidates, METH_VARARGS, "The rays whose direction lies in a cone."},
    {"box_candidates", box_candidates, METH_VARARGS, "Of the candidate rays, those that meet a box."},
    {"swept_box", swept_box, METH_VARARGS, "World bounds of an object's box over sampled poses."},
    {"swept_sphere", swept_sphere, METH_VARARGS, "An object's swept sphere's midpoint, far and step."},
    {"sphere_candidates", sphere_candidates, METH_VARARGS, "The rays that come near a sphere (see the source)."},
    {"merge_hits", merge_hits, METH_VARARGS, "A moving object's hits merged into the batch (see the source)."},
    {"interp_sorted", interp_sorted, METH_VARARGS, "np.interp of every column at times in order (see the source)."},
    {"straight_poses", straight_poses, METH_VARARGS, "A straight path's poses at a zero yaw rate (see the source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cast_steps", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cast_steps(void) { return PyModule_Create(&module); }
