/* cudatx demo: stand-in for a serving plug-in (cudatx-demo-plugin), which the serving code
 * loads by path with ctypes when the first request needs it. Not NVIDIA code. Nothing names
 * it: no DT_NEEDED of any other object, no string in any .rodata; only a run shows the load.
 * It needs cuBLASLt 12 (DT_NEEDED libcublasLt.so.12, found through its DT_RUNPATH
 * $ORIGIN/../nvidia/cublas/lib). */

extern int cudatx_demo_cublaslt_version(void);

int cudatx_demo_plugin_answer(void) { return cudatx_demo_cublaslt_version() > 0 ? 42 : 0; }
