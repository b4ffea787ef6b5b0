/* entry: everything the dynamic loader and other libraries call into libtermsight.so, in one
 * place to find and audit (lttng-ust keeps its lttng-ust-comm.c so):
 * - the constructor, when the library is loaded (LD_PRELOAD under termsight run, a link, a
 *   dlopen): the session from the environment when TERMSIGHT_AUTOSTART=1 (autostart.c);
 * - InitializeInjection, which the CUDA driver calls during its initialization when
 *   CUDA_INJECTION64_PATH names this library: the session, then CUDA collection (cupti.c);
 * - InitializeInjectionNvtx2, which the NVTX loader of each module that embeds NVTX calls on that
 *   module's first NVTX call when NVTX_INJECTION64_PATH names this library (nvtx.c).
 * The process hooks a session installs (atexit, pthread_atfork) are session.c's. */
#include "collectors.h"

#include <stdatomic.h>

#ifdef TERMSIGHT_HAVE_NVTX
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>
#endif

__attribute__((constructor)) static void entry_constructor(void)
{
    autostart_ensure();
}

/* No CUDA call here (the driver is mid-initialization): the session from the environment, then
 * CUPTI. Returns 1 (success) even when CUDA collection is off, so the program runs on. A second
 * call (a second load of the library) does nothing. */
__attribute__((visibility("default"))) int InitializeInjection(void)
{
    static atomic_flag once = ATOMIC_FLAG_INIT;
    if (atomic_flag_test_and_set(&once))
        return 1;
    autostart_ensure();
    termsight_session *s = session_current(); /* a program that uses CUDA records: made now */
    if (s)
        cupti_start(s);
    return 1;
}

#ifdef TERMSIGHT_HAVE_NVTX
/* Returns 1 when the module's tables are filled, 0 otherwise. */
__attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get)
{
    if (!get)
        return 0;
    autostart_ensure();
    return nvtx_inject((void (*)(void))get);
}
#endif
