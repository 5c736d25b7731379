/* rt-lidar's OSMP sensor FMU: the FMI 2.0 co-simulation C API over the Python sensor model
 * (rt_lidar.osi.fmu_runtime), through the CPython C API.
 *
 * OSMP passes protobuf buffers as integer triples: <name>.base.lo / .base.hi (the two 32-bit halves of a
 * pointer) and <name>.size. Value references (Integer): 0-2 OSMPSensorViewIn, 3-5 OSMPSensorDataOut,
 * 6-8 OSMPSensorViewInConfigRequest, 9-11 OSMPSensorViewInConfig, 12 the random seed.
 *
 * Python: the CPython functions are looked up at run time (dlsym), so the library loads both into a
 * Python process (fmpy: the interpreter is running, its symbols are there, and every call takes the
 * GIL with PyGILState_Ensure) and into any other host, where the libpython named at build time
 * (RT_LIDAR_LIBPYTHON) is opened and an interpreter started once (never finalized: CPython cannot be
 * started twice in one process). The paths in resources/python_path.txt are appended to sys.path.
 * The SensorData buffer returned by a step stays valid until the next step or fmi2FreeInstance.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#ifndef RT_LIDAR_LIBPYTHON
#define RT_LIDAR_LIBPYTHON "libpython3.so"
#endif
#define EXPORT __attribute__((visibility("default")))

/* ---- FMI 2.0 types (as the standard defines them) ---- */
typedef void *fmi2Component;
typedef void *fmi2ComponentEnvironment;
typedef void *fmi2FMUstate;
typedef unsigned int fmi2ValueReference;
typedef double fmi2Real;
typedef int fmi2Integer;
typedef int fmi2Boolean;
typedef char fmi2Char;
typedef const fmi2Char *fmi2String;
typedef char fmi2Byte;
typedef enum { fmi2OK, fmi2Warning, fmi2Discard, fmi2Error, fmi2Fatal, fmi2Pending } fmi2Status;
typedef enum { fmi2ModelExchange, fmi2CoSimulation } fmi2Type;
typedef enum { fmi2DoStepStatus, fmi2PendingStatus, fmi2LastSuccessfulTime, fmi2Terminated } fmi2StatusKind;
typedef void (*fmi2CallbackLogger)(fmi2ComponentEnvironment, fmi2String, fmi2Status, fmi2String, fmi2String, ...);
typedef struct {
    fmi2CallbackLogger logger;
    void *(*allocateMemory)(size_t, size_t);
    void (*freeMemory)(void *);
    void (*stepFinished)(fmi2ComponentEnvironment, fmi2Status);
    fmi2ComponentEnvironment componentEnvironment;
} fmi2CallbackFunctions;

/* ---- the CPython functions used, found at run time ---- */
typedef struct _object PyObject;
static int (*p_Py_IsInitialized)(void);
static void (*p_Py_InitializeEx)(int);
static void *(*p_PyEval_SaveThread)(void);
static int (*p_PyGILState_Ensure)(void);
static void (*p_PyGILState_Release)(int);
static PyObject *(*p_PyImport_ImportModule)(const char *);
static PyObject *(*p_PyObject_CallMethod)(PyObject *, const char *, const char *, ...);
static PyObject *(*p_PyBytes_FromStringAndSize)(const char *, ssize_t);
static int (*p_PyBytes_AsStringAndSize)(PyObject *, char **, ssize_t *);
static void (*p_Py_DecRef)(PyObject *);
static void (*p_PyErr_Fetch)(PyObject **, PyObject **, PyObject **);
static PyObject *(*p_PyObject_Str)(PyObject *);
static const char *(*p_PyUnicode_AsUTF8)(PyObject *);
static PyObject *(*p_PySys_GetObject)(const char *);
static PyObject *(*p_Py_BuildValue)(const char *, ...);

static int python_ready = 0;

static void *find(void *lib, const char *name) {
    void *f = dlsym(RTLD_DEFAULT, name);
    if (!f && lib) f = dlsym(lib, name);
    return f;
}

/* Look up the CPython API (opening libpython when no interpreter is in this process); 0 on success. */
static int load_python(char *why, size_t n) {
    if (python_ready) return 0;
    void *lib = NULL;
    if (!dlsym(RTLD_DEFAULT, "Py_IsInitialized")) {
        lib = dlopen(RT_LIDAR_LIBPYTHON, RTLD_NOW | RTLD_GLOBAL);
        if (!lib) {
            snprintf(why, n, "cannot open %s: %s", RT_LIDAR_LIBPYTHON, dlerror());
            return -1;
        }
    }
#define LOAD(sym)                                                         \
    do {                                                                  \
        *(void **)(&p_##sym) = find(lib, #sym);                           \
        if (!p_##sym) {                                                   \
            snprintf(why, n, "CPython function %s not found", #sym);      \
            return -1;                                                    \
        }                                                                 \
    } while (0)
    LOAD(Py_IsInitialized);
    LOAD(Py_InitializeEx);
    LOAD(PyEval_SaveThread);
    LOAD(PyGILState_Ensure);
    LOAD(PyGILState_Release);
    LOAD(PyImport_ImportModule);
    LOAD(PyObject_CallMethod);
    LOAD(PyBytes_FromStringAndSize);
    LOAD(PyBytes_AsStringAndSize);
    LOAD(Py_DecRef);
    LOAD(PyErr_Fetch);
    LOAD(PyObject_Str);
    LOAD(PyUnicode_AsUTF8);
    LOAD(PySys_GetObject);
    LOAD(Py_BuildValue);
#undef LOAD
    if (!p_Py_IsInitialized()) {
        p_Py_InitializeEx(0);
        p_PyEval_SaveThread(); /* let go of the GIL: every call below takes it with PyGILState_Ensure */
    }
    python_ready = 1;
    return 0;
}

/* ---- one instance ---- */
enum { VR_SV_LO, VR_SV_HI, VR_SV_SIZE, VR_SD_LO, VR_SD_HI, VR_SD_SIZE, VR_REQ_LO, VR_REQ_HI, VR_REQ_SIZE,
       VR_CFG_LO, VR_CFG_HI, VR_CFG_SIZE, VR_SEED, VR_COUNT };

typedef struct {
    fmi2CallbackFunctions cb;
    char *name;
    PyObject *model;
    PyObject *out;     /* the SensorData bytes of the last step (kept alive: OSMP hands out its pointer) */
    PyObject *request; /* the SensorViewConfiguration request */
    fmi2Integer ints[VR_COUNT];
    int logging;
} Instance;

static void say(Instance *inst, fmi2Status status, const char *category, const char *fmt, ...) {
    char text[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (inst && inst->cb.logger)
        inst->cb.logger(inst->cb.componentEnvironment, inst->name, status, category, "%s", text);
    else
        fprintf(stderr, "rt-lidar FMU: %s\n", text);
}

/* Log the pending Python exception as an error. Call with the GIL held. */
static void python_error(Instance *inst, const char *during) {
    PyObject *type = NULL, *value = NULL, *tb = NULL;
    p_PyErr_Fetch(&type, &value, &tb);
    const char *text = "unknown error";
    PyObject *s = value ? p_PyObject_Str(value) : NULL;
    if (s) text = p_PyUnicode_AsUTF8(s);
    say(inst, fmi2Error, "logError", "%s: %s", during, text ? text : "unknown error");
    if (s) p_Py_DecRef(s);
    if (type) p_Py_DecRef(type);
    if (value) p_Py_DecRef(value);
    if (tb) p_Py_DecRef(tb);
}

static void set_pointer(Instance *inst, int lo, const char *data, ssize_t size) {
    uint64_t addr = (uint64_t)(uintptr_t)data;
    inst->ints[lo] = (fmi2Integer)(uint32_t)(addr & 0xFFFFFFFFu);
    inst->ints[lo + 1] = (fmi2Integer)(uint32_t)(addr >> 32);
    inst->ints[lo + 2] = (fmi2Integer)size;
}

static const char *get_pointer(Instance *inst, int lo) {
    uint64_t addr = ((uint64_t)(uint32_t)inst->ints[lo + 1] << 32) | (uint32_t)inst->ints[lo];
    return (const char *)(uintptr_t)addr;
}

/* model.<method>(bytes of the buffer at <lo>) -> bytes kept in *keep; 0 on success. GIL held. */
static int call_with_buffer(Instance *inst, const char *method, int lo, PyObject **keep, int out_lo,
                            double t, double h) {
    const char *data = get_pointer(inst, lo);
    ssize_t size = inst->ints[lo + 2];
    PyObject *arg = p_PyBytes_FromStringAndSize(data && size > 0 ? data : "", data && size > 0 ? size : 0);
    if (!arg) {
        python_error(inst, method);
        return -1;
    }
    PyObject *res = keep ? p_PyObject_CallMethod(inst->model, method, "Odd", arg, t, h)
                         : p_PyObject_CallMethod(inst->model, method, "O", arg);
    p_Py_DecRef(arg);
    if (!res) {
        python_error(inst, method);
        return -1;
    }
    if (!keep) {
        p_Py_DecRef(res);
        return 0;
    }
    char *buf = NULL;
    ssize_t len = 0;
    if (p_PyBytes_AsStringAndSize(res, &buf, &len) != 0) {
        p_Py_DecRef(res);
        python_error(inst, method);
        return -1;
    }
    if (*keep) p_Py_DecRef(*keep);
    *keep = res;
    set_pointer(inst, out_lo, buf, len);
    return 0;
}

/* Decode a file: URI to a path (percent escapes, an optional "localhost" authority). */
static void uri_to_path(const char *uri, char *path, size_t n) {
    const char *p = uri ? uri : "";
    if (strncmp(p, "file://localhost/", 17) == 0) p += 16;
    else if (strncmp(p, "file:///", 8) == 0) p += 7;
    else if (strncmp(p, "file:/", 6) == 0) p += 5;
    size_t k = 0;
    for (; *p && k + 1 < n; p++) {
        if (p[0] == '%' && p[1] && p[2]) {
            char hex[3] = {p[1], p[2], 0};
            path[k++] = (char)strtol(hex, NULL, 16);
            p += 2;
        } else {
            path[k++] = *p;
        }
    }
    path[k] = 0;
    while (k > 1 && path[k - 1] == '/') path[--k] = 0;
}

/* Append each line of <resources>/python_path.txt to sys.path. GIL held. */
static int add_paths(Instance *inst, const char *resources) {
    char file[4096];
    snprintf(file, sizeof file, "%s/python_path.txt", resources);
    FILE *f = fopen(file, "r");
    if (!f) return 0;
    PyObject *path = p_PySys_GetObject("path"); /* borrowed */
    char line[4096];
    while (path && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        if (!line[0]) continue;
        PyObject *r = p_PyObject_CallMethod(path, "append", "s", line);
        if (!r) {
            fclose(f);
            python_error(inst, "sys.path");
            return -1;
        }
        p_Py_DecRef(r);
    }
    fclose(f);
    return 0;
}

EXPORT const char *fmi2GetTypesPlatform(void) { return "default"; }
EXPORT const char *fmi2GetVersion(void) { return "2.0"; }

EXPORT fmi2Component fmi2Instantiate(fmi2String instanceName, fmi2Type fmuType, fmi2String fmuGUID,
                                     fmi2String fmuResourceLocation, const fmi2CallbackFunctions *functions,
                                     fmi2Boolean visible, fmi2Boolean loggingOn) {
    (void)fmuGUID;
    (void)visible;
    Instance *inst = calloc(1, sizeof(Instance));
    if (!inst) return NULL;
    if (functions) inst->cb = *functions;
    inst->name = strdup(instanceName ? instanceName : "rt-lidar");
    inst->logging = loggingOn;
    if (fmuType != fmi2CoSimulation) {
        say(inst, fmi2Error, "logError", "this FMU is for co-simulation only");
        free(inst->name);
        free(inst);
        return NULL;
    }
    char why[1024];
    if (load_python(why, sizeof why) != 0) {
        say(inst, fmi2Error, "logError", "%s", why);
        free(inst->name);
        free(inst);
        return NULL;
    }
    char resources[4096];
    uri_to_path(fmuResourceLocation, resources, sizeof resources);
    int gil = p_PyGILState_Ensure();
    PyObject *mod = NULL;
    if (add_paths(inst, resources) == 0) {
        mod = p_PyImport_ImportModule("rt_lidar.osi.fmu_runtime");
        if (!mod) python_error(inst, "import rt_lidar.osi.fmu_runtime");
    }
    if (mod) {
        inst->model = p_PyObject_CallMethod(mod, "instantiate", "ss", resources, inst->name);
        if (!inst->model) python_error(inst, "instantiate");
        p_Py_DecRef(mod);
    }
    p_PyGILState_Release(gil);
    if (!inst->model) {
        free(inst->name);
        free(inst);
        return NULL;
    }
    return inst;
}

EXPORT void fmi2FreeInstance(fmi2Component c) {
    Instance *inst = c;
    if (!inst) return;
    int gil = p_PyGILState_Ensure();
    if (inst->out) p_Py_DecRef(inst->out);
    if (inst->request) p_Py_DecRef(inst->request);
    if (inst->model) p_Py_DecRef(inst->model);
    p_PyGILState_Release(gil);
    free(inst->name);
    free(inst);
}

EXPORT fmi2Status fmi2SetDebugLogging(fmi2Component c, fmi2Boolean on, size_t n, const fmi2String cats[]) {
    (void)n;
    (void)cats;
    ((Instance *)c)->logging = on;
    return fmi2OK;
}

EXPORT fmi2Status fmi2SetupExperiment(fmi2Component c, fmi2Boolean tolDefined, fmi2Real tol, fmi2Real t0,
                                      fmi2Boolean stopDefined, fmi2Real stop) {
    (void)c, (void)tolDefined, (void)tol, (void)t0, (void)stopDefined, (void)stop;
    return fmi2OK;
}

EXPORT fmi2Status fmi2EnterInitializationMode(fmi2Component c) {
    (void)c;
    return fmi2OK;
}

EXPORT fmi2Status fmi2ExitInitializationMode(fmi2Component c) {
    Instance *inst = c;
    int gil = p_PyGILState_Ensure();
    fmi2Status st = fmi2OK;
    PyObject *r = p_PyObject_CallMethod(inst->model, "set_seed", "i", inst->ints[VR_SEED]);
    if (!r) {
        python_error(inst, "set_seed");
        st = fmi2Error;
    } else {
        p_Py_DecRef(r);
    }
    if (st == fmi2OK && inst->ints[VR_CFG_SIZE] > 0 && get_pointer(inst, VR_CFG_LO)) {
        if (call_with_buffer(inst, "set_config", VR_CFG_LO, NULL, 0, 0.0, 0.0) != 0) st = fmi2Error;
        if (inst->request) { /* from now on the request is the configuration set (OSMP) */
            p_Py_DecRef(inst->request);
            inst->request = NULL;
        }
    }
    p_PyGILState_Release(gil);
    return st;
}

EXPORT fmi2Status fmi2Terminate(fmi2Component c) {
    (void)c;
    return fmi2OK;
}

EXPORT fmi2Status fmi2Reset(fmi2Component c) {
    Instance *inst = c;
    int gil = p_PyGILState_Ensure();
    PyObject *r = p_PyObject_CallMethod(inst->model, "reset", NULL);
    fmi2Status st = fmi2OK;
    if (!r) {
        python_error(inst, "reset");
        st = fmi2Error;
    } else {
        p_Py_DecRef(r);
    }
    p_PyGILState_Release(gil);
    return st;
}

static fmi2Status compute_request(Instance *inst) {
    if (inst->request) return fmi2OK;
    int gil = p_PyGILState_Ensure();
    fmi2Status st = fmi2OK;
    PyObject *r = p_PyObject_CallMethod(inst->model, "config_request", NULL);
    char *buf = NULL;
    ssize_t len = 0;
    if (!r || p_PyBytes_AsStringAndSize(r, &buf, &len) != 0) {
        python_error(inst, "config_request");
        if (r) p_Py_DecRef(r);
        st = fmi2Error;
    } else {
        inst->request = r;
        set_pointer(inst, VR_REQ_LO, buf, len);
    }
    p_PyGILState_Release(gil);
    return st;
}

EXPORT fmi2Status fmi2GetInteger(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, fmi2Integer value[]) {
    Instance *inst = c;
    for (size_t i = 0; i < nvr; i++) {
        if (vr[i] >= VR_COUNT) {
            say(inst, fmi2Error, "logError", "fmi2GetInteger: no Integer with value reference %u", vr[i]);
            return fmi2Error;
        }
        if (vr[i] >= VR_REQ_LO && vr[i] <= VR_REQ_SIZE && compute_request(inst) != fmi2OK) return fmi2Error;
        value[i] = inst->ints[vr[i]];
    }
    return fmi2OK;
}

EXPORT fmi2Status fmi2SetInteger(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,
                                 const fmi2Integer value[]) {
    Instance *inst = c;
    for (size_t i = 0; i < nvr; i++) {
        unsigned v = vr[i];
        int settable = v <= VR_SV_SIZE || (v >= VR_CFG_LO && v <= VR_CFG_SIZE) || v == VR_SEED;
        if (v >= VR_COUNT || !settable) {
            say(inst, fmi2Error, "logError", "fmi2SetInteger: value reference %u cannot be set", v);
            return fmi2Error;
        }
        inst->ints[v] = value[i];
    }
    return fmi2OK;
}

EXPORT fmi2Status fmi2DoStep(fmi2Component c, fmi2Real t, fmi2Real h, fmi2Boolean noSetFMUStatePriorToCurrentPoint) {
    (void)noSetFMUStatePriorToCurrentPoint;
    Instance *inst = c;
    int gil = p_PyGILState_Ensure();
    int bad = call_with_buffer(inst, "step", VR_SV_LO, &inst->out, VR_SD_LO, t, h);
    p_PyGILState_Release(gil);
    return bad ? fmi2Error : fmi2OK;
}

/* ---- the rest of the FMI 2.0 co-simulation API: no Real, Boolean or String variables, no states ---- */
static fmi2Status none(fmi2Component c, const char *what) {
    say(c, fmi2Error, "logError", "%s is not supported by this FMU", what);
    return fmi2Error;
}
EXPORT fmi2Status fmi2GetReal(fmi2Component c, const fmi2ValueReference vr[], size_t n, fmi2Real v[]) {
    (void)vr, (void)v;
    return n ? none(c, "fmi2GetReal") : fmi2OK;
}
EXPORT fmi2Status fmi2GetBoolean(fmi2Component c, const fmi2ValueReference vr[], size_t n, fmi2Boolean v[]) {
    (void)vr, (void)v;
    return n ? none(c, "fmi2GetBoolean") : fmi2OK;
}
EXPORT fmi2Status fmi2GetString(fmi2Component c, const fmi2ValueReference vr[], size_t n, fmi2String v[]) {
    (void)vr, (void)v;
    return n ? none(c, "fmi2GetString") : fmi2OK;
}
EXPORT fmi2Status fmi2SetReal(fmi2Component c, const fmi2ValueReference vr[], size_t n, const fmi2Real v[]) {
    (void)vr, (void)v;
    return n ? none(c, "fmi2SetReal") : fmi2OK;
}
EXPORT fmi2Status fmi2SetBoolean(fmi2Component c, const fmi2ValueReference vr[], size_t n, const fmi2Boolean v[]) {
    (void)vr, (void)v;
    return n ? none(c, "fmi2SetBoolean") : fmi2OK;
}
EXPORT fmi2Status fmi2SetString(fmi2Component c, const fmi2ValueReference vr[], size_t n, const fmi2String v[]) {
    (void)vr, (void)v;
    return n ? none(c, "fmi2SetString") : fmi2OK;
}
EXPORT fmi2Status fmi2GetFMUstate(fmi2Component c, fmi2FMUstate *s) {
    (void)s;
    return none(c, "fmi2GetFMUstate");
}
EXPORT fmi2Status fmi2SetFMUstate(fmi2Component c, fmi2FMUstate s) {
    (void)s;
    return none(c, "fmi2SetFMUstate");
}
EXPORT fmi2Status fmi2FreeFMUstate(fmi2Component c, fmi2FMUstate *s) {
    (void)s;
    return none(c, "fmi2FreeFMUstate");
}
EXPORT fmi2Status fmi2SerializedFMUstateSize(fmi2Component c, fmi2FMUstate s, size_t *n) {
    (void)s, (void)n;
    return none(c, "fmi2SerializedFMUstateSize");
}
EXPORT fmi2Status fmi2SerializeFMUstate(fmi2Component c, fmi2FMUstate s, fmi2Byte b[], size_t n) {
    (void)s, (void)b, (void)n;
    return none(c, "fmi2SerializeFMUstate");
}
EXPORT fmi2Status fmi2DeSerializeFMUstate(fmi2Component c, const fmi2Byte b[], size_t n, fmi2FMUstate *s) {
    (void)s, (void)b, (void)n;
    return none(c, "fmi2DeSerializeFMUstate");
}
EXPORT fmi2Status fmi2GetDirectionalDerivative(fmi2Component c, const fmi2ValueReference u[], size_t nu,
                                               const fmi2ValueReference z[], size_t nz, const fmi2Real dv[],
                                               fmi2Real dz[]) {
    (void)u, (void)nu, (void)z, (void)nz, (void)dv, (void)dz;
    return none(c, "fmi2GetDirectionalDerivative");
}
EXPORT fmi2Status fmi2SetRealInputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t n,
                                              const fmi2Integer order[], const fmi2Real v[]) {
    (void)vr, (void)order, (void)v;
    return n ? none(c, "fmi2SetRealInputDerivatives") : fmi2OK;
}
EXPORT fmi2Status fmi2GetRealOutputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t n,
                                               const fmi2Integer order[], fmi2Real v[]) {
    (void)vr, (void)order, (void)v;
    return n ? none(c, "fmi2GetRealOutputDerivatives") : fmi2OK;
}
EXPORT fmi2Status fmi2CancelStep(fmi2Component c) { return none(c, "fmi2CancelStep"); }
EXPORT fmi2Status fmi2GetStatus(fmi2Component c, const fmi2StatusKind s, fmi2Status *v) {
    (void)s, (void)v;
    return none(c, "fmi2GetStatus");
}
EXPORT fmi2Status fmi2GetRealStatus(fmi2Component c, const fmi2StatusKind s, fmi2Real *v) {
    (void)s, (void)v;
    return none(c, "fmi2GetRealStatus");
}
EXPORT fmi2Status fmi2GetIntegerStatus(fmi2Component c, const fmi2StatusKind s, fmi2Integer *v) {
    (void)s, (void)v;
    return none(c, "fmi2GetIntegerStatus");
}
EXPORT fmi2Status fmi2GetBooleanStatus(fmi2Component c, const fmi2StatusKind s, fmi2Boolean *v) {
    (void)s, (void)v;
    return none(c, "fmi2GetBooleanStatus");
}
EXPORT fmi2Status fmi2GetStringStatus(fmi2Component c, const fmi2StatusKind s, fmi2String *v) {
    (void)s, (void)v;
    return none(c, "fmi2GetStringStatus");
}
