/* Helpers shared by the compiled twins of NumPy steps (rt_lidar/physics/_fused.c,
 * rt_lidar/pipeline/_source_steps.c, unreal_bridge/world/_cast_steps.c): taking NumPy arrays as
 * checked buffers, and NumPy's own rules for the float functions whose ties and NaNs C leaves open.
 * Header-only (static functions); each extension includes it with include-dirs = ["unreal_bridge"].
 */
#ifndef RT_LIDAR_NP_TWINS_H
#define RT_LIDAR_NP_TWINS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* A buffer taken from an argument, released by buf_release once held. */
typedef struct {
    Py_buffer view;
    int held;
} Buf;

/* Take `obj` as a C-contiguous buffer of `count` items of the one struct character `format` (native
 * byte order; 'q' and 'l' both stand for int64 here), writable when asked; raises ValueError naming
 * `name` otherwise. Returns 0, or -1 with the exception set (b->held says whether to release it). */
static int buf_get(Buf *b, PyObject *obj, int writable, char format, Py_ssize_t itemsize, Py_ssize_t count,
                   const char *name) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &b->view, flags) != 0) return -1;
    b->held = 1;
    const char *f = b->view.format;
    if (f[0] == '<' || f[0] == '=' || f[0] == '@') f++;
    char c = f[0];
    if (format == 'q' && c == 'l' && itemsize == 8) c = 'q';
    int same = c != '\0' && f[1] == '\0' && c == format;
    if (!same || b->view.itemsize != itemsize || b->view.len != itemsize * count) {
        PyErr_Format(PyExc_ValueError, "%s must be %zd contiguous items of format '%c' (got '%s', %zd bytes)",
                     name, count, format, b->view.format, b->view.len);
        return -1;
    }
    return 0;
}

/* Release every held buffer of bufs[0..n). */
static void buf_release(Buf *bufs, int n) {
    for (int i = 0; i < n; i++)
        if (bufs[i].held) {
            PyBuffer_Release(&bufs[i].view);
            bufs[i].held = 0;
        }
}

/* The number of `itemsize`-byte items in `obj`'s buffer (-1 with the exception set). */
static Py_ssize_t buf_items(PyObject *obj, Py_ssize_t itemsize) {
    Py_buffer v;
    if (PyObject_GetBuffer(obj, &v, PyBUF_C_CONTIGUOUS) != 0) return -1;
    Py_ssize_t n = v.len / itemsize;
    PyBuffer_Release(&v);
    return n;
}

/* np.maximum / np.minimum: a NaN in either gives NaN (the first's when both); a tie gives the second
 * operand (np.maximum(-0.0, 0.0) is 0.0, np.maximum(0.0, -0.0) is -0.0). */
static inline float max_np(float a, float b) { return isnan(a) ? a : (isnan(b) ? b : (a > b ? a : b)); }
static inline double max_np64(double a, double b) { return isnan(a) ? a : (isnan(b) ? b : (a > b ? a : b)); }

/* np.clip(x, lo, hi): a NaN x kept, and x itself on a tie (np.clip(-0.0, 0.0, 1.0) is -0.0). */
static inline float clip_np(float x, float lo, float hi) {
    if (isnan(x)) return x;
    x = x < lo ? lo : x;
    return x > hi ? hi : x;
}

/* np.fmin / np.fmax: a NaN operand gives the other one. (Their ties are left open: the box test that
 * uses them only compares the results, where -0.0 and 0.0 are equal.) */
static inline float fmin_np(float a, float b) { return isnan(a) ? b : (isnan(b) ? a : (b < a ? b : a)); }
static inline float fmax_np(float a, float b) { return isnan(a) ? b : (isnan(b) ? a : (b > a ? b : a)); }

#endif
