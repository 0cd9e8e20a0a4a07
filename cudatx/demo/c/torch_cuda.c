/* cudatx demo: stand-in for torch/lib/libtorch_cuda.so of a CUDA 12.8 torch. Not PyTorch
 * code. DT_NEEDED libcudnn.so.9 and libcublas.so.12, found through its DT_RPATH
 * $ORIGIN/../../nvidia/cudnn/lib:$ORIGIN/../../nvidia/cublas/lib (one folder per component,
 * as a cu128 build has). */

extern int cudatx_demo_cudnn_version(void);
extern int cudatx_demo_cudnn_cuda_major(void);
extern int cudatx_demo_cublas_version(void);

int cudatx_demo_torch_cuda_major(void) { return 12; }

int cudatx_demo_torch_cudnn_version(void) { return cudatx_demo_cudnn_version(); }

int cudatx_demo_torch_cudnn_cuda_major(void) { return cudatx_demo_cudnn_cuda_major(); }

int cudatx_demo_torch_cublas_version(void) { return cudatx_demo_cublas_version(); }
