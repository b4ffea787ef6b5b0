/* cupti_load: libcupti loaded at run time (dlopen) into a table of function pointers, so the
 * library runs where CUPTI or the driver is missing (cupti_api_load, cupti_internal.h). */
#include "cupti_internal.h"

#if TERMSIGHT_HAVE_CUPTI

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Loading ---------------------------------------------------------------------------- */

cupti_api cupti_loaded;
static const char *load_why;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

/* The path of a libcupti the process holds already (PyTorch's libtorch_cuda links one), or "". */
static int find_loaded(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    const char *name = info->dlpi_name, *base = name ? strrchr(name, '/') : NULL;
    base = base ? base + 1 : name;
    if (!base || strncmp(base, "libcupti.so", 11) != 0)
        return 0;
    snprintf(data, PATH_MAX, "%s", name);
    return 1;
}

static char lib_path[PATH_MAX]; /* the copy in use, for the status line */
static int lib_was_loaded;      /* the program had loaded it */

static void *open_lib(void)
{
    static const char *const names[] = {"libcupti.so.13", "libcupti.so"};
    static const char *const dirs[] = {"extras/CUPTI/lib64", "lib64", "lib"};
    /* A second copy of CUPTI in one process leaves the first one's client (torch.profiler)
     * without records: the program's own copy is the one to share. */
    char loaded_path[PATH_MAX] = "";
    dl_iterate_phdr(find_loaded, loaded_path);
    if (*loaded_path) {
        void *lib = dlopen(loaded_path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
        if (lib) {
            snprintf(lib_path, sizeof lib_path, "%s", loaded_path);
            lib_was_loaded = 1;
            return lib;
        }
    }
    const char *explicit = getenv("TERMSIGHT_CUPTI_LIB");
    if (explicit && *explicit) {
        snprintf(lib_path, sizeof lib_path, "%s", explicit);
        return dlopen(explicit, RTLD_NOW | RTLD_LOCAL);
    }
    const char *homes[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH")};
    char path[4096];
    for (size_t h = 0; h < 2; h++) {
        if (!homes[h] || !*homes[h])
            continue;
        for (size_t d = 0; d < sizeof dirs / sizeof dirs[0]; d++)
            for (size_t n = 0; n < sizeof names / sizeof names[0]; n++) {
                if (snprintf(path, sizeof path, "%s/%s/%s", homes[h], dirs[d], names[n]) >=
                    (int)sizeof path)
                    continue;
                void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
                if (lib) {
                    snprintf(lib_path, sizeof lib_path, "%s", path);
                    return lib;
                }
            }
    }
    for (size_t n = 0; n < sizeof names / sizeof names[0]; n++) {
        void *lib = dlopen(names[n], RTLD_NOW | RTLD_LOCAL);
        if (lib) {
            snprintf(lib_path, sizeof lib_path, "%s", names[n]);
            return lib;
        }
    }
    snprintf(lib_path, sizeof lib_path, "/usr/local/cuda/lib64/libcupti.so.13");
    return dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
}

static void load(void)
{
    void *lib = open_lib();
    if (!lib) {
        const char *e = dlerror();
        static char why[200];
        snprintf(why, sizeof why, "cannot load libcupti (%s)", e ? e : "not found");
        load_why = why;
        return;
    }
    /* One row per symbol; optional ones may be missing in older versions. */
    static const struct {
        const char *name;
        size_t offset;
        int optional;
    } syms[] = {
        {"cuptiGetVersion", offsetof(cupti_api, get_version), 0},
        {"cuptiActivityRegisterCallbacks", offsetof(cupti_api, register_callbacks), 0},
        {"cuptiActivityEnable", offsetof(cupti_api, enable), 0},
        {"cuptiActivityDisable", offsetof(cupti_api, disable), 0},
        {"cuptiActivityFlushAll", offsetof(cupti_api, flush_all), 0},
        {"cuptiActivityGetNextRecord", offsetof(cupti_api, get_next_record), 0},
        {"cuptiActivityGetNumDroppedRecords", offsetof(cupti_api, get_num_dropped), 0},
        {"cuptiActivityRegisterTimestampCallback", offsetof(cupti_api, register_timestamp), 0},
        {"cuptiSetThreadIdType", offsetof(cupti_api, set_thread_id_type), 0},
        {"cuptiActivityPushExternalCorrelationId", offsetof(cupti_api, push_external), 0},
        {"cuptiActivityPopExternalCorrelationId", offsetof(cupti_api, pop_external), 0},
        {"cuptiSubscribe", offsetof(cupti_api, subscribe), 0},
        {"cuptiUnsubscribe", offsetof(cupti_api, unsubscribe), 0},
        {"cuptiGetResultString", offsetof(cupti_api, get_result_string), 0},
        {"cuptiGetCallbackName", offsetof(cupti_api, get_callback_name), 1},
        {"cuptiActivityFlushPeriod", offsetof(cupti_api, flush_period), 1},
    };
    cupti_api api = {0};
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        void *fn = dlsym(lib, syms[i].name);
        if (!fn && !syms[i].optional) {
            static char why[200];
            snprintf(why, sizeof why, "libcupti lacks %s", syms[i].name);
            load_why = why;
            dlclose(lib);
            return;
        }
        memcpy((char *)&api + syms[i].offset, &fn, sizeof fn);
    }
    cupti_loaded = api;
    load_why = NULL;
}

const cupti_api *cupti_api_load(const char **why)
{
    pthread_once(&load_once, load);
    if (why)
        *why = load_why;
    return load_why ? NULL : &cupti_loaded;
}
const char *cupti_lib_path(int *programs)
{
    *programs = lib_was_loaded;
    return lib_path;
}
#endif
