/* Standard normals as NumPy's Generator draws them from a PCG64 bit generator, bit for bit and with the
 * same generator state after, several times cheaper (rt_lidar.physics.normals).
 *
 * NumPy draws a standard normal by the ziggurat method: one 64-bit (float32: 32-bit) output picks a
 * strip, a sign and a magnitude, and in ~99 % of the draws the value is the magnitude times the strip's
 * width. Its loop calls the bit generator through a function pointer and flips the sign with a branch
 * that the CPU mispredicts half the time: ~11 ns a draw here. This file steps PCG64 inline (the
 * generator's published XSL-RR 128/64 output over its 128-bit LCG, with NumPy's buffering of the upper
 * halves for 32-bit draws) and flips the sign without a branch. The rare draws that leave the fast path
 * are handed to NumPy's own function (random_standard_normal or random_standard_normal_f, looked up in
 * the loaded numpy.random._generator module, whose C API exports them) with the generator rewound to
 * before the draw and offered through NumPy's bitgen_t interface, so NumPy computes those itself.
 *
 * The strips' widths and magnitude limits are NumPy's tables. They are not exported, so open_numpy()
 * reads them through NumPy's function: a bit generator that answers a chosen first output shows the width
 * (magnitude 1 times the width) and, by bisection, the largest magnitude that stays on the fast path
 * (a draw that leaves it asks for more outputs). normals.py then checks whole draws against NumPy's
 * Generator once before it uses this, and keeps NumPy's draws wherever the check fails.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    void *state;
    uint64_t (*next_uint64)(void *st);
    uint32_t (*next_uint32)(void *st);
    double (*next_double)(void *st);
    uint64_t (*next_raw)(void *st);
} bitgen_t; /* numpy/random/bitgen.h */

typedef unsigned __int128 u128;

typedef struct {
    u128 state, inc;
    int has_uint32;
    uint32_t uinteger;
} pcg64_t;

#define PCG64_MULT (((u128)0x2360ED051FC65DA4ULL << 64) | 0x4385DF649FCCF645ULL)
#define MAG52 0x000fffffffffffffULL
#define MAG23 0x007fffffU

/* One PCG64 step of the 128-bit state, and its 64-bit output. */
static inline uint64_t step64(u128 *state, u128 inc) {
    *state = *state * PCG64_MULT + inc;
    const uint64_t v = (uint64_t)(*state >> 64) ^ (uint64_t)*state;
    const unsigned rot = (unsigned)(*state >> 122);
    return (v >> rot) | (v << ((-rot) & 63u));
}

static inline uint64_t pcg64_next64(pcg64_t *g) { return step64(&g->state, g->inc); }

/* A 32-bit output: the upper half of the last 64-bit one if it is buffered, else the lower half of a new
 * one (its upper half buffered), as NumPy's PCG64 gives them. */
static inline uint32_t step32(u128 *state, u128 inc, int *has_uint32, uint32_t *uinteger) {
    if (*has_uint32) {
        *has_uint32 = 0;
        return *uinteger;
    }
    const uint64_t next = step64(state, inc);
    *has_uint32 = 1;
    *uinteger = (uint32_t)(next >> 32);
    return (uint32_t)(next & 0xffffffffu);
}

static inline uint32_t pcg64_next32(pcg64_t *g) { return step32(&g->state, g->inc, &g->has_uint32, &g->uinteger); }

static uint64_t gen_next64(void *st) { return pcg64_next64(st); }
static uint32_t gen_next32(void *st) { return pcg64_next32(st); }
static double gen_next_double(void *st) { return (double)(pcg64_next64(st) >> 11) * (1.0 / 9007199254740992.0); }

static double (*np_normal)(bitgen_t *);
static float (*np_normal_f)(bitgen_t *);
static double wi[256];
static uint64_t ki[256];
static float wf[256];
static uint32_t kf[256];
static int tables_ready;

/* -- probing NumPy's tables ---------------------------------------------------------------------- */

typedef struct {
    uint64_t first64;
    uint32_t first32;
    int calls64, calls32, calls_double;
} probe_t;

/* The first output is the chosen one. Later ones give a slow path's tests uniforms inside (0, 1)
 * (next_double: 0.5; a 32-bit 0x40000000 is the float 0.25), and a draw sent round the loop again lands
 * on the base strip's fast path (a 64-bit 0: magnitude 0; 0x40000000: a quarter of the largest
 * magnitude), so that every probe ends after a few outputs. */
static uint64_t probe_next64(void *st) {
    probe_t *p = st;
    return p->calls64++ == 0 ? p->first64 : 0u;
}
static uint32_t probe_next32(void *st) {
    probe_t *p = st;
    return p->calls32++ == 0 ? p->first32 : 0x40000000u;
}
static double probe_next_double(void *st) {
    ((probe_t *)st)->calls_double++;
    return 0.5;
}
static uint64_t probe_raw(void *st) { return probe_next64(st); }

/* NumPy's double draw from first output (magnitude << 9 | idx): its value, and whether it stayed on the
 * fast path (one output taken, nothing else). */
static int probe_double(int idx, uint64_t magnitude, double *value) {
    probe_t p = {(magnitude << 9) | (uint64_t)idx, 0, 0, 0, 0};
    bitgen_t bg = {&p, probe_next64, probe_next32, probe_next_double, probe_raw};
    *value = np_normal(&bg);
    return p.calls64 == 1 && p.calls32 == 0 && p.calls_double == 0;
}

static int probe_float(int idx, uint32_t magnitude, float *value) {
    probe_t p = {0, (magnitude << 9) | (uint32_t)idx, 0, 0, 0};
    bitgen_t bg = {&p, probe_next64, probe_next32, probe_next_double, probe_raw};
    *value = np_normal_f(&bg);
    return p.calls32 == 1 && p.calls64 == 0 && p.calls_double == 0;
}

/* The smallest magnitude in [1, limit] that leaves the fast path (limit + 1 when none does); magnitudes
 * below it stay on it (NumPy's test is magnitude < table entry). */
static uint64_t first_slow(int idx, uint64_t limit, int is_float) {
    double dv;
    float fv;
#define FAST(m) (is_float ? probe_float(idx, (uint32_t)(m), &fv) : probe_double(idx, (m), &dv))
    if (FAST(limit)) return limit + 1;
    uint64_t lo = 1, hi = limit; /* FAST(lo) holds (checked by the caller), FAST(hi) does not */
    while (hi - lo > 1) {
        const uint64_t mid = lo + (hi - lo) / 2;
        if (FAST(mid)) lo = mid;
        else hi = mid;
    }
#undef FAST
    return hi;
}

/* open_numpy(path): look NumPy's two draws up in the loaded module at path and read its tables. False
 * where the module lacks them. A strip whose magnitude 1 already leaves the fast path keeps only
 * magnitude 0 there (value 0 whatever its width) or none. */
static PyObject *open_numpy(PyObject *self, PyObject *args) {
    (void)self;
    const char *path;
    if (!PyArg_ParseTuple(args, "s", &path)) return NULL;
    if (tables_ready) Py_RETURN_TRUE; /* read once: a second reader must not unset them under a fill */
    void *lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (lib == NULL) lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) return PyErr_Format(PyExc_OSError, "cannot open %s: %s", path, dlerror());
    *(void **)(&np_normal) = dlsym(lib, "random_standard_normal");
    *(void **)(&np_normal_f) = dlsym(lib, "random_standard_normal_f");
    if (np_normal == NULL || np_normal_f == NULL) Py_RETURN_FALSE;
    for (int idx = 0; idx < 256; idx++) {
        double dv;
        float fv;
        if (probe_double(idx, 1, &dv)) {
            wi[idx] = dv;
            ki[idx] = first_slow(idx, MAG52, 0);
        } else {
            wi[idx] = 0.0;
            ki[idx] = probe_double(idx, 0, &dv) ? 1 : 0;
        }
        if (probe_float(idx, 1, &fv)) {
            wf[idx] = fv;
            kf[idx] = (uint32_t)first_slow(idx, MAG23, 1);
        } else {
            wf[idx] = 0.0f;
            kf[idx] = probe_float(idx, 0, &fv) ? 1 : 0;
        }
    }
    tables_ready = 1;
    Py_RETURN_TRUE;
}

/* -- the draws ----------------------------------------------------------------------------------- */

static inline double flip_double(double x, uint64_t sign) {
    uint64_t bits;
    memcpy(&bits, &x, 8);
    bits ^= sign << 63;
    memcpy(&x, &bits, 8);
    return x;
}

static inline float flip_float(float x, uint32_t sign) {
    uint32_t bits;
    memcpy(&bits, &x, 4);
    bits ^= sign << 31;
    memcpy(&x, &bits, 4);
    return x;
}

/* The generator's state stays in locals (in registers) over the fast draws and goes through memory only
 * around a slow one, which NumPy draws from the bitgen_t over g. */
static void fill_double(pcg64_t *g, double *out, Py_ssize_t n) {
    bitgen_t bg = {g, gen_next64, gen_next32, gen_next_double, gen_next64};
    u128 state = g->state;
    const u128 inc = g->inc;
    for (Py_ssize_t i = 0; i < n; i++) {
        const u128 before = state; /* 64-bit outputs leave the 32-bit buffer alone */
        uint64_t r = step64(&state, inc);
        const int idx = (int)(r & 0xff);
        r >>= 8;
        const uint64_t sign = r & 1u, magnitude = (r >> 1) & MAG52;
        const double x = (double)(int64_t)magnitude * wi[idx]; /* magnitude < 2^52: exact either way */
        if (magnitude < ki[idx]) {
            out[i] = flip_double(x, sign);
        } else {
            g->state = before;
            out[i] = np_normal(&bg);
            state = g->state;
        }
    }
    g->state = state;
}

static void fill_float(pcg64_t *g, float *out, Py_ssize_t n) {
    bitgen_t bg = {g, gen_next64, gen_next32, gen_next_double, gen_next64};
    u128 state = g->state;
    const u128 inc = g->inc;
    int has_uint32 = g->has_uint32;
    uint32_t uinteger = g->uinteger;
    for (Py_ssize_t i = 0; i < n; i++) {
        const u128 state_before = state;
        const int has_before = has_uint32;
        const uint32_t uinteger_before = uinteger;
        const uint32_t r = step32(&state, inc, &has_uint32, &uinteger);
        const int idx = (int)(r & 0xff);
        const uint32_t sign = (r >> 8) & 1u, magnitude = (r >> 9) & MAG23;
        const float x = (float)(int32_t)magnitude * wf[idx]; /* magnitude < 2^23: exact either way */
        if (magnitude < kf[idx]) {
            out[i] = flip_float(x, sign);
        } else {
            g->state = state_before;
            g->has_uint32 = has_before;
            g->uinteger = uinteger_before;
            out[i] = np_normal_f(&bg);
            state = g->state;
            has_uint32 = g->has_uint32;
            uinteger = g->uinteger;
        }
    }
    g->state = state;
    g->has_uint32 = has_uint32;
    g->uinteger = uinteger;
}

/* fill(state_hi, state_lo, inc_hi, inc_lo, has_uint32, uinteger, out float64 or float32 (N,), contiguous)
 * -> (state_hi, state_lo, has_uint32, uinteger) after N standard normals drawn into out. */
static PyObject *fill(PyObject *self, PyObject *args) {
    (void)self;
    unsigned long long s_hi, s_lo, i_hi, i_lo;
    int has_uint32;
    unsigned long uinteger;
    PyObject *outobj;
    if (!PyArg_ParseTuple(args, "KKKKpkO", &s_hi, &s_lo, &i_hi, &i_lo, &has_uint32, &uinteger, &outobj))
        return NULL;
    if (!tables_ready) return PyErr_Format(PyExc_RuntimeError, "open_numpy() first");
    Py_buffer view;
    if (PyObject_GetBuffer(outobj, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) != 0) return NULL;
    const char *fmt = view.format;
    if (fmt[0] == '<' || fmt[0] == '=' || fmt[0] == '@') fmt++;
    const int is_double = view.itemsize == 8 && strcmp(fmt, "d") == 0;
    const int is_float = view.itemsize == 4 && strcmp(fmt, "f") == 0;
    if (!is_double && !is_float) {
        PyBuffer_Release(&view);
        return PyErr_Format(PyExc_ValueError, "out: need a contiguous float64 or float32 array");
    }
    pcg64_t g = {((u128)s_hi << 64) | s_lo, ((u128)i_hi << 64) | i_lo, has_uint32, (uint32_t)uinteger};
    const Py_ssize_t n = view.len / view.itemsize;
    Py_BEGIN_ALLOW_THREADS
    if (is_double) fill_double(&g, view.buf, n);
    else fill_float(&g, view.buf, n);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return Py_BuildValue("KKik", (unsigned long long)(g.state >> 64), (unsigned long long)g.state, g.has_uint32,
                         (unsigned long)g.uinteger);
}

/* uniform_below(state_hi, state_lo, inc_hi, inc_lo, empty uint8 (N,), p float64 (N,) or (1,), out int64 (N,))
 * -> (state_hi, state_lo, count): N uniform doubles u drawn as NumPy's Generator.random(N) draws them from
 * a PCG64 (the top 53 bits of a 64-bit output times 2^-53; the 32-bit buffer is left alone), and the
 * positions j where empty[j] and u[j] < p[j] (p[0] for every j when p has one value) written to out's
 * first count places, ascending: np.nonzero(empty & (rng.random(N) < p)) without the draws' array. */
static PyObject *uniform_below(PyObject *self, PyObject *args) {
    (void)self;
    unsigned long long s_hi, s_lo, i_hi, i_lo;
    PyObject *o[3];
    if (!PyArg_ParseTuple(args, "KKKKOOO", &s_hi, &s_lo, &i_hi, &i_lo, &o[0], &o[1], &o[2])) return NULL;
    Py_buffer v[3];
    int got = 0;
    const int flags[3] = {PyBUF_C_CONTIGUOUS | PyBUF_FORMAT, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT,
                          PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE};
    const char *want[3] = {"B?", "d", "lq"};
    const Py_ssize_t size[3] = {1, 8, 8};
    const char *name[3] = {"empty", "p", "out"};
    for (; got < 3; got++) {
        if (PyObject_GetBuffer(o[got], &v[got], flags[got]) != 0) break;
        const char *fmt = v[got].format;
        if (fmt[0] == '<' || fmt[0] == '=' || fmt[0] == '@') fmt++;
        if (v[got].itemsize != size[got] || strlen(fmt) != 1 || strchr(want[got], fmt[0]) == NULL) {
            PyErr_Format(PyExc_ValueError, "uniform_below: %s has the wrong type", name[got]);
            PyBuffer_Release(&v[got]);
            break;
        }
    }
    const Py_ssize_t n = got == 3 ? v[0].len : 0, np_ = got == 3 ? v[1].len / 8 : 0;
    if (got == 3 && ((np_ != 1 && np_ != n) || v[2].len / 8 < n)) {
        PyErr_Format(PyExc_ValueError, "uniform_below: p needs 1 or %zd values and out %zd places", n, n);
        got = 4;
    }
    if (got != 3) {
        for (int k = 0; k < got && k < 3; k++) PyBuffer_Release(&v[k]);
        return NULL;
    }
    const uint8_t *empty = v[0].buf;
    const double *p = v[1].buf;
    int64_t *out = v[2].buf;
    const Py_ssize_t step = np_ == 1 ? 0 : 1;
    u128 state = ((u128)s_hi << 64) | s_lo;
    const u128 inc = ((u128)i_hi << 64) | i_lo;
    Py_ssize_t count = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t j = 0; j < n; j++) {
        const double u = (double)(step64(&state, inc) >> 11) * (1.0 / 9007199254740992.0);
        out[count] = j;
        count += (empty[j] != 0) & (u < p[j * step]);
    }
    Py_END_ALLOW_THREADS
    for (int k = 0; k < 3; k++) PyBuffer_Release(&v[k]);
    return Py_BuildValue("KKn", (unsigned long long)(state >> 64), (unsigned long long)state, count);
}

/* tables() -> (wi, ki, wf, kf) as bytes: the tables probe_tables() read (for tests). */
static PyObject *tables(PyObject *self, PyObject *args) {
    (void)self;
    (void)args;
    if (!tables_ready) return PyErr_Format(PyExc_RuntimeError, "open_numpy() first");
    return Py_BuildValue("y#y#y#y#", (const char *)wi, (Py_ssize_t)sizeof wi, (const char *)ki, (Py_ssize_t)sizeof ki,
                         (const char *)wf, (Py_ssize_t)sizeof wf, (const char *)kf, (Py_ssize_t)sizeof kf);
}

static PyMethodDef methods[] = {
    {"tables", tables, METH_NOARGS, "tables() -> (wi, ki, wf, kf) as bytes"},
    {"open_numpy", open_numpy, METH_VARARGS, "open_numpy(path) -> bool: NumPy's draws and tables from the module at path."},
    {"uniform_below", uniform_below, METH_VARARGS,
     "uniform_below(state_hi, state_lo, inc_hi, inc_lo, empty, p, out) -> (state_hi, state_lo, count)"},
    {"fill", fill, METH_VARARGS,
     "fill(state_hi, state_lo, inc_hi, inc_lo, has_uint32, uinteger, out) -> (state_hi, state_lo, has_uint32, uinteger)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_normals", NULL, -1, methods};

PyMODINIT_FUNC PyInit__normals(void) { return PyModule_Create(&module); }
