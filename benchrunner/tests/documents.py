"""Builders of valid result documents, so each test changes only what it is about."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchrunner import stats
from benchrunner.workload import Workload


def rank_document(rank: int = 0, size: int = 2, *, run_id: str = "run-1", host: str | None = None,
                  step_times: list[float] | None = None, losses: list[float | None] | None = None,
                  batch_size: int = 32, stack: str = "baremetal", model: str = "small_cnn",
                  input_waits: list[float] | None = None, machine: str | None = None,
                  **settings: Any) -> dict[str, Any]:
    step_times = step_times or [0.10, 0.11, 0.09, 0.10]
    losses = losses if losses is not None else [2.3, 2.2, 2.1, 2.0, 1.9, 1.8]
    # Synthetic data's wait: the next item of a Python generator, microseconds.
    input_waits = input_waits or [2e-6] * len(step_times)
    return {
        "kind": "rank-result",
        "schema_version": 2,
        "run_id": run_id,
        "rank": rank,
        "size": size,
        "local_rank": 0,
        "local_size": 1,
        "host": host or f"node{rank + 1}",
        "workload": Workload.from_mapping({"model": model, "batch_size": batch_size, "warmup_steps": 2,
                                           "measured_steps": len(step_times), **settings}).record(),
        "metrics": {
            "images_per_sec": batch_size * len(step_times) / sum(step_times),
            "measured_s": sum(step_times),
            "step_time_s": stats.describe(step_times).as_dict(),
            "time_to_first_step_s": 4.0 + rank,
            "launched_at": 1000.0,
            "started_at": 1001.0,
            "finished_at": 1010.0 + rank,
            "input_wait": {"total_s": sum(input_waits), "fraction_of_step_time": sum(input_waits) / sum(step_times),
                           "per_step_s": stats.describe(input_waits).as_dict()},
        },
        "step_times_s": step_times,
        "input_wait_s": input_waits,
        "losses": losses,
        "device": {"asked_gpu": False, "trained_on": "/job:localhost/replica:0/task:0/device:CPU:0", "gpus_visible": 0},
        "provenance": {
            "benchrunner": {"version": "0.1.0", "git_commit": "abc123"},
            "python": "3.11.2",
            "tensorflow": {"version": "2.15.1", "cuda": "12.2", "cudnn": "8", "built_with_cuda": True},
            "horovod": {"version": "0.28.1", "mpi_built": True, "gloo_built": True, "nccl_built": False,
                        "controller": "mpi"},
            "mpi": "Open MPI v4.1.4",
            "os": "Debian GNU/Linux 12 (bookworm)",
            "kernel": "6.1.0",
            "cpu": {"model": "Xeon", "logical_cpus": 2, "cores": 2, "machine": "x86_64"},
            "memory_bytes": 8 * 1024 ** 3,
            # One machine per rank unless a test says otherwise; on Kubernetes the node name tells them apart.
            "machine_id": machine or f"{rank + 1:032x}",
            "node_name": f"k8s-node{rank + 1}" if stack == "k8s" else None,
            "gpus": [],
            "nvidia_driver": None,
            "hcas": [],
            "stack": stack,
            "launcher": "mpirun",
            "network": "tcp",
            "environment": {"HOROVOD_FUSION_THRESHOLD": "67108864"},
        },
    }


def write_json(path: Path, document: Any) -> Path:
    path.write_text(json.dumps(document))
    return path


def allreduce_document(ranks: int = 2, *, run_id: str = "sweep-1", stack: str = "baremetal",
                       busbw: float = 1e9) -> dict[str, Any]:
    points = []
    for size in (8, 1024, 1 << 20):
        algbw = busbw * ranks / (2 * (ranks - 1)) if ranks > 1 else busbw
        points.append({"bytes": size, "iterations": 10, "time_s": size / algbw, "algbw_bytes_per_s": algbw,
                       "busbw_bytes_per_s": busbw})
    provenance = rank_document(stack=stack)["provenance"]
    return {"kind": "allreduce-result", "schema_version": 2, "run_id": run_id, "ranks": ranks, "host": "node1",
            "points": points, "provenance": provenance}
