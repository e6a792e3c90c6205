"""Horovod TensorFlow training benchmark with trustworthy, schema-validated results."""

__version__ = "0.2.0"
