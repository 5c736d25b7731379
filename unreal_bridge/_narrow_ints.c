/* Compiled twin of fast_decode._decode_narrow_ints: a msgpack array of narrow ints read in one pass.
 *
 * msgpack-c writes each int in its smallest form, so AirSim's segmentation ids (0..255 and -1) arrive
 * as positive fixints, 0xcc uint8 and negative fixints mixed: one or two bytes an element. NumPy needs
 * ~15 passes to find the element boundaries; this needs one, 16 bytes a step where the CPU has SSSE3
 * (x86-64), else a byte at a time. Built by setuptools as an optional
 * extension: where it is missing, fast_decode uses its NumPy version, which gives the same answers.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* The one-pass byte walk from (q, i), where no element is split at q. Returns the status (below);
 * *q_out / *i_out: where it stopped. */
static int walk(const unsigned char *b, Py_ssize_t len, Py_ssize_t q, Py_ssize_t i, Py_ssize_t n, int16_t *o,
                int bad, Py_ssize_t *q_out, Py_ssize_t *i_out) {
    /* Walk bytes, not elements: a byte is a payload iff the one before was a type byte, so the only
     * state carried between iterations is one flag (stepping q by each element's width would chain
     * every load on the one before, ~3x slower). An element is written when its last byte is seen. */
    int pending = 0, unsigned_payload = 0;
    for (; i < n && q < len; q++) {
        const unsigned int c = b[q];
        const int type = !pending & ((c == 0xCC) | (c == 0xD0));
        bad |= !pending & !type & (c >= 0x80) & (c < 0xE0);
        /* int8 value, plus 256 for a uint8 payload >= 128; a type byte's value is overwritten */
        o[i] = (int16_t)((int)(int8_t)c + ((pending & unsigned_payload & (int)(c >> 7)) << 8));
        i += !type;
        unsigned_payload = c == 0xCC;
        pending = type;
    }
    *q_out = q;
    *i_out = i;
    return bad ? 1 : (i < n ? 2 : 0);
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#define HAVE_SIMD 1

static unsigned char compact[256][8]; /* positions of the set bits of a byte, then 0x80 (pshufb: 0) */
static int simd_ok;

static void init_simd(void) {
    for (int m = 0; m < 256; m++) {
        int k = 0;
        for (int j = 0; j < 8; j++)
            if (m >> j & 1) compact[m][k++] = (unsigned char)j;
        for (; k < 8; k++) compact[m][k] = 0x80;
    }
    __builtin_cpu_init();
    simd_ok = __builtin_cpu_supports("ssse3") && __builtin_cpu_supports("popcnt");
}

/* 16 bytes at a time (SSSE3): the type bytes (0xcc, 0xd0) are found by compares, the elements (every
 * other byte) gathered by a shuffle from a table of the keep mask's two halves, and widened to int16
 * (zero-extended after 0xcc, sign-extended otherwise). A chunk never ends on a type byte (it stops one
 * short), so no element is split between chunks; a chunk where a payload is itself 0xcc or 0xd0 (an id
 * of 204 or 208 after a type byte) is read element by element. The rest goes to walk(). */
__attribute__((target("ssse3,popcnt"))) static int simd(const unsigned char *b, Py_ssize_t len,
                                                          Py_ssize_t p, Py_ssize_t n, int16_t *o,
                                                          Py_ssize_t *q_out, Py_ssize_t *i_out) {
    const __m128i cc = _mm_set1_epi8((char)0xCC), d0 = _mm_set1_epi8((char)0xD0);
    const __m128i lim = _mm_set1_epi8(-32), zero = _mm_setzero_si128(), eight = _mm_set1_epi8(8);
    Py_ssize_t q = p, i = 0;
    int bad = 0;
    while (q + 16 <= len && i + 16 <= n) {
        const __m128i x = _mm_loadu_si128((const __m128i *)(b + q));
        const __m128i is_cc = _mm_cmpeq_epi8(x, cc);
        const unsigned t = (unsigned)_mm_movemask_epi8(_mm_or_si128(is_cc, _mm_cmpeq_epi8(x, d0)));
        if (t & (t << 1)) {
            const Py_ssize_t stop = q + 16;
            while (q < stop) {
                const unsigned int c = b[q];
                if ((c == 0xCC || c == 0xD0) && q + 1 >= stop) break; /* its payload: next chunk */
                if (c == 0xCC) {
                    o[i++] = (int16_t)b[q + 1];
                    q += 2;
                } else if (c == 0xD0) {
                    o[i++] = (int16_t)(int8_t)b[q + 1];
                    q += 2;
                } else {
                    bad |= (c >= 0x80) & (c < 0xE0);
                    o[i++] = (int16_t)(int8_t)c;
                    q += 1;
                }
            }
            continue;
        }
        unsigned keep = ~t & 0xFFFFu, used = 16;
        if (t & 0x8000u) { /* the last byte is a type byte: its payload is in the next chunk */
            keep &= 0x7FFFu;
            used = 15;
        }
        const unsigned payload = (t << 1) & 0xFFFFu;
        const unsigned odd = (unsigned)_mm_movemask_epi8(_mm_cmpgt_epi8(lim, x)); /* 0x80..0xdf */
        bad |= (odd & ~t & ~payload & keep) != 0;
        const __m128i after_cc = _mm_slli_si128(is_cc, 1);
        const unsigned lo = keep & 0xFFu, hi = keep >> 8;
        const __m128i sel = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)compact[lo]),
                                               _mm_add_epi8(_mm_loadl_epi64((const __m128i *)compact[hi]), eight));
        const __m128i v = _mm_shuffle_epi8(x, sel), u = _mm_shuffle_epi8(after_cc, sel);
        const __m128i high = _mm_andnot_si128(u, _mm_cmpgt_epi8(zero, v));
        _mm_storeu_si128((__m128i *)(o + i), _mm_unpacklo_epi8(v, high));
        i += __builtin_popcount(lo);
        _mm_storeu_si128((__m128i *)(o + i), _mm_unpackhi_epi8(v, high)); /* over the first's unused */
        i += __builtin_popcount(hi);
        q += used;
    }
    return walk(b, len, q, i, n, o, bad, q_out, i_out);
}
#endif

/* narrow_ints(buf, p, n, out) -> (status, value)
 *   status 0: value is the offset just past the array; out[0:n] holds the elements.
 *   status 1: an element is not a fixint, 0xcc or 0xd0 (value: elements read); out is partly written.
 *   status 2: the data ends inside the array (value: the number of complete elements).
 * out must be a writable, C-contiguous buffer of at least n int16 values. */
static PyObject *narrow_ints(PyObject *self, PyObject *args) {
    Py_buffer src, dst;
    Py_ssize_t p, n;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nnw*", &src, &p, &n, &dst))
        return NULL;
    if (p < 0 || n < 0 || dst.len < n * (Py_ssize_t)sizeof(int16_t)) {
        PyBuffer_Release(&src);
        PyBuffer_Release(&dst);
        PyErr_SetString(PyExc_ValueError, "narrow_ints: negative offset or count, or out too small");
        return NULL;
    }
    const unsigned char *b = (const unsigned char *)src.buf;
    int16_t *o = (int16_t *)dst.buf;
    Py_ssize_t q = p, i = 0;
    int status;
    Py_BEGIN_ALLOW_THREADS
#ifdef HAVE_SIMD
    if (simd_ok)
        status = simd(b, src.len, p, n, o, &q, &i);
    else
#endif
        status = walk(b, src.len, p, 0, n, o, 0, &q, &i);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    return Py_BuildValue("(in)", status, status == 0 ? q : i);
}

static PyObject *simd_used(PyObject *self, PyObject *args) {
    (void)self;
    (void)args;
#ifdef HAVE_SIMD
    return PyBool_FromLong(simd_ok);
#else
    Py_RETURN_FALSE;
#endif
}

static PyMethodDef methods[] = {
    {"narrow_ints", narrow_ints, METH_VARARGS, "Decode a msgpack array of 1- and 2-byte ints."},
    {"simd_used", simd_used, METH_NOARGS, "Whether the 16-byte (SSSE3) path runs on this CPU."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_narrow_ints", NULL, -1, methods};

PyMODINIT_FUNC PyInit__narrow_ints(void) {
#ifdef HAVE_SIMD
    init_simd();
#endif
    return PyModule_Create(&module);
}
