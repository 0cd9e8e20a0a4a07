/* cudatx demo: stand-in for torch/lib/libtorch_global_deps.so of a CUDA 12.8 torch. Not
 * PyTorch code. torch/__init__.py loads it first; like the real one it needs libcudart
 * (DT_NEEDED libcudart.so.12, found through its DT_RPATH
 * $ORIGIN/../../nvidia/cuda_runtime/lib), and torch preloads the rest only when it did. */

extern int cudatx_demo_cudart_version(void);

int cudatx_demo_torch_cudart_version(void) { return cudatx_demo_cudart_version(); }
