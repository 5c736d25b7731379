/* Embree 4 packet queries (rtcIntersect1/4/8/16) on the libembree4 that the embreex wheel bundles.
 *
 * embreex binds only rtcIntersect1 (one ray at a time); its shared library still exports the packet
 * entry points. tools/bench/bench_casters.py compiles this file with the system C compiler (when there
 * is one) and loads it with ctypes, to measure what Embree's own packets give on lidar rays. The few
 * Embree declarations used are written out here (the wheel ships no headers); the packet layouts follow
 * embree4/rtcore_ray.h with RTC_MAX_INSTANCE_LEVEL_COUNT = 1, and each hit is padded, so a build with a
 * longer instance stack would still not write past it. Not part of the installed package.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef void *RTCDevice;
typedef void *RTCScene;
typedef void *RTCGeometry;

extern RTCDevice rtcNewDevice(const char *config);
extern RTCScene rtcNewScene(RTCDevice device);
extern void rtcSetSceneFlags(RTCScene scene, int flags);
extern void rtcSetSceneBuildQuality(RTCScene scene, int quality);
extern RTCGeometry rtcNewGeometry(RTCDevice device, int type);
extern void *rtcSetNewGeometryBuffer(RTCGeometry g, int type, unsigned slot, int format, size_t stride,
                                     size_t count);
extern void rtcCommitGeometry(RTCGeometry g);
extern unsigned rtcAttachGeometry(RTCScene scene, RTCGeometry g);
extern void rtcReleaseGeometry(RTCGeometry g);
extern void rtcCommitScene(RTCScene scene);
extern void rtcReleaseScene(RTCScene scene);
extern void rtcIntersect1(RTCScene scene, void *rayhit, void *args);
extern void rtcIntersect4(const int *valid, RTCScene scene, void *rayhit, void *args);
extern void rtcIntersect8(const int *valid, RTCScene scene, void *rayhit, void *args);
extern void rtcIntersect16(const int *valid, RTCScene scene, void *rayhit, void *args);

#define PAD 64 /* spare words after each hit */

/* One scene of one triangle mesh; flags 4 = RTC_SCENE_FLAG_ROBUST. */
RTCScene pk_scene(const float *v, size_t nv, const unsigned *f, size_t nf, int flags, int quality) {
    static RTCDevice device = NULL;
    if (device == NULL) device = rtcNewDevice(NULL);
    RTCScene scene = rtcNewScene(device);
    rtcSetSceneFlags(scene, flags);
    rtcSetSceneBuildQuality(scene, quality);
    RTCGeometry g = rtcNewGeometry(device, 0 /* TRIANGLE */);
    float *vb = rtcSetNewGeometryBuffer(g, 1 /* VERTEX */, 0, 0x9003 /* FLOAT3 */, 12, nv);
    unsigned *ib = rtcSetNewGeometryBuffer(g, 0 /* INDEX */, 0, 0x5003 /* UINT3 */, 12, nf);
    memcpy(vb, v, nv * 12);
    memcpy(ib, f, nf * 12);
    rtcCommitGeometry(g);
    rtcAttachGeometry(scene, g);
    rtcReleaseGeometry(g);
    rtcCommitScene(scene);
    return scene;
}

void pk_release(RTCScene scene) { rtcReleaseScene(scene); }

/* Cast rays [0, n) in packets of W (1, 4, 8 or 16) consecutive rays: distance (inf = miss), face (-1). */
int pk_cast(RTCScene scene, int W, const float *o, const float *d, float tfar, size_t n, float *dist,
            int *face) {
    if (W != 1 && W != 4 && W != 8 && W != 16) return -1;
    /* ray (12 W words) + hit (8 W words) + padding, 64-byte aligned */
    size_t words = 20 * (size_t)W + PAD * (size_t)W;
    float *buf = aligned_alloc(64, words * 4);
    int valid[16] __attribute__((aligned(64)));
    if (buf == NULL) return -2;
    for (size_t s = 0; s < n; s += W) {
        size_t m = n - s < (size_t)W ? n - s : (size_t)W;
        memset(buf, 0, 20 * (size_t)W * 4);
        unsigned *u = (unsigned *)buf;
        for (size_t i = 0; i < (size_t)W; i++) {
            size_t k = s + (i < m ? i : 0);
            buf[0 * W + i] = o[3 * k];
            buf[1 * W + i] = o[3 * k + 1];
            buf[2 * W + i] = o[3 * k + 2];
            buf[4 * W + i] = d[3 * k];
            buf[5 * W + i] = d[3 * k + 1];
            buf[6 * W + i] = d[3 * k + 2];
            buf[8 * W + i] = tfar;
            u[9 * W + i] = 0xffffffffu;       /* mask */
            u[(12 + 6) * W + i] = 0xffffffffu; /* hit.geomID = invalid */
            valid[i] = i < m ? -1 : 0;
        }
        if (W == 1) rtcIntersect1(scene, buf, NULL);
        else if (W == 4) rtcIntersect4(valid, scene, buf, NULL);
        else if (W == 8) rtcIntersect8(valid, scene, buf, NULL);
        else rtcIntersect16(valid, scene, buf, NULL);
        for (size_t i = 0; i < m; i++) {
            int hit = u[(12 + 6) * W + i] != 0xffffffffu;
            dist[s + i] = hit ? buf[8 * W + i] : INFINITY;
            face[s + i] = hit ? (int)u[(12 + 5) * W + i] : -1;
        }
    }
    free(buf);
    return 0;
}
