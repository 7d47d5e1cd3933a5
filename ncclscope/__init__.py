"""ncclscope: read NCCL logs, topology matrices and nccl-tests output, and say what is wrong."""

__version__ = "0.1.0"
