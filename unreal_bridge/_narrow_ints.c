/* Compiled twin of fast_decode._decode_narrow_ints: a msgpack array of narrow ints read in one pass.
 *
 * msgpack-c writes each int in its smallest form, so AirSim's segmentation ids (0..255 and -1) arrive
 * as positive fixints, 0xcc uint8 and negative fixints mixed: one or two bytes an element. NumPy needs
 * ~15 passes to find the element boundaries; this loop needs one. Built by setuptools as an optional
 * extension: where it is missing, fast_decode uses its NumPy version, which gives the same answers.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* narrow_ints(buf, p, n, out) -> (status, value)
 *   status 0: value is the offset just past the array; out[0:n] holds the elements.
 *   status 1: an element is not a fixint, 0xcc or 0xd0 (value: its index); out is partly written.
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
    const Py_ssize_t len = src.len;
    int16_t *o = (int16_t *)dst.buf;
    Py_ssize_t q = p, i = 0;
    int status = 0;
    Py_BEGIN_ALLOW_THREADS
    /* Walk bytes, not elements: a byte is a payload iff the one before was a type byte, so the only
     * state carried between iterations is one flag (stepping q by each element's width would chain
     * every load on the one before, ~3x slower). An element is written when its last byte is seen. */
    int pending = 0, unsigned_payload = 0, bad = 0;
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
    if (bad)
        status = 1;
    else if (i < n)
        status = 2;
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    return Py_BuildValue("(in)", status, status == 0 ? q : i);
}

static PyMethodDef methods[] = {
    {"narrow_ints", narrow_ints, METH_VARARGS, "Decode a msgpack array of 1- and 2-byte ints."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_narrow_ints", NULL, -1, methods};

PyMODINIT_FUNC PyInit__narrow_ints(void) { return PyModule_Create(&module); }
