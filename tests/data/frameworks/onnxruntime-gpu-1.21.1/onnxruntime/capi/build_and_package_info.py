package_name = 'onnxruntime-gpu'
__version__ = '1.21.1'
cuda_version = '12.2'
