"""Builders of valid result documents, so each test changes only what it is about."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchrunner import mfu, results, stats
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
    workload = Workload.from_mapping({"model": model, "batch_size": batch_size, "warmup_steps": 2,
                                      "measured_steps": len(step_times), **settings}).record()
    return {
        "kind": "rank-result",
        "schema_version": 3,
        "run_id": run_id,
        "rank": rank,
        "size": size,
        "local_rank": 0,
        "local_size": 1,
        "host": host or f"node{rank + 1}",
        "workload": workload,
        "framework": workload["framework"],
        # An image model: no FLOPs count, so no utilization; a text model's test adds both.
        "model": {"name": model, "parameters": 1_000, "source": "benchrunner", "kind": "image"},
        "flops": None,
        "utilization": None,
        "memory": {"peak_bytes": (100 + rank) * 1024 ** 2, "source": "ru_maxrss"},
        "metrics": {
            "samples_per_sec": batch_size * len(step_times) / sum(step_times),
            "unit": "images",
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
        "grad_norms": [1.0] * len(losses),
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


# A decoder's shape for FLOPs per token (6 x N + 12 x L x H x Q x T): non-embedding parameters, layers, heads, head_dim.
TEXT_MODEL = {"non_embedding_parameters": 3_000_000, "layers": 4, "heads": 4, "head_dim": 32}
H100_SXM = "NVIDIA H100 80GB HBM3"


def text_rank_document(rank: int = 0, size: int = 2, *, sequence_length: int = 64, accumulation: int = 1,
                       product: str | None = None, probe_tflops: float | None = 0.5, **kwargs: Any) -> dict[str, Any]:
    """A rank of a decoder trained by pytorch-ddp: tokens per second, its FLOPs and utilization as benchrunner.mfu
    makes them, on a GPU of this product name (bf16) or, with None, a CPU (fp32, no peak); probe_tflops None: no
    probe run."""
    document = rank_document(rank, size, framework="pytorch-ddp", **kwargs)
    workload = {key: value for key, value in document["workload"].items() if key not in ("image_size", "num_classes")}
    workload |= {"model": "llama-tiny", "sequence_length": sequence_length, "gradient_accumulation_steps": accumulation,
                 "optimizer": "adamw", "weight_decay": 0.1, "precision": "mixed_bfloat16" if product else "fp32"}
    step_times = document["step_times_s"]
    tokens_per_sec = workload["batch_size"] * accumulation * sequence_length * len(step_times) / sum(step_times)
    flops = mfu.flops_per_token(**TEXT_MODEL, sequence_length=sequence_length)
    precision = mfu.peak_precision(workload["precision"], tf32=False)
    probe = probe_tflops and {"tflops": probe_tflops, "size": 1024, "dtype": precision, "repeats": 10, "seconds": 0.4,
                              "device": product or "cpu"}
    provenance = {key: value for key, value in document["provenance"].items() if key not in ("tensorflow", "horovod")}
    return {**document, "workload": workload, "framework": "pytorch-ddp",
            "model": {"name": "llama-tiny", "parameters": 4_000_000, "source": "benchrunner", "kind": "text"},
            "metrics": {**document["metrics"], "samples_per_sec": tokens_per_sec, "unit": "tokens"},
            "flops": flops,
            "utilization": mfu.utilization(flops["per_unit"], tokens_per_sec, product, workload["precision"], False,
                                           probe),
            "provenance": {**provenance, "torch": {"version": "2.13.0", "cuda": None, "cudnn": None, "nccl": None,
                                                   "backend": "gloo"}}}


# What a rank result of v3 has that v2 did not, besides its throughput's name and unit.
V3_ONLY = ("grad_norms", "flops", "utilization", "memory")


def _v2_workload(record: dict[str, Any]) -> dict[str, Any]:
    """A workload record with only the settings v2 recorded."""
    known = results.schema(results.RANK_RESULT, 2)["$defs"]["workload"]["properties"]
    return {key: value for key, value in record.items() if key in known}


def as_v2(document: dict[str, Any]) -> dict[str, Any]:
    """A v3 rank result of an image model as benchrunner wrote it at v2: images_per_sec, no unit, no model kind,
    none of the v3 figures."""
    metrics = {key: value for key, value in document["metrics"].items() if key not in ("samples_per_sec", "unit")}
    model = {key: value for key, value in document["model"].items() if key != "kind"}
    return {**{key: value for key, value in document.items() if key not in V3_ONLY}, "schema_version": 2,
            "workload": _v2_workload(document["workload"]), "model": model,
            "metrics": {**metrics, "images_per_sec": document["metrics"]["samples_per_sec"]}}


def as_v2_summary(document: dict[str, Any]) -> dict[str, Any]:
    """A v3 summary of an image model's run as benchrunner wrote it at v2: images/s, no per-device figures, no
    utilization, memory or container."""
    old = document["throughput"]
    per_rank = [{**{key: value for key, value in r.items() if key != "samples_per_sec"}, "images_per_sec": r["samples_per_sec"]}
                for r in old["per_rank"]]
    rest = {key: value for key, value in document.items() if key not in ("utilization", "utilization_missing", "memory",
                                                                         "container")}
    return {**rest, "schema_version": 2, "workload": _v2_workload(document["workload"]),
            "throughput": {"unit": "images/s", "total": old["total_per_sec"], "total_batch_means": old["total_batch_means"],
                           "per_rank": per_rank}}


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
