/* cudatx demo: stand-in for one of the seven sub-libraries libcudnn.so.9 dlopens at run time
 * (libcudnn_graph.so.9, ..., libcudnn_heuristic.so.9), found through its DT_RUNPATH $ORIGIN.
 * Not NVIDIA code. One source for all of them: the soname tells them apart, and
 * -DCUDA_MAJOR=12 or 13 (with -DCUDNN_VERSION) makes the cu12 and cu13 wheels' copies
 * differ in bytes, as the real ones do.
 *
 * The real libcudnn_adv.so.9 and libcudnn_engines_precompiled.so.9 dlopen cuBLASLt (and the
 * latter NVRTC) of their own CUDA major by a name in .rodata; -DCUDNN_LOADS_CUBLASLT and
 * -DCUDNN_LOADS_NVRTC put the same names there, so that a CUDA 13 build asks for
 * libcublasLt.so.13 even in an environment that only has cuBLAS 12. */

#define CUDATX_STR2(x) #x
#define CUDATX_STR(x) CUDATX_STR2(x)

int cudatx_demo_cudnn_sub_cuda_major(void) { return CUDA_MAJOR; }

int cudatx_demo_cudnn_sub_version(void) { return CUDNN_VERSION; }

#ifdef CUDNN_LOADS_CUBLASLT
const char *cudatx_demo_cudnn_sub_cublaslt(void) { return "libcublasLt.so." CUDATX_STR(CUDA_MAJOR); }
#endif

#ifdef CUDNN_LOADS_NVRTC
const char *cudatx_demo_cudnn_sub_nvrtc(void) { return "libnvrtc.so." CUDATX_STR(CUDA_MAJOR); }
#endif
