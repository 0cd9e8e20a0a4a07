"""cudatx: plan, check and apply package changes in CUDA Python environments safely."""

__version__ = "0.1.0"
