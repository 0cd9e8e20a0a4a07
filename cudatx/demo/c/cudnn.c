/* cudatx demo: stand-in for libcudnn.so.9, built for CUDA 12 (nvidia-cudnn-cu12 9.10.2.21) or
 * CUDA 13 (nvidia-cudnn-cu13 9.13.0.50) with -DCUDA_MAJOR and -DCUDNN_VERSION. Not NVIDIA
 * code. Both builds have the same soname and functions, and different bytes, as the real
 * ones do. Both find their sub-libraries through DT_RUNPATH $ORIGIN. Like the real CUDA 12
 * build, that one also needs cuBLAS 12 (DT_NEEDED libcublas.so.12, found through the second
 * RUNPATH folder $ORIGIN/../../cublas/lib); the CUDA 13 build needs nothing, so a CUDA 12
 * torch loads it without complaint. */

#if CUDA_MAJOR == 12
extern int cudatx_demo_cublas_cuda_major(void);

int cudatx_demo_cudnn_cuda_major(void) { return cudatx_demo_cublas_cuda_major(); }
#else
int cudatx_demo_cudnn_cuda_major(void) { return CUDA_MAJOR; }
#endif

int cudatx_demo_cudnn_version(void) { return CUDNN_VERSION; }
