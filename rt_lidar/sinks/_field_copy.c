/* Compiled twin of sinks/field_copy.copy_same_fields: fields of one structured array copied into
 * another's, every run of side-by-side fields of every record in one pass over the records.
 *
 * NumPy copies a field (or a run of them, as one void block) with one strided pass each: a scan of
 * 115 k points packed into a PointCloud2 takes four passes over both arrays, ~7 ns a record each on
 * this VM. Here each record is read once and its runs copied as fixed-size moves. The bytes are the
 * same: each run is a byte copy, as NumPy's. Built by setuptools as an optional extension: where it is
 * missing, field_copy uses the NumPy code.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define MAX_RUNS 32

/* One run's bytes: the common sizes as fixed-size moves the compiler inlines. */
static inline void copy_run(char *d, const char *s, Py_ssize_t size) {
    switch (size) {
    case 1: *d = *s; break;
    case 2: memcpy(d, s, 2); break;
    case 4: memcpy(d, s, 4); break;
    case 8: memcpy(d, s, 8); break;
    case 12: memcpy(d, s, 12); break;
    case 16: memcpy(d, s, 16); break;
    default: memcpy(d, s, (size_t)size); break;
    }
}

/* The k runs (dst offset, src offset, size) of the int64 buffer ``runs`` (k * 3 values) into the three
 * arrays, each checked to lie inside its records; -1 with a ValueError naming ``who`` where one does not. */
static Py_ssize_t read_runs(const Py_buffer *runs, Py_ssize_t dst_item, Py_ssize_t src_item, Py_ssize_t *doff,
                            Py_ssize_t *soff, Py_ssize_t *size, const char *who) {
    const Py_ssize_t k = runs->len / (Py_ssize_t)(3 * sizeof(int64_t));
    if (runs->len != k * (Py_ssize_t)(3 * sizeof(int64_t)) || k > MAX_RUNS) {
        PyErr_Format(PyExc_ValueError, "%s: bad runs", who);
        return -1;
    }
    for (Py_ssize_t r = 0; r < k; r++) {
        int64_t v[3];
        memcpy(v, (const char *)runs->buf + r * 3 * sizeof(int64_t), sizeof v);
        doff[r] = (Py_ssize_t)v[0];
        soff[r] = (Py_ssize_t)v[1];
        size[r] = (Py_ssize_t)v[2];
        if (v[0] < 0 || v[1] < 0 || v[2] < 1 || v[0] + v[2] > dst_item || v[1] + v[2] > src_item) {
            PyErr_Format(PyExc_ValueError, "%s: a run outside its record", who);
            return -1;
        }
    }
    return k;
}

/* copy_runs(dst, src, n, dst_itemsize, src_itemsize, runs): for each of the n records and each run
 * (dst offset, src offset, size) of the int64 buffer ``runs`` (k * 3 values), copy the run's bytes. */
static PyObject *copy_runs(PyObject *self, PyObject *args) {
    Py_buffer dst, src, runs;
    Py_ssize_t n, dst_item, src_item;
    (void)self;
    if (!PyArg_ParseTuple(args, "w*y*nnny*", &dst, &src, &n, &dst_item, &src_item, &runs)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t doff[MAX_RUNS], soff[MAX_RUNS], size[MAX_RUNS];
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "copy_runs: a negative count");
        goto done;
    }
    const Py_ssize_t k = read_runs(&runs, dst_item, src_item, doff, soff, size, "copy_runs");
    if (k < 0) goto done;
    if (n > 0 && (dst.len < n * dst_item || src.len < n * src_item)) {
        PyErr_SetString(PyExc_ValueError, "copy_runs: buffers shorter than n records");
        goto done;
    }
    {
        char *d = (char *)dst.buf;
        const char *s = (const char *)src.buf;
        Py_BEGIN_ALLOW_THREADS;
        if (k == 1) {
            const Py_ssize_t d0 = doff[0], s0 = soff[0], z = size[0];
            for (Py_ssize_t i = 0; i < n; i++) copy_run(d + i * dst_item + d0, s + i * src_item + s0, z);
        } else {
            for (Py_ssize_t i = 0; i < n; i++) {
                char *dr = d + i * dst_item;
                const char *sr = s + i * src_item;
                for (Py_ssize_t r = 0; r < k; r++) copy_run(dr + doff[r], sr + soff[r], size[r]);
            }
        }
        Py_END_ALLOW_THREADS;
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&dst);
    PyBuffer_Release(&src);
    PyBuffer_Release(&runs);
    return result;
}

/* seconds_f32(dst, src, n, dst_itemsize, src_itemsize, dst_offset, src_offset): each record's int64
 * nanoseconds at src_offset as float32 seconds at dst_offset, (float)((double)t * 1e-9): what NumPy's
 * ``out["time"] = t.astype(np.float64) * 1e-9`` gives (the int64 -> float64 conversion, one float64
 * product, the float64 -> float32 cast, each rounded to nearest), in one pass. */
static PyObject *seconds_f32(PyObject *self, PyObject *args) {
    Py_buffer dst, src;
    Py_ssize_t n, dst_item, src_item, doff, soff;
    (void)self;
    if (!PyArg_ParseTuple(args, "w*y*nnnnn", &dst, &src, &n, &dst_item, &src_item, &doff, &soff)) return NULL;
    PyObject *result = NULL;
    if (n < 0 || doff < 0 || soff < 0 || doff + 4 > dst_item || soff + 8 > src_item ||
        (n > 0 && (dst.len < n * dst_item || src.len < n * src_item))) {
        PyErr_SetString(PyExc_ValueError, "seconds_f32: a field outside its record or short buffers");
        goto done;
    }
    {
        char *d = (char *)dst.buf + doff;
        const char *s = (const char *)src.buf + soff;
        Py_BEGIN_ALLOW_THREADS;
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t t;
            memcpy(&t, s + i * src_item, 8);
            const double seconds = (double)t * 1e-9;
            const float v = (float)seconds;
            memcpy(d + i * dst_item, &v, 4);
        }
        Py_END_ALLOW_THREADS;
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&dst);
    PyBuffer_Release(&src);
    return result;
}

/* Nearest whole number, ties to even, of 0 < v < 2^23 (np.rint's in the default rounding mode): v + 2^23
 * has no bits below the units, so the sum rounds v, and taking 2^23 back is exact. */
static inline float rint_positive(float v) {
    const float big = 8388608.0f; /* IEEE arithmetic: not folded into v (no -ffast-math) */
    return (v + big) - big;
}

/* One float32 as pcd.with_intensity_type's NumPy lines make it: np.nan_to_num (NaN and +-inf to 0),
 * np.rint, np.clip to [0, top]: what is not above 0 rounds to 0 or -0 and clips to 0, what is at or
 * above top clips to top (a whole number), what lies between is rounded. */
static inline float intensity_value(float v, float top) {
    if (!(v > 0.0f) || !isfinite(v)) return 0.0f;
    if (v >= top) return top;
    return rint_positive(v);
}

/* intensity_uint(dst, src, n, dst_itemsize, src_itemsize, dst_offset, src_offset, out_size, max, runs):
 * each record's float32 at src_offset as an unsigned integer of out_size bytes (1 or 2, max below 2^23)
 * at dst_offset: what pcd.with_intensity_type's NumPy lines give (np.nan_to_num, np.rint, np.clip to
 * [0, max] in float32, then the cast of a whole number in range: exact), and the record's runs (as
 * copy_runs; an empty buffer: none) in the same pass. */
static PyObject *intensity_uint(PyObject *self, PyObject *args) {
    Py_buffer dst, src, runs;
    Py_ssize_t n, dst_item, src_item, doff, soff, out_size, max_v;
    (void)self;
    if (!PyArg_ParseTuple(args, "w*y*nnnnnnny*", &dst, &src, &n, &dst_item, &src_item, &doff, &soff, &out_size,
                          &max_v, &runs))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t ro[MAX_RUNS], rs[MAX_RUNS], rz[MAX_RUNS];
    if (n < 0 || doff < 0 || soff < 0 || (out_size != 1 && out_size != 2) || max_v < 0 ||
        max_v >= (out_size == 1 ? 256 : 65536) || doff + out_size > dst_item || soff + 4 > src_item ||
        (n > 0 && (dst.len < n * dst_item || src.len < n * src_item))) {
        PyErr_SetString(PyExc_ValueError, "intensity_uint: a field outside its record, a bad type or short buffers");
        goto done;
    }
    const Py_ssize_t k = read_runs(&runs, dst_item, src_item, ro, rs, rz, "intensity_uint");
    if (k < 0) goto done;
    {
        char *d = (char *)dst.buf;
        const char *s = (const char *)src.buf;
        const float top = (float)max_v;
        Py_BEGIN_ALLOW_THREADS;
        for (Py_ssize_t i = 0; i < n; i++) {
            char *dr = d + i * dst_item;
            const char *sr = s + i * src_item;
            for (Py_ssize_t r = 0; r < k; r++) copy_run(dr + ro[r], sr + rs[r], rz[r]);
            float v;
            memcpy(&v, sr + soff, 4);
            v = intensity_value(v, top);
            if (out_size == 1) {
                dr[doff] = (char)(uint8_t)v;
            } else {
                const uint16_t u = (uint16_t)v;
                memcpy(dr + doff, &u, 2);
            }
        }
        Py_END_ALLOW_THREADS;
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&dst);
    PyBuffer_Release(&src);
    PyBuffer_Release(&runs);
    return result;
}

static PyMethodDef methods[] = {
    {"seconds_f32", seconds_f32, METH_VARARGS,
     "seconds_f32(dst, src, n, dst_itemsize, src_itemsize, dst_offset, src_offset): int64 ns -> float32 s."},
    {"intensity_uint", intensity_uint, METH_VARARGS,
     "intensity_uint(dst, src, n, dst_itemsize, src_itemsize, dst_offset, src_offset, out_size, max, runs): "
     "float32 -> rounded, clipped unsigned, with the runs' bytes."},
    {"copy_runs", copy_runs, METH_VARARGS,
     "copy_runs(dst, src, n, dst_itemsize, src_itemsize, runs): each record's runs of bytes, one pass."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_field_copy", NULL, -1, methods};

PyMODINIT_FUNC PyInit__field_copy(void) { return PyModule_Create(&module); }
