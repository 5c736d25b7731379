/* Compiled twins of three steps of World.cast, each one pass where NumPy takes several:
 *
 * - object_frame_rays (world._object_frame_rays): a moving object's candidate rays moved into its frame,
 *   each at its own pose, and kept where they meet its bounding box. The NumPy version spends ~30 array
 *   operations on the few hundred candidate rays of one object in one frame, each costing more in call
 *   overhead than in arithmetic. This does the same float64 rotation (the conjugate of each ray's pose
 *   quaternion, component by component in the NumPy version's order), the same conversions to float32
 *   and the same float32 slab test;
 * - gather_faces: the normals, materials and owners of the static faces hit (np.take, mode="wrap");
 * - face_the_rays: normals turned to face their rays, and the segment ids of the objects hit;
 * - bounds: the per-axis minimum and maximum of the origins (np.min / np.max, NaN propagating);
 * - cone_candidates: the rays whose direction lies in a cone (the moving objects' cull). A cull only has
 *   to keep every ray that may meet the object: its float32 dot product need not be NumPy's (which goes
 *   through BLAS, whose threads it would wake), as the cone already has slack.
 *
 * Every value is the NumPy version's bit for bit (built with -ffp-contract=off: no fused multiply-adds).
 * Built by setuptools as an optional extension: where it is missing, the NumPy versions are used.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* np.fmin / np.fmax: a NaN operand gives the other one. */
static inline float fmin_np(float a, float b) { return isnan(a) ? b : (isnan(b) ? a : (b < a ? b : a)); }
static inline float fmax_np(float a, float b) { return isnan(a) ? b : (isnan(b) ? a : (b > a ? b : a)); }

/* v rotated by the conjugate of the unit quaternion q = (w, x, y, z), as world._rotate_rows computes
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

static int get(PyObject *obj, Py_buffer *view, int writable, const char *format, Py_ssize_t itemsize,
               Py_ssize_t count, const char *name) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) != 0) return -1;
    const char *f = view->format;
    if (f[0] == '<' || f[0] == '=' || f[0] == '@') f++;
    if (view->itemsize != itemsize || strcmp(f, format) != 0 || view->len != itemsize * count) {
        PyErr_Format(PyExc_ValueError, "object_frame_rays: %s must be %zd contiguous items of format '%s'",
                     name, count, format);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* object_frame_rays(o, d, cand, p, q, lo, hi, ol, dl, keep) -> m
 * o, d: float32 (N, 3) world-frame origins and directions; cand: int64 (K,) rows of them; p: float64
 * (K, 3) and q: float64 (K, 4) each candidate's object position and rotation (wxyz); lo, hi: float32
 * (3,) the object-frame box. Writes the candidates that meet the box (the forward half of the ray,
 * np.fmin / np.fmax slabs) to ol, dl (float32 (K, 3), object frame) and their positions in cand to
 * keep (int64 (K,)), in order; returns how many. */
static PyObject *object_frame_rays(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *objs[10];
    if (!PyArg_ParseTuple(args, "OOOOOOOOOO", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4], &objs[5],
                          &objs[6], &objs[7], &objs[8], &objs[9]))
        return NULL;
    Py_buffer o, d, c, p, q, lo, hi, ol, dl, keep;
    Py_buffer *views[10] = {&o, &d, &c, &p, &q, &lo, &hi, &ol, &dl, &keep};
    int got = 0;
    if (PyObject_GetBuffer(objs[0], &o, PyBUF_C_CONTIGUOUS) != 0) return NULL;
    Py_ssize_t n = o.len / 12;
    PyBuffer_Release(&o);
    if (PyObject_GetBuffer(objs[2], &c, PyBUF_C_CONTIGUOUS) != 0) return NULL;
    Py_ssize_t k = c.len / 8;
    PyBuffer_Release(&c);
    if (get(objs[0], &o, 0, "f", 4, 3 * n, "o") != 0) goto fail;
    got++;
    if (get(objs[1], &d, 0, "f", 4, 3 * n, "d") != 0) goto fail;
    got++;
    if (get(objs[2], &c, 0, "q", 8, k, "cand") != 0 && (PyErr_Clear(), get(objs[2], &c, 0, "l", 8, k, "cand") != 0))
        goto fail;
    got++;
    if (get(objs[3], &p, 0, "d", 8, 3 * k, "p") != 0) goto fail;
    got++;
    if (get(objs[4], &q, 0, "d", 8, 4 * k, "q") != 0) goto fail;
    got++;
    if (get(objs[5], &lo, 0, "f", 4, 3, "lo") != 0) goto fail;
    got++;
    if (get(objs[6], &hi, 0, "f", 4, 3, "hi") != 0) goto fail;
    got++;
    if (get(objs[7], &ol, 1, "f", 4, 3 * k, "ol") != 0) goto fail;
    got++;
    if (get(objs[8], &dl, 1, "f", 4, 3 * k, "dl") != 0) goto fail;
    got++;
    if (get(objs[9], &keep, 1, "q", 8, k, "keep") != 0 && (PyErr_Clear(), get(objs[9], &keep, 1, "l", 8, k, "keep") != 0))
        goto fail;
    got++;
    const float *of = o.buf, *df = d.buf, *lof = lo.buf, *hif = hi.buf;
    const int64_t *cand = c.buf;
    const double *pd = p.buf, *qd = q.buf;
    float *olf = ol.buf, *dlf = dl.buf;
    int64_t *kept = keep.buf;
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
        float a[3], b[3];
        rotate_conj(qd + 4 * j, vo, a);
        rotate_conj(qd + 4 * j, vd, b);
        float near = 0.0f, far = INFINITY;
        for (int ax = 0; ax < 3; ax++) {
            const float inv = 1.0f / b[ax];
            const float t1 = (lof[ax] - a[ax]) * inv, t2 = (hif[ax] - a[ax]) * inv;
            near = fmax_np(near, fmin_np(t1, t2));
            far = fmin_np(far, fmax_np(t1, t2));
        }
        if (far >= near) {
            memcpy(olf + 3 * m, a, sizeof a);
            memcpy(dlf + 3 * m, b, sizeof b);
            kept[m++] = j;
        }
    }
    Py_END_ALLOW_THREADS
    for (int i = 0; i < got; i++) PyBuffer_Release(views[i]);
    if (bad >= 0) return PyErr_Format(PyExc_IndexError, "object_frame_rays: cand[%zd] is not a row", bad);
    return PyLong_FromSsize_t(m);
fail:
    for (int i = 0; i < got; i++) PyBuffer_Release(views[i]);
    return NULL;
}

/* gather_faces(face i4 (N), normals f4 (F + 1, 3), material i2 (F + 1), owner i4 (F + 1), normal_out f4
 *              (N, 3), material_out i2, owner_out i4 (N))
 * Each ray's row of the per-face tables, face -1 (a miss) reading the last row (np.take, mode="wrap"). */
static PyObject *gather_faces(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *objs[7];
    if (!PyArg_ParseTuple(args, "OOOOOOO", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4], &objs[5], &objs[6]))
        return NULL;
    Py_buffer face, nrm, mat, own, nout, mout, oout;
    Py_buffer *views[7] = {&face, &nrm, &mat, &own, &nout, &mout, &oout};
    int got = 0;
    if (PyObject_GetBuffer(objs[0], &face, PyBUF_C_CONTIGUOUS) != 0) return NULL;
    Py_ssize_t n = face.len / 4;
    PyBuffer_Release(&face);
    if (PyObject_GetBuffer(objs[2], &mat, PyBUF_C_CONTIGUOUS) != 0) return NULL;
    Py_ssize_t rows = mat.len / 2;
    PyBuffer_Release(&mat);
    if (rows < 1) return PyErr_Format(PyExc_ValueError, "gather_faces: the tables need their trailing row");
    if (get(objs[0], &face, 0, "i", 4, n, "face") != 0) goto fail;
    got++;
    if (get(objs[1], &nrm, 0, "f", 4, 3 * rows, "normals") != 0) goto fail;
    got++;
    if (get(objs[2], &mat, 0, "h", 2, rows, "material") != 0) goto fail;
    got++;
    if (get(objs[3], &own, 0, "i", 4, rows, "owner") != 0) goto fail;
    got++;
    if (get(objs[4], &nout, 1, "f", 4, 3 * n, "normal_out") != 0) goto fail;
    got++;
    if (get(objs[5], &mout, 1, "h", 2, n, "material_out") != 0) goto fail;
    got++;
    if (get(objs[6], &oout, 1, "i", 4, n, "owner_out") != 0) goto fail;
    got++;
    const int32_t *f = face.buf, *ow = own.buf;
    const float *nr = nrm.buf;
    const int16_t *ma = mat.buf;
    float *no = nout.buf;
    int16_t *mo = mout.buf;
    int32_t *oo = oout.buf;
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
    for (int i = 0; i < got; i++) PyBuffer_Release(views[i]);
    if (bad >= 0) return PyErr_Format(PyExc_IndexError, "gather_faces: face of ray %zd is not in the tables", bad);
    Py_RETURN_NONE;
fail:
    for (int i = 0; i < got; i++) PyBuffer_Release(views[i]);
    return NULL;
}

/* face_the_rays(normal f4 (N, 3) in/out, d f4 (N, 3), obj_index i4 (N), segments u4 (O + 1), segment_out
 *               u4 (N))
 * Normals whose dot product with their ray ((n0 d0 + n1 d1) + n2 d2, float32) is positive are negated;
 * each ray's segment is that of the object it hit, index -1 (a miss) reading the last entry. */
static PyObject *face_the_rays(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *objs[5];
    if (!PyArg_ParseTuple(args, "OOOOO", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4])) return NULL;
    Py_buffer nrm, dir, obj, segs, sout;
    Py_buffer *views[5] = {&nrm, &dir, &obj, &segs, &sout};
    int got = 0;
    if (PyObject_GetBuffer(objs[2], &obj, PyBUF_C_CONTIGUOUS) != 0) return NULL;
    Py_ssize_t n = obj.len / 4;
    PyBuffer_Release(&obj);
    if (PyObject_GetBuffer(objs[3], &segs, PyBUF_C_CONTIGUOUS) != 0) return NULL;
    Py_ssize_t count = segs.len / 4;
    PyBuffer_Release(&segs);
    if (get(objs[0], &nrm, 1, "f", 4, 3 * n, "normal") != 0) goto fail;
    got++;
    if (get(objs[1], &dir, 0, "f", 4, 3 * n, "d") != 0) goto fail;
    got++;
    if (get(objs[2], &obj, 0, "i", 4, n, "obj_index") != 0) goto fail;
    got++;
    if (get(objs[3], &segs, 0, "I", 4, count, "segments") != 0) goto fail;
    got++;
    if (get(objs[4], &sout, 1, "I", 4, n, "segment_out") != 0) goto fail;
    got++;
    float *nr = nrm.buf;
    const float *dr = dir.buf;
    const int32_t *oi = obj.buf;
    const uint32_t *sg = segs.buf;
    uint32_t *so = sout.buf;
    Py_ssize_t bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        float *v = nr + 3 * i;
        const float *w = dr + 3 * i;
        const float dot = (v[0] * w[0] + v[1] * w[1]) + v[2] * w[2];
        if (dot > 0) {
            v[0] = -v[0];
            v[1] = -v[1];
            v[2] = -v[2];
        }
        Py_ssize_t k = oi[i] < 0 ? count + oi[i] : oi[i];
        if (k < 0 || k >= count) {
            bad = i;
            break;
        }
        so[i] = sg[k];
    }
    Py_END_ALLOW_THREADS
    for (int i = 0; i < got; i++) PyBuffer_Release(views[i]);
    if (bad >= 0) return PyErr_Format(PyExc_IndexError, "face_the_rays: object of ray %zd is not one", bad);
    Py_RETURN_NONE;
fail:
    for (int i = 0; i < got; i++) PyBuffer_Release(views[i]);
    return NULL;
}

/* bounds(o f4 (N, 3)) -> (min x, min y, min z, max x, max y, max z), NaN where a NaN is (N >= 1). */
static PyObject *bounds(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj;
    if (!PyArg_ParseTuple(args, "O", &obj)) return NULL;
    Py_buffer v;
    if (PyObject_GetBuffer(obj, &v, PyBUF_C_CONTIGUOUS) != 0) return NULL;
    Py_ssize_t n = v.len / 12;
    PyBuffer_Release(&v);
    if (n < 1) return PyErr_Format(PyExc_ValueError, "bounds: no rows");
    if (get(obj, &v, 0, "f", 4, 3 * n, "o") != 0) return NULL;
    const float *o = v.buf;
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
    PyBuffer_Release(&v);
    for (int k = 0; k < 3; k++)
        if (nan[k]) lo[k] = hi[k] = NAN;
    return Py_BuildValue("dddddd", (double)lo[0], (double)lo[1], (double)lo[2], (double)hi[0], (double)hi[1],
                         (double)hi[2]);
}

/* cone_candidates(d f4 (N, 3), u f4 (3,), cos_min f4 (1,), out i8 (N)) -> m: the rays with
 * d . u >= cos_min, their indices in order into out. */
static PyObject *cone_candidates(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *objs[4];
    if (!PyArg_ParseTuple(args, "OOOO", &objs[0], &objs[1], &objs[2], &objs[3])) return NULL;
    Py_buffer d, u, c, out;
    Py_buffer *views[4] = {&d, &u, &c, &out};
    int got = 0;
    if (PyObject_GetBuffer(objs[0], &d, PyBUF_C_CONTIGUOUS) != 0) return NULL;
    Py_ssize_t n = d.len / 12;
    PyBuffer_Release(&d);
    if (get(objs[0], &d, 0, "f", 4, 3 * n, "d") != 0) goto fail;
    got++;
    if (get(objs[1], &u, 0, "f", 4, 3, "u") != 0) goto fail;
    got++;
    if (get(objs[2], &c, 0, "f", 4, 1, "cos_min") != 0) goto fail;
    got++;
    if (get(objs[3], &out, 1, "q", 8, n, "out") != 0 && (PyErr_Clear(), get(objs[3], &out, 1, "l", 8, n, "out") != 0))
        goto fail;
    got++;
    const float *dv = d.buf, *uv = u.buf;
    const float cmin = *(const float *)c.buf, u0 = uv[0], u1 = uv[1], u2 = uv[2];
    int64_t *idx = out.buf;
    Py_ssize_t m = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        const float dot = (dv[3 * i] * u0 + dv[3 * i + 1] * u1) + dv[3 * i + 2] * u2;
        idx[m] = i;
        m += dot >= cmin;
    }
    Py_END_ALLOW_THREADS
    for (int i = 0; i < got; i++) PyBuffer_Release(views[i]);
    return PyLong_FromSsize_t(m);
fail:
    for (int i = 0; i < got; i++) PyBuffer_Release(views[i]);
    return NULL;
}

static PyMethodDef methods[] = {
    {"object_frame_rays", object_frame_rays, METH_VARARGS,
     "object_frame_rays(o, d, cand, p, q, lo, hi, ol, dl, keep) -> m: see the module source."},
    {"bounds", bounds, METH_VARARGS, "Per-axis min and max of (N, 3) float32 rows."},
    {"cone_candidates", cone_candidates, METH_VARARGS, "The rays whose direction lies in a cone."},
    {"gather_faces", gather_faces, METH_VARARGS, "The per-face rows of the static faces hit (see the source)."},
    {"face_the_rays", face_the_rays, METH_VARARGS, "Normals facing their rays, and the segments (see the source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cast_steps", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cast_steps(void) { return PyModule_Create(&module); }
