/* A minimal FMI 2.0 co-simulation host without Python: loads an OSMP sensor FMU's library, feeds it one
 * SensorView (a file of its serialized bytes) and writes the SensorData it returns to a file.
 * usage: fmu_host LIB.so RESOURCES_DIR GUID sensorview.bin sensordata.bin */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef void *(*instantiate_t)(const char *, int, const char *, const char *, const void *, int, int);
typedef int (*set_int_t)(void *, const unsigned *, size_t, const int *);
typedef int (*get_int_t)(void *, const unsigned *, size_t, int *);
typedef int (*simple_t)(void *);
typedef int (*setup_t)(void *, int, double, double, int, double);
typedef int (*step_t)(void *, double, double, int);
typedef void (*free_t)(void *);

static void logger(void *env, const char *name, int status, const char *cat, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[%s %d %s] ", name, status, cat);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    (void)env;
}

int main(int argc, char **argv) {
    if (argc != 6) return 64;
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "%s\n", dlerror());
        return 65;
    }
    struct { void *logger, *alloc, *free, *step, *env; } cb = {(void *)logger, (void *)calloc, (void *)free, NULL, NULL};
    char uri[4200];
    snprintf(uri, sizeof uri, "file://%s", argv[2]);
    void *c = ((instantiate_t)dlsym(lib, "fmi2Instantiate"))("host", 1, argv[3], uri, &cb, 0, 0);
    if (!c) return 66;
    if (((setup_t)dlsym(lib, "fmi2SetupExperiment"))(c, 0, 0.0, 0.0, 0, 0.0)) return 67;
    if (((simple_t)dlsym(lib, "fmi2EnterInitializationMode"))(c)) return 67;
    if (((simple_t)dlsym(lib, "fmi2ExitInitializationMode"))(c)) return 67;
    FILE *f = fopen(argv[4], "rb");
    if (!f) return 68;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc(n);
    if (fread(buf, 1, n, f) != (size_t)n) return 68;
    fclose(f);
    uint64_t a = (uint64_t)(uintptr_t)buf;
    unsigned in_vr[3] = {0, 1, 2}, out_vr[3] = {3, 4, 5};
    int in[3] = {(int)(uint32_t)(a & 0xFFFFFFFFu), (int)(uint32_t)(a >> 32), (int)n}, out[3];
    if (((set_int_t)dlsym(lib, "fmi2SetInteger"))(c, in_vr, 3, in)) return 69;
    if (((step_t)dlsym(lib, "fmi2DoStep"))(c, 0.0, 0.05, 1)) return 70;
    if (((get_int_t)dlsym(lib, "fmi2GetInteger"))(c, out_vr, 3, out)) return 71;
    const char *data = (const char *)(uintptr_t)(((uint64_t)(uint32_t)out[1] << 32) | (uint32_t)out[0]);
    FILE *o = fopen(argv[5], "wb");
    fwrite(data, 1, (size_t)out[2], o);
    fclose(o);
    ((free_t)dlsym(lib, "fmi2FreeInstance"))(c);
    free(buf);
    return 0;
}
