/* cudatx demo: stand-in for torch._C, a real CPython extension. Not PyTorch code.
 * Built with the limited API (abi3, CPython >= 3.8), so one build serves every Python 3.
 * DT_NEEDED libtorch_cuda.so, found through its DT_RPATH $ORIGIN/lib. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

extern int cudatx_demo_torch_cuda_major(void);
extern int cudatx_demo_torch_cudnn_version(void);
extern int cudatx_demo_torch_cudnn_cuda_major(void);
extern int cudatx_demo_torch_cublas_version(void);

static PyObject *cuda_major(PyObject *self, PyObject *args) {
    (void)self; (void)args;
    return PyLong_FromLong(cudatx_demo_torch_cuda_major());
}

static PyObject *cudnn_version(PyObject *self, PyObject *args) {
    (void)self; (void)args;
    return PyLong_FromLong(cudatx_demo_torch_cudnn_version());
}

static PyObject *cudnn_cuda_major(PyObject *self, PyObject *args) {
    (void)self; (void)args;
    return PyLong_FromLong(cudatx_demo_torch_cudnn_cuda_major());
}

static PyObject *cublas_version(PyObject *self, PyObject *args) {
    (void)self; (void)args;
    return PyLong_FromLong(cudatx_demo_torch_cublas_version());
}

static PyMethodDef methods[] = {
    {"cuda_major", cuda_major, METH_NOARGS, "CUDA major torch was built for (12)."},
    {"cudnn_version", cudnn_version, METH_NOARGS, "Version of the cuDNN the loader bound."},
    {"cudnn_cuda_major", cudnn_cuda_major, METH_NOARGS,
     "CUDA major of the cuDNN the loader bound (13 when the trap fired)."},
    {"cublas_version", cublas_version, METH_NOARGS, "Version of the cuBLAS the loader bound."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "torch._C", "cudatx demo stand-in for torch._C", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&moduledef); }
