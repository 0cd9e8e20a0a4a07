package_name = 'onnxruntime-gpu'
__version__ = '1.26.0'
cuda_version = '12.8'
