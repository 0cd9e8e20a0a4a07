/* cudatx demo: stand-in for libcudart.so.12 (nvidia-cuda-runtime-cu12 12.8.90). Not NVIDIA
 * code. It is here because torch preloads its NVIDIA libraries only once
 * libtorch_global_deps.so has mapped a libcudart. */

int cudatx_demo_cudart_version(void) { return 12080; } /* 12.8 */
