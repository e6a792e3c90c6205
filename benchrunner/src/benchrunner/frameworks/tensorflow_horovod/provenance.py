"""What a TensorFlow and Horovod rank records of the software and machine it ran on."""

from __future__ import annotations

import os
import platform
import re
from importlib import metadata
from typing import TYPE_CHECKING, Any

from benchrunner import __version__
from benchrunner.provenance import (
    cpu_model,
    cuda_toolkit,
    hcas,
    machine_id,
    memory_bytes,
    mpi_version,
    nccl_version,
    node_name,
    nvidia_driver,
    os_release,
    physical_cores,
    pip_cuda_libraries,
    recorded_environment,
)

if TYPE_CHECKING:
    from benchrunner.train import RunContext


def collect(tf: Any, hvd: Any, context: RunContext) -> dict[str, Any]:
    build = tf.sysconfig.get_build_info()
    return {
        "benchrunner": {"version": __version__, "git_commit": context.git_commit},
        "python": platform.python_version(),
        "tensorflow": {
            "version": tf.__version__,
            "cuda": build.get("cuda_version"),
            "cudnn": build.get("cudnn_version"),
            "built_with_cuda": bool(build.get("is_cuda_build")),
            "cuda_libraries": pip_cuda_libraries(),
        },
        "cuda_toolkit": cuda_toolkit(),
        "horovod": {
            "version": _horovod_version(),
            "mpi_built": bool(hvd.mpi_built()),
            "gloo_built": bool(hvd.gloo_built()),
            "nccl_built": bool(hvd.nccl_built()),
            "nccl": nccl_version(int(hvd.nccl_built())),
            "controller": "mpi" if hvd.mpi_enabled() else "gloo",
        },
        "mpi": mpi_version(hvd),
        "os": os_release(),
        "kernel": platform.release(),
        "cpu": {"model": cpu_model(), "logical_cpus": os.cpu_count() or 0, "cores": physical_cores(),
                "machine": platform.machine()},
        "memory_bytes": memory_bytes(),
        "machine_id": machine_id(),
        "node_name": node_name(),
        "gpus": [_gpu_name(tf, d) for d in tf.config.list_physical_devices("GPU")],
        "nvidia_driver": nvidia_driver(),
        "hcas": hcas(),
        "stack": context.stack,
        "launcher": context.launcher,
        "network": context.network,
        "container": context.container,
        "environment": recorded_environment(),
    }


def _horovod_version() -> str:
    return metadata.version("horovod")


def _gpu_name(tf: Any, device: Any) -> str:
    details = tf.config.experimental.get_device_details(device)
    return re.sub(r"\s+", " ", details.get("device_name", device.name))
