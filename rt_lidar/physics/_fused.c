/* Compiled twins of the single-return physics' element-wise NumPy steps (rt_lidar.physics.fused).
 *
 * Each function does in one pass what a few dozen NumPy calls do over a frame's ~10^5 rays, with the
 * same operations in the same order and the same types (NumPy 2's rules: a Python float meets a
 * float32 array as float32), so every value is NumPy's bit for bit. The exponential stays NumPy's (its
 * own SIMD exp is not the C library's); the power of the reflectance lobes is the C library's powf,
 * which NumPy's float32 power calls too where it has no SIMD power of its own (fused.py checks that
 * once: on AVX-512 NumPy takes Intel's SVML instead, and fused.py hands echo_power NumPy's own lobe powers).
 * Built with -ffp-contract=off (no fused multiply-adds), as an
 * optional extension: where it is missing, the NumPy code runs.
 */
#include "_np_twins.h"

/* echo_power(range f4, cos f4, material i2, extra_t f4, trans0 f4, diffuse, retro_gain, retro_exp,
 *            specular_gain, specular_exp, retro_zero, specular_zero (f4 tables), k, power f4 out, refl f4
 *            out, glass_material i2 or None, flags u1 out or None, through_glass)
 * EchoModel.power of every ray: S = effective_reflectance(cos, max(material, 0)), T = trans0 * extra_t
 * (trans0 = two_way_transmission(range), NumPy's exp), P = k T S 1 / r^2 with r = max(range, 1e-3).
 * With glass_material (object_echoes): P is 0 where material < 0, and flags say THROUGH_GLASS where the
 * ray crossed glass (glass_material >= 0) to an object. *_zero: per material, the largest cosine whose
 * powf(cos, exponent) is 0 (most specular lobes underflow, and powf is slow there): at or below it the
 * lobe adds gain * 0 without calling powf, the same value. retro_pow, specular_pow (f4 (N,), optional): each
 * ray's lobe power computed by the caller (NumPy's own power, where that is not the C library's powf), read
 * for the rays whose material has the lobe instead of calling powf. Returns None; a material past the
 * tables raises. */
static PyObject *echo_power(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[18];
    double k;
    int through_glass;
    o[16] = o[17] = Py_None;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOdOOOOi|OO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7],
                          &o[8], &o[9], &o[14], &o[15], &k, &o[10], &o[11], &o[12], &o[13], &through_glass, &o[16],
                          &o[17]))
        return NULL;
    Buf b[18];
    memset(b, 0, sizeof b);
    Py_ssize_t n = buf_items(o[0], 4), nm = buf_items(o[5], 4);
    if (n < 0 || nm < 0) return NULL;
    int object_mode = o[12] != Py_None;
    if (buf_get(&b[0], o[0], 0, 'f', 4, n, "range") || buf_get(&b[1], o[1], 0, 'f', 4, n, "cos") ||
        buf_get(&b[2], o[2], 0, 'h', 2, n, "material") || buf_get(&b[3], o[3], 0, 'f', 4, n, "extra_t") ||
        buf_get(&b[4], o[4], 0, 'f', 4, n, "trans0") || buf_get(&b[5], o[5], 0, 'f', 4, nm, "diffuse") ||
        buf_get(&b[6], o[6], 0, 'f', 4, nm, "retro_gain") || buf_get(&b[7], o[7], 0, 'f', 4, nm, "retro_exponent") ||
        buf_get(&b[8], o[8], 0, 'f', 4, nm, "specular_gain") ||
        buf_get(&b[9], o[9], 0, 'f', 4, nm, "specular_exponent") || buf_get(&b[10], o[10], 1, 'f', 4, n, "power") ||
        buf_get(&b[11], o[11], 1, 'f', 4, n, "refl") ||
        buf_get(&b[14], o[14], 0, 'f', 4, nm, "retro_zero") || buf_get(&b[15], o[15], 0, 'f', 4, nm, "specular_zero") ||
        (object_mode && (buf_get(&b[12], o[12], 0, 'h', 2, n, "glass_material") ||
                         buf_get(&b[13], o[13], 1, 'B', 1, n, "flags"))) ||
        (o[16] != Py_None && buf_get(&b[16], o[16], 0, 'f', 4, n, "retro_pow")) ||
        (o[17] != Py_None && buf_get(&b[17], o[17], 0, 'f', 4, n, "specular_pow"))) {
        buf_release(b, 18);
        return NULL;
    }
    const float *rpow = o[16] != Py_None ? b[16].view.buf : NULL, *spow = o[17] != Py_None ? b[17].view.buf : NULL;
    const float *rz = b[14].view.buf, *sz = b[15].view.buf;
    const float *range = b[0].view.buf, *cosi = b[1].view.buf, *extra = b[3].view.buf, *t0 = b[4].view.buf;
    const int16_t *mat = b[2].view.buf;
    const float *diffuse = b[5].view.buf, *rg = b[6].view.buf, *re = b[7].view.buf, *sg = b[8].view.buf,
                *se = b[9].view.buf;
    float *power = b[10].view.buf, *refl = b[11].view.buf;
    const int16_t *gmat = object_mode ? b[12].view.buf : NULL;
    uint8_t *flags = object_mode ? b[13].view.buf : NULL;
    const float kf = (float)k, one = (float)1.0, rmin = (float)1e-3;
    Py_ssize_t bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        const int m = mat[i] < 0 ? 0 : mat[i];
        if (m >= nm) {
            bad = i;
            break;
        }
        const float c = clip_np(cosi[i], 0.0f, 1.0f);
        float s = diffuse[m] * c;
        const int zero_ok = !signbit(c); /* powf(-0.0, an odd exponent) is -0.0: that one is called */
        if (rg[m] > 0) s = s + rg[m] * (rpow ? rpow[i] : zero_ok && c <= rz[m] ? 0.0f : powf(c, re[m]));
        if (sg[m] > 0) s = s + sg[m] * (spow ? spow[i] : zero_ok && c <= sz[m] ? 0.0f : powf(c, se[m]));
        const float trans = t0[i] * extra[i];
        const float r = max_np(range[i], rmin);
        const float p = (((kf * trans) * s) * one) / (r * r);
        refl[i] = s;
        if (object_mode) {
            const int obj = mat[i] >= 0;
            power[i] = obj ? p : 0.0f;
            flags[i] = (uint8_t)((gmat[i] >= 0 && obj) ? through_glass : 0);
        } else {
            power[i] = p;
        }
    }
    Py_END_ALLOW_THREADS
    const int bad_material = bad >= 0 ? mat[bad] : 0;
    buf_release(b, 18);
    if (bad >= 0)
        return PyErr_Format(PyExc_IndexError, "echo_power: material %d of ray %zd is not in the tables", bad_material,
                            bad);
    Py_RETURN_NONE;
}

/* pack_points(out u1 (M * 36), offsets (x, y, z, intensity, reflectivity, ring, t, return_id, flags,
 *             segment), itemsize, direction f4 (N, 3), idx i8 (M), measured f4, intensity f4, refl f4,
 *             ring u2 (N), t i8 (N), return_id u1, flags u1, segment u4 (M each unless said))
 * The structured points of SensorPhysics.apply: x, y, z = direction[idx] * measured (float32), the
 * per-point fields copied, ring and t taken at idx. */
static PyObject *pack_points(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[12];
    Py_ssize_t off[10], itemsize;
    if (!PyArg_ParseTuple(args, "O(nnnnnnnnnn)nOOOOOOOOOO", &o[0], &off[0], &off[1], &off[2], &off[3], &off[4],
                          &off[5], &off[6], &off[7], &off[8], &off[9], &itemsize, &o[1], &o[2], &o[3], &o[4],
                          &o[5], &o[6], &o[7], &o[8], &o[9], &o[10]))
        return NULL;
    Buf b[11];
    memset(b, 0, sizeof b);
    Py_ssize_t m = buf_items(o[2], 8), n = buf_items(o[6], 2);
    if (m < 0 || n < 0) return NULL;
    static const Py_ssize_t size[10] = {4, 4, 4, 4, 4, 2, 8, 1, 1, 4};
    for (int f = 0; f < 10; f++)
        if (off[f] < 0 || off[f] + size[f] > itemsize)
            return PyErr_Format(PyExc_ValueError, "pack_points: field %d at offset %zd is past the item", f, off[f]);
    if (buf_get(&b[0], o[0], 1, 'B', 1, m * itemsize, "out") || buf_get(&b[1], o[1], 0, 'f', 4, 3 * n, "direction") ||
        buf_get(&b[2], o[2], 0, 'q', 8, m, "idx") || buf_get(&b[3], o[3], 0, 'f', 4, m, "measured") ||
        buf_get(&b[4], o[4], 0, 'f', 4, m, "intensity") || buf_get(&b[5], o[5], 0, 'f', 4, m, "reflectivity") ||
        buf_get(&b[6], o[6], 0, 'H', 2, n, "ring") || buf_get(&b[7], o[7], 0, 'q', 8, n, "t") ||
        buf_get(&b[8], o[8], 0, 'B', 1, m, "return_id") || buf_get(&b[9], o[9], 0, 'B', 1, m, "flags") ||
        buf_get(&b[10], o[10], 0, 'I', 4, m, "segment")) {
        buf_release(b, 11);
        return NULL;
    }
    unsigned char *out = b[0].view.buf;
    const float *dir = b[1].view.buf, *meas = b[3].view.buf, *inten = b[4].view.buf, *refl = b[5].view.buf;
    const int64_t *idx = b[2].view.buf, *t = b[7].view.buf;
    const uint16_t *ring = b[6].view.buf;
    const uint8_t *rid = b[8].view.buf, *fl = b[9].view.buf;
    const uint32_t *seg = b[10].view.buf;
    Py_ssize_t bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t j = 0; j < m; j++) {
        const int64_t i = idx[j];
        if (i < 0 || i >= n) {
            bad = j;
            break;
        }
        unsigned char *row = out + j * itemsize;
        const float x = dir[3 * i] * meas[j], y = dir[3 * i + 1] * meas[j], z = dir[3 * i + 2] * meas[j];
        memcpy(row + off[0], &x, 4);
        memcpy(row + off[1], &y, 4);
        memcpy(row + off[2], &z, 4);
        memcpy(row + off[3], &inten[j], 4);
        memcpy(row + off[4], &refl[j], 4);
        memcpy(row + off[5], &ring[i], 2);
        memcpy(row + off[6], &t[i], 8);
        memcpy(row + off[7], &rid[j], 1);
        memcpy(row + off[8], &fl[j], 1);
        memcpy(row + off[9], &seg[j], 4);
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 11);
    if (bad >= 0) return PyErr_Format(PyExc_IndexError, "pack_points: idx[%zd] is not a pulse", bad);
    Py_RETURN_NONE;
}

/* detect(power f4 (N), sigma f8 (N), z f8 (N), shot, threshold, range f4 (N), range_min, range_max,
 *        idx i8 (N) out) -> m
 * The pulses the receiver detects within the range limits (EchoModel.detected & the range test of
 * SensorPhysics._single): power + sqrt(sigma^2 + shot max(power, 0)) z >= threshold in float64, range in
 * [min, max] in float32; their indices into idx, in order. */
static PyObject *detect(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[5], *out;
    double shot, thr, rmin, rmax;
    if (!PyArg_ParseTuple(args, "OOOddOddO", &o[0], &o[1], &o[2], &shot, &thr, &o[3], &rmin, &rmax, &out))
        return NULL;
    Buf b[5];
    memset(b, 0, sizeof b);
    Py_ssize_t n = buf_items(o[0], 4);
    if (n < 0) return NULL;
    if (buf_get(&b[0], o[0], 0, 'f', 4, n, "power") || buf_get(&b[1], o[1], 0, 'd', 8, n, "sigma") ||
        buf_get(&b[2], o[2], 0, 'd', 8, n, "z") || buf_get(&b[3], o[3], 0, 'f', 4, n, "range") ||
        buf_get(&b[4], out, 1, 'q', 8, n, "idx")) {
        buf_release(b, 5);
        return NULL;
    }
    const float *pw = b[0].view.buf, *range = b[3].view.buf;
    const double *sig = b[1].view.buf, *z = b[2].view.buf;
    int64_t *idx = b[4].view.buf;
    const float lo = (float)rmin, hi = (float)rmax;
    Py_ssize_t m = 0;
    uint8_t chunk_keep[1024];
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t at = 0; at < n; at += 1024) { /* the tests in chunks (a loop the compiler vectorises), */
        const Py_ssize_t len = n - at < 1024 ? n - at : 1024; /* then the kept indices in order */
        for (Py_ssize_t k = 0; k < len; k++) {
            const Py_ssize_t i = at + k;
            const double p = (double)pw[i];
            const double s = sqrt(sig[i] * sig[i] + shot * max_np64(p, 0.0));
            chunk_keep[k] = (uint8_t)((p + s * z[i] >= thr) & (range[i] >= lo) & (range[i] <= hi));
        }
        for (Py_ssize_t k = 0; k < len; k++) {
            idx[m] = at + k;
            m += chunk_keep[k];
        }
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 5);
    return PyLong_FromSsize_t(m);
}

/* range_noise(range f4 (M), n f4 (M), power f4 (M), sigma f8 (N), pulse i8 (M), shot, accuracy^2, k,
 *             out f4 (M))
 * The measured ranges of SensorPhysics.apply: the noise floor s = sqrt(sigma[pulse]^2 + shot max(P, 0)),
 * jitter (k s) / max(P, 1e-30), sigma_r = sqrt(accuracy^2 + jitter^2), max(range + sigma_r n, 0), float64
 * then float32 (kernels.apply_range_noise). */
static PyObject *range_noise(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[6];
    double shot, acc2, kj;
    if (!PyArg_ParseTuple(args, "OOOOOdddO", &o[0], &o[1], &o[2], &o[3], &o[4], &shot, &acc2, &kj, &o[5]))
        return NULL;
    Buf b[6];
    memset(b, 0, sizeof b);
    Py_ssize_t m = buf_items(o[0], 4), n = buf_items(o[3], 8);
    if (m < 0 || n < 0) return NULL;
    if (buf_get(&b[0], o[0], 0, 'f', 4, m, "range") || buf_get(&b[1], o[1], 0, 'f', 4, m, "n") ||
        buf_get(&b[2], o[2], 0, 'f', 4, m, "power") || buf_get(&b[3], o[3], 0, 'd', 8, n, "sigma") ||
        buf_get(&b[4], o[4], 0, 'q', 8, m, "pulse") || buf_get(&b[5], o[5], 1, 'f', 4, m, "out")) {
        buf_release(b, 6);
        return NULL;
    }
    const float *range = b[0].view.buf, *nz = b[1].view.buf, *pw = b[2].view.buf;
    const double *sig = b[3].view.buf;
    const int64_t *pulse = b[4].view.buf;
    float *out = b[5].view.buf;
    const float floor_w = (float)1e-30;
    Py_ssize_t bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t j = 0; j < m; j++) { /* every pulse checked first: the loop below has no exit */
        if (pulse[j] < 0 || pulse[j] >= n) {
            bad = j;
            break;
        }
    }
    if (bad < 0) {
        for (Py_ssize_t j = 0; j < m; j++) { /* no exit: the compiler vectorises it */
            const double sg = sig[pulse[j]];
            const double s = sqrt(sg * sg + shot * max_np64((double)pw[j], 0.0));
            const double jitter = (kj * s) / (double)max_np(pw[j], floor_w);
            const double sr = sqrt(acc2 + jitter * jitter);
            out[j] = (float)max_np64((double)range[j] + sr * (double)nz[j], 0.0);
        }
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 6);
    if (bad >= 0) return PyErr_Format(PyExc_IndexError, "range_noise: pulse[%zd] is not a pulse", bad);
    Py_RETURN_NONE;
}

/* select(idx i8 (M), range f4, power f4, segment u4, flags u1 (N each), trans f4 (M), k, range_out f4,
 *        power_out f4, refl_out f4, segment_out u4, flags_out u1 (M each))
 * The detections' rows of SensorPhysics._single: the fields taken at idx, and the measured reflectivity
 * power / max(unit, 1e-30), unit = k trans 1 1 / max(range, 1e-3)^2 (EchoModel.unit_power; trans =
 * two_way_transmission(range[idx]), NumPy's exp). */
static PyObject *select_rows(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[11];
    double k;
    if (!PyArg_ParseTuple(args, "OOOOOOdOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &k, &o[6], &o[7], &o[8],
                          &o[9], &o[10]))
        return NULL;
    Buf b[11];
    memset(b, 0, sizeof b);
    Py_ssize_t m = buf_items(o[0], 8), n = buf_items(o[1], 4);
    if (m < 0 || n < 0) return NULL;
    if (buf_get(&b[0], o[0], 0, 'q', 8, m, "idx") || buf_get(&b[1], o[1], 0, 'f', 4, n, "range") ||
        buf_get(&b[2], o[2], 0, 'f', 4, n, "power") || buf_get(&b[3], o[3], 0, 'I', 4, n, "segment") ||
        buf_get(&b[4], o[4], 0, 'B', 1, n, "flags") || buf_get(&b[5], o[5], 0, 'f', 4, m, "trans") ||
        buf_get(&b[6], o[6], 1, 'f', 4, m, "range_out") || buf_get(&b[7], o[7], 1, 'f', 4, m, "power_out") ||
        buf_get(&b[8], o[8], 1, 'f', 4, m, "refl_out") || buf_get(&b[9], o[9], 1, 'I', 4, m, "segment_out") ||
        buf_get(&b[10], o[10], 1, 'B', 1, m, "flags_out")) {
        buf_release(b, 11);
        return NULL;
    }
    const int64_t *idx = b[0].view.buf;
    const float *range = b[1].view.buf, *pw = b[2].view.buf, *trans = b[5].view.buf;
    const uint32_t *seg = b[3].view.buf;
    const uint8_t *fl = b[4].view.buf;
    float *r_out = b[6].view.buf, *p_out = b[7].view.buf, *refl = b[8].view.buf;
    uint32_t *s_out = b[9].view.buf;
    uint8_t *f_out = b[10].view.buf;
    const float kf = (float)k, one = (float)1.0, rmin = (float)1e-3, floor_w = (float)1e-30;
    Py_ssize_t bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t j = 0; j < m; j++) {
        const int64_t i = idx[j];
        if (i < 0 || i >= n) {
            bad = j;
            break;
        }
        const float r = max_np(range[i], rmin);
        const float unit = (((kf * trans[j]) * one) * one) / (r * r);
        r_out[j] = range[i];
        p_out[j] = pw[i];
        refl[j] = pw[i] / max_np(unit, floor_w);
        s_out[j] = seg[i];
        f_out[j] = fl[i];
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 11);
    if (bad >= 0) return PyErr_Format(PyExc_IndexError, "select: idx[%zd] is not a pulse", bad);
    Py_RETURN_NONE;
}

/* coat(cos f4 (N), material i2 (N), table f4 (M, S + 1), M, S, power f4, refl f4, power_out f4, refl_out f4 (N))
 *   -> bool
 * clear_coat.coat_apply's products: f = table[max(material, 0), int32(clip(c, 0, 1) * S + 0.5)] with
 * c = cos (0 where NaN), all float32; power_out = power * f, refl_out = refl * f. False, nothing written
 * past it, where a material is past the table (NumPy's indexing raises there: the caller runs it). */
static PyObject *coat(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[7];
    Py_ssize_t m, steps;
    if (!PyArg_ParseTuple(args, "OOOnnOOOO", &o[0], &o[1], &o[2], &m, &steps, &o[3], &o[4], &o[5], &o[6]))
        return NULL;
    Buf b[7];
    memset(b, 0, sizeof b);
    Py_ssize_t n = buf_items(o[0], 4);
    if (n < 0 || m < 0 || steps < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "coat: negative sizes");
        return NULL;
    }
    if (buf_get(&b[0], o[0], 0, 'f', 4, n, "cos") || buf_get(&b[1], o[1], 0, 'h', 2, n, "material") ||
        buf_get(&b[2], o[2], 0, 'f', 4, m * (steps + 1), "table") || buf_get(&b[3], o[3], 0, 'f', 4, n, "power") ||
        buf_get(&b[4], o[4], 0, 'f', 4, n, "refl") || buf_get(&b[5], o[5], 1, 'f', 4, n, "power_out") ||
        buf_get(&b[6], o[6], 1, 'f', 4, n, "refl_out")) {
        buf_release(b, 7);
        return NULL;
    }
    const float *cs = b[0].view.buf, *table = b[2].view.buf, *pw = b[3].view.buf, *rf = b[4].view.buf;
    const int16_t *mat = b[1].view.buf;
    float *p_out = b[5].view.buf, *r_out = b[6].view.buf;
    const float sf = (float)steps, half = (float)0.5, zero = (float)0, one = (float)1;
    int ok = 1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        const Py_ssize_t row = mat[i] > 0 ? (Py_ssize_t)mat[i] : 0;
        if (row >= m) {
            ok = 0;
            break;
        }
        float c = isnan(cs[i]) ? zero : cs[i];
        c = clip_np(c, zero, one);
        const int32_t k = (int32_t)(c * sf + half);
        const float f = table[row * (steps + 1) + k];
        p_out[i] = pw[i] * f;
        r_out[i] = rf[i] * f;
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 7);
    return PyBool_FromLong(ok);
}

/* peak_scale(range f4, cos f4, power f4 (N each, power in place), k, min_cos)
 * power *= pulse_spread.peak_factor(preset, range, cos) (float32 throughout): c = clip(|cos|, min_cos, 1),
 * t = ((1 / (c c) - 1) (r r)) k + 1, f = 1 / sqrt(t), 0 where f is NaN. */
static PyObject *peak_scale(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[3];
    double k, min_cos;
    if (!PyArg_ParseTuple(args, "OOOdd", &o[0], &o[1], &o[2], &k, &min_cos)) return NULL;
    Buf b[3];
    memset(b, 0, sizeof b);
    Py_ssize_t n = buf_items(o[0], 4);
    if (n < 0) return NULL;
    if (buf_get(&b[0], o[0], 0, 'f', 4, n, "range") || buf_get(&b[1], o[1], 0, 'f', 4, n, "cos") ||
        buf_get(&b[2], o[2], 1, 'f', 4, n, "power")) {
        buf_release(b, 3);
        return NULL;
    }
    const float *range = b[0].view.buf, *cs = b[1].view.buf;
    float *pw = b[2].view.buf;
    const float kf = (float)k, lo = (float)min_cos, one = (float)1.0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        const float c = clip_np(fabsf(cs[i]), lo, one);
        const float r = range[i];
        float t = one / (c * c);
        t = t - one;
        t = t * (r * r);
        t = t * kf;
        t = t + one;
        float f = one / sqrtf(t);
        if (isnan(f)) f = (float)0.0;
        pw[i] = pw[i] * f;
    }
    Py_END_ALLOW_THREADS
    buf_release(b, 3);
    Py_RETURN_NONE;
}

/* powf_array(c f4, e f4, out f4 (N each)): the C library's powf, element by element (fused.py compares
 * it with NumPy's float32 power before echo_power is trusted with the lobes). */
static PyObject *powf_array(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[3];
    if (!PyArg_ParseTuple(args, "OOO", &o[0], &o[1], &o[2])) return NULL;
    Buf b[3];
    memset(b, 0, sizeof b);
    Py_ssize_t n = buf_items(o[0], 4);
    if (n < 0) return NULL;
    if (buf_get(&b[0], o[0], 0, 'f', 4, n, "c") || buf_get(&b[1], o[1], 0, 'f', 4, n, "e") ||
        buf_get(&b[2], o[2], 1, 'f', 4, n, "out")) {
        buf_release(b, 3);
        return NULL;
    }
    const float *c = b[0].view.buf, *e = b[1].view.buf;
    float *out = b[2].view.buf;
    for (Py_ssize_t i = 0; i < n; i++) out[i] = powf(c[i], e[i]);
    buf_release(b, 3);
    Py_RETURN_NONE;
}

/* lobe_rays(cos f4, material i2 (N each), gain f4, exponent f4, zero_below f4 (per material), idx i8 out,
 *           cos_out f4 out, exponent_out f4 out (N each)) -> count
 * The rays whose lobe power numpy_lobe_powers asks NumPy for: the material (clipped at 0) has the lobe
 * (gain > 0), and the power does not surely underflow (the clipped cosine is not in (0, zero_below)).
 * Written in ray order: the ray's index, its cosine clipped to [0, 1] as np.clip gives it, and its
 * material's exponent. A material past the tables raises. */
static PyObject *lobe_rays(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[8];
    if (!PyArg_ParseTuple(args, "OOOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7])) return NULL;
    Buf b[8];
    memset(b, 0, sizeof b);
    Py_ssize_t n = buf_items(o[0], 4), nm = buf_items(o[2], 4);
    if (n < 0 || nm < 0) return NULL;
    if (buf_get(&b[0], o[0], 0, 'f', 4, n, "cos") || buf_get(&b[1], o[1], 0, 'h', 2, n, "material") ||
        buf_get(&b[2], o[2], 0, 'f', 4, nm, "gain") || buf_get(&b[3], o[3], 0, 'f', 4, nm, "exponent") ||
        buf_get(&b[4], o[4], 0, 'f', 4, nm, "zero_below") || buf_get(&b[5], o[5], 1, 'q', 8, n, "idx") ||
        buf_get(&b[6], o[6], 1, 'f', 4, n, "cos_out") || buf_get(&b[7], o[7], 1, 'f', 4, n, "exponent_out")) {
        buf_release(b, 8);
        return NULL;
    }
    const float *cosi = b[0].view.buf, *gain = b[2].view.buf, *ex = b[3].view.buf, *zb = b[4].view.buf;
    const int16_t *mat = b[1].view.buf;
    int64_t *idx = b[5].view.buf;
    float *c_out = b[6].view.buf, *e_out = b[7].view.buf;
    Py_ssize_t k = 0, bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        const int m = mat[i] < 0 ? 0 : mat[i];
        if (m >= nm) {
            bad = i;
            break;
        }
        if (!(gain[m] > 0)) continue;
        const float c = clip_np(cosi[i], 0.0f, 1.0f);
        if (c > 0 && c < zb[m]) continue; /* surely +0; not -0, whose odd powers keep the sign */
        idx[k] = i;
        c_out[k] = c;
        e_out[k] = ex[m];
        k++;
    }
    Py_END_ALLOW_THREADS
    const int bad_material = bad >= 0 ? mat[bad] : 0;
    buf_release(b, 8);
    if (bad >= 0)
        return PyErr_Format(PyExc_IndexError, "lobe_rays: material %d of ray %zd is not in the tables", bad_material,
                            bad);
    return PyLong_FromSsize_t(k);
}

static PyMethodDef methods[] = {
    {"lobe_rays", lobe_rays, METH_VARARGS, "The rays whose lobe power NumPy is asked for (see the source)."},
    {"echo_power", echo_power, METH_VARARGS, "EchoModel.power of every ray in one pass (see the source)."},
    {"pack_points", pack_points, METH_VARARGS, "SensorPhysics.apply's structured points in one pass."},
    {"select", select_rows, METH_VARARGS, "The detections' rows and measured reflectivity (see the source)."},
    {"coat", coat, METH_VARARGS, "The clear coat's factor times power and reflectance (see the source)."},
    {"peak_scale", peak_scale, METH_VARARGS, "Power times the footprint's peak factor (see the source)."},
    {"powf_array", powf_array, METH_VARARGS, "The C library's powf, element by element."},
    {"detect", detect, METH_VARARGS, "The detected pulses within the range limits (see the source)."},
    {"range_noise", range_noise, METH_VARARGS, "The measured ranges with noise (see the source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fused", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fused(void) { return PyModule_Create(&module); }
