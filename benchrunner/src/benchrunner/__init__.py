"""Distributed training benchmark for GPU clusters (Horovod + TensorFlow, PyTorch DDP and FSDP2; CNNs and transformers)
with schema-validated results and the provenance that makes them comparable."""

__version__ = "0.2.0"
