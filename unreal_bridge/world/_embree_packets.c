/* Embree 4 packet queries (rtcIntersect8) on the libembree4 that the embreex wheel bundles.
 *
 * embreex binds only rtcIntersect1, one ray at a time. Its shared library also exports Embree's packet
 * entry points: cast eight consecutive lidar rays (consecutive rings of one firing column, already
 * coherent) in one rtcIntersect8 and a frame costs 7-13 % less CPU, with bit for bit the same hit
 * distances and faces in the robust mode both use (tools/bench/bench_casters.py). The library is opened
 * by path at run time (dlopen; its file name carries a build hash) and the few entry points are looked
 * up by name, so nothing links against it; the wheel ships no headers, so the declarations used are
 * written out here, the packet layout as embree4/rtcore_ray.h has it (RTC_MAX_INSTANCE_LEVEL_COUNT = 1,
 * and spare words after each hit, so a build with a longer instance stack would still not write past
 * it). Built by setuptools as an optional extension: where it is missing, EmbreeCaster uses embreex.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef void *RTCDevice;
typedef void *RTCScene;
typedef void *RTCGeometry;

static RTCDevice (*rtcNewDevice)(const char *config);
static RTCScene (*rtcNewScene)(RTCDevice device);
static void (*rtcSetSceneFlags)(RTCScene scene, int flags);
static void (*rtcSetSceneBuildQuality)(RTCScene scene, int quality);
static RTCGeometry (*rtcNewGeometry)(RTCDevice device, int type);
static void *(*rtcSetNewGeometryBuffer)(RTCGeometry g, int type, unsigned slot, int format, size_t stride,
                                        size_t count);
static void (*rtcCommitGeometry)(RTCGeometry g);
static unsigned (*rtcAttachGeometry)(RTCScene scene, RTCGeometry g);
static void (*rtcReleaseGeometry)(RTCGeometry g);
static void (*rtcCommitScene)(RTCScene scene);
static void (*rtcReleaseScene)(RTCScene scene);
static int (*rtcGetDeviceError)(RTCDevice device);
static void (*rtcIntersect1)(RTCScene scene, void *rayhit, void *args);
static void (*rtcIntersect4)(const int *valid, RTCScene scene, void *rayhit, void *args);
static void (*rtcIntersect8)(const int *valid, RTCScene scene, void *rayhit, void *args);
static void (*rtcIntersect16)(const int *valid, RTCScene scene, void *rayhit, void *args);

static RTCDevice device = NULL;

#define MAX_W 16
#define PAD 64                       /* spare words after each hit, per lane */
#define WORDS ((20 + PAD) * MAX_W)   /* ray (12 W words) + hit (8 W words) + padding */
#define INVALID_ID 0xffffffffu
#define SCENE_FLAG_ROBUST 4        /* what embreex's EmbreeScene() sets */
#define BUILD_QUALITY_MEDIUM 1     /* Embree's default */
#define BUILD_QUALITY_HIGH 2       /* SAH with spatial splits: the same hits, cheaper traversal */
#define CAPSULE "rt_lidar.embree_packets.scene"

/* open_library(path, config=None): look the entry points up in path and make the one device, with
 * Embree's device config string when given (e.g. "isa=avx2": the benchmark's check of how the hits
 * depend on the instruction set; only in a process of its own, as the device is made once). */
static PyObject *open_library(PyObject *self, PyObject *args) {
    const char *path, *config = NULL;
    if (!PyArg_ParseTuple(args, "s|z", &path, &config)) return NULL;
    if (device != NULL && config != NULL)
        return PyErr_Format(PyExc_RuntimeError, "the Embree device is made already; config %s comes too late",
                            config);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) return PyErr_Format(PyExc_OSError, "cannot open %s: %s", path, dlerror());
#define LOOKUP(name)                                                                                   \
    *(void **)(&name) = dlsym(lib, #name);                                                             \
    if (name == NULL) return PyErr_Format(PyExc_OSError, "%s has no %s", path, #name);
    LOOKUP(rtcNewDevice)
    LOOKUP(rtcNewScene)
    LOOKUP(rtcSetSceneFlags)
    LOOKUP(rtcSetSceneBuildQuality)
    LOOKUP(rtcNewGeometry)
    LOOKUP(rtcSetNewGeometryBuffer)
    LOOKUP(rtcCommitGeometry)
    LOOKUP(rtcAttachGeometry)
    LOOKUP(rtcReleaseGeometry)
    LOOKUP(rtcCommitScene)
    LOOKUP(rtcReleaseScene)
    LOOKUP(rtcGetDeviceError)
    LOOKUP(rtcIntersect1)
    LOOKUP(rtcIntersect4)
    LOOKUP(rtcIntersect8)
    LOOKUP(rtcIntersect16)
#undef LOOKUP
    if (device == NULL) device = rtcNewDevice(config);
    if (device == NULL)
        return PyErr_Format(PyExc_OSError, "%s: rtcNewDevice(%s) failed", path, config ? config : "NULL");
    Py_RETURN_NONE;
}

/* A C-contiguous buffer of ``count`` items of ``itemsize`` bytes (``format`` its struct code). */
static int get_buffer(PyObject *obj, Py_buffer *view, int writable, const char *format, Py_ssize_t itemsize,
                      Py_ssize_t count, const char *what) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) != 0) return -1;
    const char *fmt = view->format;
    if (fmt[0] == '<' || fmt[0] == '=' || fmt[0] == '@') fmt++; /* little-endian: x86-64 and arm64 */
    if (view->itemsize != itemsize || strcmp(fmt, format) != 0 || view->len != itemsize * count) {
        PyErr_Format(PyExc_ValueError, "%s: need %zd contiguous items of type '%s'", what, count, format);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static void release_scene(PyObject *capsule) {
    RTCScene scene = PyCapsule_GetPointer(capsule, CAPSULE);
    if (scene != NULL) rtcReleaseScene(scene);
}

/* new_scene(vertices float32 (V, 3), nv, faces uint32 (F, 3), nf, robust=True, high_quality=False) -> the
 * committed scene: robust (Embree's watertight mode, what embreex builds) unless robust is False; its BVH
 * built at Embree's high quality (spatial splits) when high_quality is True, else at its medium default. */
static PyObject *new_scene(PyObject *self, PyObject *args) {
    PyObject *vobj, *fobj;
    Py_ssize_t nv, nf;
    int robust = 1, high_quality = 0;
    if (!PyArg_ParseTuple(args, "OnOn|pp", &vobj, &nv, &fobj, &nf, &robust, &high_quality)) return NULL;
    if (device == NULL) return PyErr_Format(PyExc_RuntimeError, "open_library() first");
    Py_buffer v, f;
    if (get_buffer(vobj, &v, 0, "f", 4, 3 * nv, "vertices") != 0) return NULL;
    if (get_buffer(fobj, &f, 0, "I", 4, 3 * nf, "faces") != 0) {
        PyBuffer_Release(&v);
        return NULL;
    }
    RTCScene scene = rtcNewScene(device);
    RTCGeometry g = scene ? rtcNewGeometry(device, 0 /* TRIANGLE */) : NULL;
    float *vb = g ? rtcSetNewGeometryBuffer(g, 1 /* VERTEX */, 0, 0x9003 /* FLOAT3 */, 12, (size_t)nv) : NULL;
    unsigned *ib = g ? rtcSetNewGeometryBuffer(g, 0 /* INDEX */, 0, 0x5003 /* UINT3 */, 12, (size_t)nf) : NULL;
    if (vb == NULL || ib == NULL) {
        if (g) rtcReleaseGeometry(g);
        if (scene) rtcReleaseScene(scene);
        PyBuffer_Release(&v);
        PyBuffer_Release(&f);
        return PyErr_Format(PyExc_MemoryError, "Embree could not make a scene of %zd triangles", nf);
    }
    memcpy(vb, v.buf, (size_t)nv * 12);
    memcpy(ib, f.buf, (size_t)nf * 12);
    PyBuffer_Release(&v);
    PyBuffer_Release(&f);
    rtcSetSceneFlags(scene, robust ? SCENE_FLAG_ROBUST : 0);
    rtcSetSceneBuildQuality(scene, high_quality ? BUILD_QUALITY_HIGH : BUILD_QUALITY_MEDIUM);
    Py_BEGIN_ALLOW_THREADS
    rtcCommitGeometry(g);
    rtcAttachGeometry(scene, g);
    rtcReleaseGeometry(g);
    rtcCommitScene(scene);
    Py_END_ALLOW_THREADS
    int error = rtcGetDeviceError(device);
    if (error != 0) {
        rtcReleaseScene(scene);
        return PyErr_Format(PyExc_RuntimeError, "Embree could not build the scene (error %d)", error);
    }
    PyObject *capsule = PyCapsule_New(scene, CAPSULE, release_scene);
    if (capsule == NULL) rtcReleaseScene(scene);
    return capsule;
}

static inline __attribute__((always_inline)) void intersect_packet(RTCScene scene, size_t W, const int *valid,
                                                                     float *buf) {
    if (W == 8) rtcIntersect8(valid, scene, buf, NULL);
    else if (W == 4) rtcIntersect4(valid, scene, buf, NULL);
    else if (W == 16) rtcIntersect16(valid, scene, buf, NULL);
    else rtcIntersect1(scene, buf, NULL);
}

/* The ray k's fields into lane i of the packet buffer, and its result out of lane i. */
static inline __attribute__((always_inline)) void load_lane(size_t W, size_t i, size_t k, const float *o,
                                                              const float *d, const float *distance,
                                                              float *buf) {
    unsigned *u = (unsigned *)buf;
    buf[0 * W + i] = o[3 * k];
    buf[1 * W + i] = o[3 * k + 1];
    buf[2 * W + i] = o[3 * k + 2];
    buf[4 * W + i] = d[3 * k];
    buf[5 * W + i] = d[3 * k + 1];
    buf[6 * W + i] = d[3 * k + 2];
    buf[8 * W + i] = distance[k];
    u[9 * W + i] = INVALID_ID;        /* mask: every geometry */
    u[(12 + 6) * W + i] = INVALID_ID; /* hit.geomID: none yet */
    u[(12 + 7) * W + i] = INVALID_ID; /* hit.instID[0]: no instance */
}

static inline __attribute__((always_inline)) void store_lane(size_t W, size_t i, size_t k, const float *buf,
                                                               float *distance, int32_t *face) {
    const unsigned *u = (const unsigned *)buf;
    int hit = u[(12 + 6) * W + i] != INVALID_ID;
    distance[k] = hit ? buf[8 * W + i] : INFINITY;
    face[k] = hit ? (int32_t)u[(12 + 5) * W + i] : -1;
}

/* The rays [0, n) in packets of W (1, 4, 8 or 16) consecutive rays: distance in: each ray's far limit,
 * out: its hit distance or inf; face out: the face hit or -1. Inlined once per width, so that the
 * lanes' loads and stores are unrolled with their offsets known; whole packets take no per-lane
 * tests, the last (partial) one repeats its first ray in the lanes it leaves invalid. */
static inline __attribute__((always_inline)) void cast_w(RTCScene scene, const size_t W, const float *o,
                                                           const float *d, float *distance, int32_t *face,
                                                           size_t n, float *buf) {
    int valid[MAX_W] __attribute__((aligned(64)));
    /* Zeroed once: tnear, time, id and flags stay 0 (Embree reads the ray's fields and writes only its
     * tfar and the hit's, and every field read below is written for each packet). */
    memset(buf, 0, 20 * W * sizeof(float));
    for (size_t i = 0; i < W; i++) valid[i] = -1;
    size_t s = 0;
    for (; s + W <= n; s += W) {
        /* Embree's traversal between packets evicts the rays' lines and breaks the hardware's stream
         * prefetch: ask for the rays four packets ahead (a hint; the last packets ask for none). */
        const size_t ahead = s + 4 * W;
        if (ahead + W <= n) {
            __builtin_prefetch(o + 3 * ahead);
            __builtin_prefetch(o + 3 * ahead + 16);
            __builtin_prefetch(d + 3 * ahead);
            __builtin_prefetch(d + 3 * ahead + 16);
            __builtin_prefetch(distance + ahead);
        }
        for (size_t i = 0; i < W; i++) load_lane(W, i, s + i, o, d, distance, buf);
        intersect_packet(scene, W, valid, buf);
        for (size_t i = 0; i < W; i++) store_lane(W, i, s + i, buf, distance, face);
    }
    if (s < n) {
        size_t m = n - s;
        for (size_t i = 0; i < W; i++) {
            load_lane(W, i, s + (i < m ? i : 0), o, d, distance, buf);
            valid[i] = i < m ? -1 : 0;
        }
        intersect_packet(scene, W, valid, buf);
        for (size_t i = 0; i < m; i++) store_lane(W, i, s + i, buf, distance, face);
    }
}

static void cast(RTCScene scene, size_t W, const float *o, const float *d, float *distance, int32_t *face,
                 size_t n, float *buf) {
    if (W == 8) cast_w(scene, 8, o, d, distance, face, n, buf);
    else if (W == 4) cast_w(scene, 4, o, d, distance, face, n, buf);
    else if (W == 16) cast_w(scene, 16, o, d, distance, face, n, buf);
    else cast_w(scene, 1, o, d, distance, face, n, buf);
}

/* intersect(scene, origins float32 (N, 3), directions float32 (N, 3), distance float32 (N,), face
 * int32 (N,), width=8): see cast(); the GIL is let go meanwhile. */
static PyObject *intersect(PyObject *self, PyObject *args) {
    PyObject *capsule, *oobj, *dobj, *distobj, *faceobj;
    int width = 8;
    if (!PyArg_ParseTuple(args, "OOOOO|i", &capsule, &oobj, &dobj, &distobj, &faceobj, &width)) return NULL;
    if (width != 1 && width != 4 && width != 8 && width != 16)
        return PyErr_Format(PyExc_ValueError, "width must be 1, 4, 8 or 16, not %d", width);
    RTCScene scene = PyCapsule_GetPointer(capsule, CAPSULE);
    if (scene == NULL) return NULL;
    Py_buffer dist, fc, o, d;
    if (PyObject_GetBuffer(distobj, &dist, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) != 0) return NULL;
    Py_ssize_t n = dist.len / 4;
    PyBuffer_Release(&dist);
    if (get_buffer(distobj, &dist, 1, "f", 4, n, "distance") != 0) return NULL;
    if (get_buffer(faceobj, &fc, 1, "i", 4, n, "face") != 0) goto fail_face;
    if (get_buffer(oobj, &o, 0, "f", 4, 3 * n, "origins") != 0) goto fail_o;
    if (get_buffer(dobj, &d, 0, "f", 4, 3 * n, "directions") != 0) goto fail_d;
    float *buf = aligned_alloc(64, WORDS * sizeof(float));
    if (buf == NULL) {
        PyErr_NoMemory();
        goto fail_buf;
    }
    Py_BEGIN_ALLOW_THREADS
    cast(scene, (size_t)width, o.buf, d.buf, dist.buf, fc.buf, (size_t)n, buf);
    Py_END_ALLOW_THREADS
    free(buf);
    PyBuffer_Release(&d);
    PyBuffer_Release(&o);
    PyBuffer_Release(&fc);
    PyBuffer_Release(&dist);
    int error = rtcGetDeviceError(device);
    if (error != 0) return PyErr_Format(PyExc_RuntimeError, "Embree failed to cast (error %d)", error);
    Py_RETURN_NONE;
fail_buf:
    PyBuffer_Release(&d);
fail_d:
    PyBuffer_Release(&o);
fail_o:
    PyBuffer_Release(&fc);
fail_face:
    PyBuffer_Release(&dist);
    return NULL;
}

static PyMethodDef methods[] = {
    {"open_library", open_library, METH_VARARGS, "open_library(path, config=None): look Embree's entry points up in path and make the device (with Embree's config string, if given)."},
    {"new_scene", new_scene, METH_VARARGS, "new_scene(vertices, n_vertices, faces, n_faces, robust=True, high_quality=False) -> scene"},
    {"intersect", intersect, METH_VARARGS, "intersect(scene, origins, directions, distance, face, width=8)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_embree_packets", NULL, -1, methods};

PyMODINIT_FUNC PyInit__embree_packets(void) { return PyModule_Create(&module); }
