/* cudatx demo: stand-in for cuBLAS 12.8 (nvidia-cublas-cu12): libcublasLt.so.12 when built
 * with -DCUBLAS_LT, libcublas.so.12 otherwise. Not NVIDIA code. As in the real wheel,
 * libcublas.so.12 needs libcublasLt.so.12 (DT_NEEDED, found through its DT_RUNPATH $ORIGIN). */

#ifdef CUBLAS_LT
int cudatx_demo_cublaslt_version(void) { return 120804; } /* 12.8.4 */
#else
extern int cudatx_demo_cublaslt_version(void);

int cudatx_demo_cublas_version(void) { return cudatx_demo_cublaslt_version(); }

int cudatx_demo_cublas_cuda_major(void) { return 12; }
#endif
