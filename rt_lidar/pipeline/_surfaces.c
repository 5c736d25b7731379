/* Compiled twin of WorldSource._cast's first-surface step (rt_lidar.pipeline.surfaces).
 *
 * Splits a frame's first hits into the surfaces the rays end on and the transmissive ones they pass
 * (glass), filling the per-ray fields in one pass where NumPy takes ~15 passes and as many temporaries:
 * the same float32 operations in the same order, so the same bits (built with -ffp-contract=off, as an
 * optional extension; where it is missing the NumPy code runs).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    Py_buffer view;
    int held;
} Buf;

static int get(Buf *b, PyObject *obj, int writable, char format, Py_ssize_t itemsize, Py_ssize_t count,
               const char *name) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &b->view, flags) != 0) return -1;
    b->held = 1;
    const char *f = b->view.format;
    if (f[0] == '<' || f[0] == '=' || f[0] == '@') f++;
    int same = f[1] == '\0' && (f[0] == format || (format == 'q' && f[0] == 'l'));
    if (!same || b->view.itemsize != itemsize || b->view.len != itemsize * count) {
        PyErr_Format(PyExc_ValueError, "%s must be %zd contiguous items of format '%c'", name, count, format);
        return -1;
    }
    return 0;
}

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
    Py_buffer probe;
    if (PyObject_GetBuffer(o[0], &probe, PyBUF_C_CONTIGUOUS) != 0) return NULL;
    Py_ssize_t n = probe.len / 4;
    PyBuffer_Release(&probe);
    if (PyObject_GetBuffer(o[5], &probe, PyBUF_C_CONTIGUOUS) != 0) return NULL;
    Py_ssize_t nt = probe.len / 4;
    PyBuffer_Release(&probe);
    static const char fmt[16] = {'f', 'f', 'I', 'h', 'f', 'f', 'f', 'f', 'h', 'I', 'f', 'f', 'h', 'I', 'f', 'q'};
    static const Py_ssize_t size[16] = {4, 4, 4, 2, 4, 4, 4, 4, 2, 4, 4, 4, 2, 4, 4, 8};
    static const char *names[16] = {"distance", "normal", "segment", "material", "dirs", "transmission",
                                    "range", "cos", "material_out", "segment_out", "g_range", "g_cos",
                                    "g_mat", "g_seg", "g_trans", "active"};
    for (int i = 0; i < 16; i++) {
        Py_ssize_t count = i == 5 ? nt : ((i == 1 || i == 4) ? 3 * n : n);
        if (get(&b[i], o[i], i >= 6, fmt[i], size[i], count, names[i]) != 0) {
            for (int j = 0; j <= i; j++)
                if (b[j].held) PyBuffer_Release(&b[j].view);
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
    for (int i = 0; i < 16; i++)
        if (b[i].held) PyBuffer_Release(&b[i].view);
    if (bad >= 0) return PyErr_Format(PyExc_IndexError, "first_surfaces: material of ray %zd is not in the table", bad);
    return PyLong_FromSsize_t(m);
}

static PyMethodDef methods[] = {
    {"first_surfaces", first_surfaces, METH_VARARGS, "WorldSource._cast's first-surface step (see the source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_surfaces", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__surfaces(void) { return PyModule_Create(&module); }
