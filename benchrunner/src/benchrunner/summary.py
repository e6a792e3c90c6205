"""Turning every rank's result of one run into a checked summary and a readable table."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchrunner import containers, frameworks, provenance, report, results, stats, watchdog
from benchrunner import workload as workload_module

RAW_DIR = "raw"
SUMMARY_JSON = "summary.json"
LATEST = "latest"


def load_ranks(run_dir: Path) -> list[dict[str, Any]]:
    files = sorted((run_dir / RAW_DIR).glob("rank-*.json"))
    if not files:
        raise results.ResultError(f"{run_dir / RAW_DIR}: no rank-*.json files")
    return [results.load(results.RANK_RESULT, f) for f in files]


def _device_check(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """A job that asked for GPUs passes only if every rank's weights lived on a GPU: a rank that fell back to the
    CPU (no usable CUDA or cuDNN for its TensorFlow, no GPU visible) would otherwise pass as a slow GPU run."""
    problems = []
    for r in ranks:
        device = r.get("device")
        if device is None:
            problems.append(f"rank {r['rank']} recorded no device")
        elif device["asked_gpu"] and not _on_gpu(device["trained_on"]):
            framework = frameworks.get(r.get("framework", frameworks.DEFAULT))
            built = {key.rsplit("_", 1)[-1]: value for key, value in framework.versions(r["provenance"]).items()
                     if "_built_" in key}
            problems.append(f"rank {r['rank']} on {r['host']} trained on {device['trained_on']} though the job asked for "
                            f"a GPU: {framework.NAME} saw {device['gpus_visible']} GPU(s) (built with CUDA "
                            f"{built.get('cuda')}, cuDNN {built.get('cudnn')})")
    asked = any(r.get("device", {}).get("asked_gpu") for r in ranks)
    return {"name": "trained where asked", "passed": not problems,
            "detail": "; ".join(problems) or ("every rank on its GPU" if asked else "CPU run: no GPU asked for")}


def _on_gpu(trained_on: str) -> bool:
    """TensorFlow names a GPU /job:.../device:GPU:0, PyTorch cuda:0."""
    return ":GPU:" in trained_on.upper() or trained_on.startswith("cuda")


def _machine(rank: dict[str, Any]) -> str | None:
    """What tells this rank's machine apart: on Kubernetes the pod's node (a container's /etc/machine-id is its
    image's, the same in every pod, or none), elsewhere the machine-id."""
    prov = rank["provenance"]
    return prov.get("node_name") if prov["stack"] == "k8s" else prov.get("machine_id")


def _machines_check(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """No more ranks on one machine than the launcher placed per node (Horovod's local size: with one rank per node,
    one). Two inventory names or two hostnames for one machine would otherwise pass as a multi-host result."""
    name = "ranks on machines of their own"
    if len(ranks) == 1:
        return {"name": name, "passed": True, "detail": "one rank"}
    what = "Kubernetes node" if ranks[0]["provenance"]["stack"] == "k8s" else "machine-id"
    fix = (f"set {provenance.NODE_NAME_ENV} from the pod's spec.nodeName" if what == "Kubernetes node"
           else "/etc/machine-id absent, empty or not an ID, or a rank made before benchrunner recorded it")
    unknown = [f"rank {', '.join(str(r['rank']) for r in missing)} recorded no {thing}"
               for thing, missing in ((f"{what} ({fix})", [r for r in ranks if not _machine(r)]),
                                      ("local size", [r for r in ranks if not r.get("local_size")])) if missing]
    if unknown:
        return {"name": name, "passed": False,
                "detail": "; ".join(unknown) + ": cannot tell whether ranks shared a machine"}
    by_machine: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in ranks:
        by_machine[_machine(r)].append(r)
    problems = []
    for machine, members in sorted(by_machine.items(), key=lambda item: item[1][0]["rank"]):
        placed = max(r["local_size"] for r in members)
        if len(members) > placed:
            hosts = ", ".join(sorted({r["host"] for r in members}))
            problems.append(f"ranks {', '.join(str(r['rank']) for r in members)} ran on one machine ({what} "
                            f"{machine}, hostname {hosts}) though the launcher placed {placed} rank(s) per node")
    return {"name": name, "passed": not problems,
            "detail": "; ".join(problems) or f"{len(ranks)} ranks on {len(by_machine)} machines, as placed"}


def sanity_checks(ranks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Checks a run must pass before its numbers mean anything."""
    size = ranks[0]["size"]
    sizes = {r["size"] for r in ranks}
    seen = sorted(r["rank"] for r in ranks)
    steps = {len(r["step_times_s"]) for r in ranks}
    run_ids = {r["run_id"] for r in ranks}
    # Steps count from the first warmup step; a non-finite loss is written as null (JSON has no NaN or Infinity).
    bad_losses = [f"rank {r['rank']} at step {step}" for r in sorted(ranks, key=lambda r: r["rank"])
                  for step, v in enumerate(r["losses"]) if v is None or not math.isfinite(v)]
    workloads = {repr(sorted(r["workload"].items())) for r in ranks}
    return [
        {"name": "ranks agree on the job size", "passed": len(sizes) == 1, "detail": f"job sizes {sorted(sizes)}"},
        {"name": "all ranks reported", "passed": seen == list(range(size)),
         "detail": f"expected ranks 0..{size - 1}, got {seen}"},
        {"name": "ranks agree on measured step count", "passed": len(steps) == 1,
         "detail": f"step counts {sorted(steps)}"},
        {"name": "one run id", "passed": len(run_ids) == 1, "detail": f"run ids {sorted(run_ids)}"},
        {"name": "loss is finite", "passed": not bad_losses,
         "detail": "non-finite loss on " + ", ".join(bad_losses) if bad_losses else "every step's loss is finite"},
        _device_check(ranks),
        _machines_check(ranks),
        {"name": "same workload on every rank", "passed": len(workloads) == 1,
         "detail": f"{len(workloads)} distinct workload settings"},
        _containers_check(ranks),
    ]


def _containers_check(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """Every rank ran in the same container (runtime, image, digest and mounts), or every one in none: ranks that ran
    in different ones (or some in none) measured no one thing."""
    by_container: dict[str, list[int]] = defaultdict(list)
    for r in sorted(ranks, key=lambda r: r["rank"]):
        by_container[json.dumps(containers.recorded(r["provenance"]), sort_keys=True)].append(r["rank"])
    if len(by_container) == 1:
        return {"name": "one container on every rank", "passed": True, "detail": next(iter(by_container))}
    return {"name": "one container on every rank", "passed": False,
            "detail": "; ".join(f"rank {', '.join(map(str, members))}: {said}" for said, members in by_container.items())}


# TensorFlow's profiler calls steps HIGHLY input-bound when >= 20% of their time waits for input and MODERATELY
# from 5% (kHighlyInfeedBoundThresholdInPercent, kModeratelyInfeedBoundThresholdInPercent in
# tensorflow/core/profiler/convert/op_stats_to_input_pipeline_analysis.cc); the same cut-offs here, applied to
# the wait the training loop measured around its iterator.
INPUT_BOUND_FRACTION = 0.20
INPUT_MODERATE_FRACTION = 0.05


def input_figures(workload: dict[str, Any], ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """Whether the run waited on its input. Ranks train in lockstep (every allreduce waits for the last rank),
    so the rank that waited most decides."""
    waits = {r["rank"]: r["metrics"].get("input_wait") for r in ranks}
    missing = sorted(rank for rank, wait in waits.items() if wait is None)
    worst = None if missing else max((w["fraction_of_step_time"], rank) for rank, w in waits.items())
    figures: dict[str, Any] = {"pipeline": workload["data"] != "synthetic", "worst_rank": None, "wait_fraction": None,
                               "classification": None, "input_bound": None, "threshold": INPUT_BOUND_FRACTION}
    if worst is not None:
        figures["wait_fraction"], figures["worst_rank"] = worst
    if missing:
        figures["verdict"] = (f"input wait not recorded by rank(s) {', '.join(map(str, missing))} (results made "
                              "before benchrunner measured it)")
        if not figures["pipeline"]:
            figures["verdict"] = "synthetic: no input pipeline; " + figures["verdict"]
        return figures
    fraction, rank = worst
    if not figures["pipeline"]:
        figures["verdict"] = f"synthetic: no input pipeline (input wait {100 * fraction:.2f}% of step time)"
        return figures
    if fraction >= INPUT_BOUND_FRACTION:
        classification = "input-bound"
    elif fraction >= INPUT_MODERATE_FRACTION:
        classification = "moderately input-bound"
    else:
        classification = "not input-bound"
    figures |= {"classification": classification, "input_bound": fraction >= INPUT_BOUND_FRACTION}
    figures["verdict"] = (f"{classification}: rank {rank} waited for its input {100 * fraction:.1f}% of its step "
                          f"time (input-bound from {100 * INPUT_BOUND_FRACTION:.0f}%, moderately from "
                          f"{100 * INPUT_MODERATE_FRACTION:.0f}%, as TensorFlow's profiler judges)")
    return figures


def _versions(rank0: dict[str, Any]) -> dict[str, str | None]:
    prov = rank0["provenance"]
    framework = frameworks.get(rank0.get("framework", frameworks.DEFAULT))
    return {
        "benchrunner": prov["benchrunner"]["version"],
        "git_commit": prov["benchrunner"].get("git_commit"),
        "python": prov["python"],
        **framework.versions(prov),
        "mpi": prov.get("mpi"),
        "nvidia_driver": prov.get("nvidia_driver"),
        "os": prov["os"],
        "kernel": prov["kernel"],
    }


def _nodes(ranks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The hardware of each machine the run used, as its ranks recorded it (the first rank on a machine speaks for
    it; ranks that recorded no machine count as machines of their own)."""
    nodes: dict[Any, dict[str, Any]] = {}
    for r in ranks:
        prov = r["provenance"]
        node = nodes.setdefault(_machine(r) or ("rank", r["rank"]), {
            "hosts": [], "ranks": [], "cpu_model": prov["cpu"]["model"], "cores": prov["cpu"].get("cores"),
            "logical_cpus": prov["cpu"]["logical_cpus"], "memory_bytes": prov.get("memory_bytes"),
            "gpus": prov["gpus"]})
        node["ranks"].append(r["rank"])
        if r["host"] not in node["hosts"]:
            node["hosts"].append(r["host"])
    return list(nodes.values())


def _units_per_step(rank: dict[str, Any]) -> int:
    """What the rank processed per measured step, in its unit: a whole number its throughput was computed from
    (samples_per_sec = units per step x steps / measured_s), so the record of any version gives it back."""
    metrics = rank["metrics"]
    return round(metrics["samples_per_sec"] * metrics["measured_s"] / len(rank["step_times_s"]))


def _batch_means(ranks: list[dict[str, Any]], per: int = 1) -> dict[str, Any] | None:
    """The run's total throughput per batch of consecutive steps (each rank's units per step over its batch's mean
    step time, summed over ranks), divided by `per`, described: its spread and interval. None when ranks measured
    different step counts."""
    if len({len(r["step_times_s"]) for r in ranks}) != 1:
        return None
    per_rank = [[_units_per_step(r) / t for t in stats.batch_means(r["step_times_s"])] for r in ranks]
    return stats.describe([sum(batch) / per for batch in zip(*per_rank)]).as_dict()


def unit_of(ranks: list[dict[str, Any]]) -> str:
    """The unit every rank counted in; ranks that count different units cannot be added up, and are refused."""
    units = {r["metrics"]["unit"] for r in ranks}
    if len(units) != 1:
        raise results.ResultError("ranks count throughput in different units (" + ", ".join(
            f"rank {r['rank']}: {r['metrics']['unit']}" for r in ranks) + "): no total adds them up")
    return units.pop()


def throughput(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """The run's samples per second in its unit, total and per device (one rank, one device), with their spread."""
    # The sum of what each rank measured, not rank 0 times the number of ranks.
    total = sum(r["metrics"]["samples_per_sec"] for r in ranks)
    return {
        "unit": unit_of(ranks),
        "total_per_sec": total,
        "per_device_per_sec": total / len(ranks),
        "total_batch_means": _batch_means(ranks),
        "per_device_batch_means": _batch_means(ranks, len(ranks)),
        "per_rank": [{"rank": r["rank"], "host": r["host"], "samples_per_sec": r["metrics"]["samples_per_sec"],
                      "step_time_s": r["metrics"]["step_time_s"],
                      "step_time_batch_means_s": stats.describe(stats.batch_means(r["step_times_s"])).as_dict(),
                      **({"input_wait": r["metrics"]["input_wait"]} if "input_wait" in r["metrics"] else {})}
                     for r in ranks],
    }


def _spread(values: list[float]) -> dict[str, float]:
    return {"mean": math.fsum(values) / len(values), "minimum": min(values), "maximum": max(values)}


def _ranks_text(ranks: list[dict[str, Any]]) -> str:
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(str(r['rank']) for r in ranks)}"


def _absent(ranks: list[dict[str, Any]], why: Callable[[dict[str, Any]], str | None]) -> str | None:
    """Why some ranks have no figure: each distinct reason (why(rank)) with the ranks that gave it; None when all have
    it (why gives None)."""
    by_reason: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in ranks:
        reason = why(r)
        if reason:
            by_reason[reason].append(r)
    return "; ".join(f"{_ranks_text(members)}: {reason}" for reason, members in by_reason.items()) or None


# Why a rank has no utilization: an image model has no FLOPs count yet, whatever wrote its result (flops and
# utilization null, or absent); a text model's result without the key comes from a framework or a version of
# benchrunner that measured none.
NO_FLOPS = "no FLOPs count for image models yet, so no model TFLOP/s or MFU"
NOT_RECORDED = "recorded no utilization (a result made before benchrunner measured it, or a framework that does not)"


def _no_utilization(rank: dict[str, Any]) -> str | None:
    if rank.get("utilization") is not None:
        return None
    # A v2 result may not name its model: it trained an image model, as every v2 result did.
    model = rank.get("model", {"kind": results.V2_MODEL_KIND})
    if model["kind"] == "image":
        return NO_FLOPS
    if "utilization" not in rank:
        return NOT_RECORDED
    return f"no FLOPs count for {model['name']}, so no model TFLOP/s or MFU"


def utilization(ranks: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, str | None]:
    """The ranks' utilization over the run (model TFLOP/s, MFU against the peak and against the probe, each as mean,
    minimum and maximum over ranks), and why it is None where any rank has none. A figure some ranks lack is None
    with the ranks' reasons, never the others' mean."""
    missing = _absent(ranks, _no_utilization)
    if missing:
        return None, missing
    used = [r["utilization"] for r in ranks]
    precisions = {u["precision"] for u in used}
    if len(precisions) != 1:
        return None, "ranks used different precisions (" + ", ".join(sorted(precisions)) + ")"
    peaks = {repr(u["peak"]) for u in used}
    peak_missing = _absent(ranks, lambda r: None if r["utilization"]["mfu"] is not None else
                           r["utilization"]["peak_missing"] or "no MFU against a peak recorded")
    if not peak_missing and len(peaks) != 1:
        peak_missing = "ranks ran on devices with different peaks: each rank's MFU is against its own"
    probe_absent = _absent(ranks, lambda r: None if r["utilization"]["probe"] else "no GEMM probe recorded")
    probe_missing = probe_absent or _absent(
        ranks, lambda r: None if r["utilization"]["mfu_vs_probe"] is not None else
        r["utilization"].get("mfu_vs_probe_missing") or "no MFU against the probe recorded")
    return {
        "precision": precisions.pop(),
        "model_tflops_per_device": _spread([u["model_tflops_per_device"] for u in used]),
        "peak": used[0]["peak"] if len(peaks) == 1 else None,
        "peak_missing": peak_missing,
        "mfu": None if any(u["mfu"] is None for u in used) else _spread([u["mfu"] for u in used]),
        "probe_tflops": None if probe_absent else _spread([u["probe"]["tflops"] for u in used]),
        "probe_missing": probe_missing,
        "mfu_vs_probe": None if probe_missing else _spread([u["mfu_vs_probe"] for u in used]),
    }, None


def memory(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """The highest peak memory of any rank and which rank reached it; None, with why, where any rank has none."""
    missing = _absent(ranks, lambda r: "recorded no peak memory" if "memory" not in r else
                      None if r["memory"]["peak_bytes"] is not None else f"{r['memory']['source']} gave no figure")
    sources = sorted({r["memory"]["source"] for r in ranks if "memory" in r})
    if missing:
        return {"peak_bytes": None, "rank": None, "sources": sources, "missing": missing}
    highest = max(ranks, key=lambda r: r["memory"]["peak_bytes"])
    return {"peak_bytes": highest["memory"]["peak_bytes"], "rank": highest["rank"], "sources": sources, "missing": None}


def _started(ranks: list[dict[str, Any]]) -> str:
    """When the run began (its launch, or the first rank's start): the run's date."""
    epoch = min(r["metrics"].get("launched_at") or r["metrics"]["started_at"] for r in ranks)
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).isoformat(timespec="seconds")


def _warmup_s(ranks: list[dict[str, Any]]) -> float:
    """Seconds from the end of the first step (start-up, tracing) to the measured window, slowest rank."""
    return max(0.0, max(r["metrics"]["finished_at"] - r["metrics"]["measured_s"]
                        - ((r["metrics"].get("launched_at") or r["metrics"]["started_at"])
                           + r["metrics"]["time_to_first_step_s"]) for r in ranks))


def _startup(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """The slowest rank's start by stage, where it recorded one (results made before benchrunner did have none)."""
    slowest = max(ranks, key=lambda r: r["metrics"]["time_to_first_step_s"])
    return {"startup_s": slowest["metrics"]["startup_s"]} if "startup_s" in slowest["metrics"] else {}


# How the report names each start-up stage.
STARTUP_WORDS = {"process_started": "process started", "framework_imported": "framework imported",
                 "ranks_joined": "ranks joined", "model_ready": "model and input ready", "first_step": "first step done"}


def startup_line(summary: dict[str, Any]) -> str:
    stages = summary.get("startup_s")
    head = f"time to first step: {summary['time_to_first_step_s']:.1f} s"
    if not stages:
        return head
    return head + " (" + ", ".join(f"{words} {stages[stage]:.1f}" for stage, words in STARTUP_WORDS.items()
                                   if stage in stages) + ")"


def summarize(run_dir: Path) -> dict[str, Any]:
    ranks = sorted(load_ranks(run_dir), key=lambda r: r["rank"])
    rank0 = ranks[0]
    checks = sanity_checks(ranks)
    launched = [r["metrics"]["launched_at"] for r in ranks if r["metrics"].get("launched_at")]
    finished = max(r["metrics"]["finished_at"] for r in ranks)
    used, unused = utilization(ranks)
    return {
        "kind": results.SUMMARY,
        "schema_version": results.version_of(results.SUMMARY),
        "run_id": rank0["run_id"],
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "started_at": _started(ranks),
        "ranks": len(ranks),
        "hosts": sorted({r["host"] for r in ranks}),
        "nodes": _nodes(ranks),
        "asked_gpu": any(r.get("device", {}).get("asked_gpu") for r in ranks),
        # Settings a result predates are filled in as benchrunner then ran, so old and new runs compare on them.
        "workload": workload_module.complete_record(rank0["workload"]),
        "input": input_figures(rank0["workload"], ranks),
        "throughput": throughput(ranks),
        "utilization": used,
        "utilization_missing": unused,
        "memory": memory(ranks),
        "elapsed_s": finished - min(launched) if launched else None,
        "time_to_first_step_s": max(r["metrics"]["time_to_first_step_s"] for r in ranks),
        **_startup(ranks),
        "warmup_s": _warmup_s(ranks),
        "loss": {"rank0": rank0["losses"]},
        "versions": _versions(rank0),
        "stack": rank0["provenance"]["stack"],
        "launcher": rank0["provenance"]["launcher"],
        "container": containers.recorded(rank0["provenance"]),
        "network": rank0["provenance"]["network"],
        "provenance": rank0["provenance"],
        "sanity": {"passed": all(c["passed"] for c in checks), "checks": checks},
    }


# What the peers measure (Horovod's synthetic benchmark, tf_cnn_benchmarks): about 100 batches after warmup.
PEER_MEASURED_STEPS = 100


def window_line(summary: dict[str, Any]) -> str:
    """The measurement window, and a warning where it is shorter than the peers' (a wide, drift-prone interval)."""
    w = summary["workload"]
    seconds = max(r["step_time_s"]["mean"] * r["step_time_s"]["n"] for r in summary["throughput"]["per_rank"])
    warmup = f" ({summary['warmup_s']:.1f} s after the first step)" if "warmup_s" in summary else ""
    line = (f"window: {w['warmup_steps']} warmup steps{warmup}, then {w['measured_steps']} measured steps in "
            f"{seconds:.1f} s")
    if w["measured_steps"] < PEER_MEASURED_STEPS:
        line += (f"; SHORT: the peers measure {PEER_MEASURED_STEPS} steps, so this run's interval is wide and a "
                 "passing disturbance weighs more")
    return line


def training_line(workload: dict[str, Any]) -> str:
    """The optimizer and learning-rate schedule, from a workload record (older ones completed)."""
    w = workload_module.complete_record(workload)
    optimizer = f"SGD, momentum {w['momentum']:g}" if w["optimizer"] == "sgd" else f"Adam, beta_1 {w['momentum']:g}"
    if w["optimizer"] == "adamw":
        optimizer = f"AdamW, beta_1 {w['momentum']:g}, weight decay {w['weight_decay']:g}"
    scaling = " x ranks" if w["lr_scaling"] == "linear" else " (not scaled by ranks)"
    warmup = f", {w['lr_warmup_steps']} steps' warmup" if w["lr_warmup_steps"] else ""
    preset = f" (preset {w['preset']})" if w["preset"] else ""
    return f"training: {optimizer}, learning rate {w['learning_rate']:g}{scaling}, {w['lr_schedule']}{warmup}{preset}"


def throughput_line(summary: dict[str, Any]) -> str:
    """The run's figure, total and per device, and its spread, saying what the spread is over."""
    figures = summary["throughput"]
    unit = report.per_sec(figures["unit"])
    total, spread, device = figures["total_per_sec"], figures["total_batch_means"], figures["per_device_batch_means"]
    per_device = f"{figures['per_device_per_sec']:.1f} {unit} per device"
    if not spread or spread["n"] < 2:
        return (f"throughput: {total:.1f} {unit} total over ranks, {per_device}; no spread (too few steps for batch "
                "means)")
    half = (spread["ci95_high"] - spread["ci95_low"]) / 2
    return (f"throughput: {total:.1f} {unit} (total over ranks); spread over {spread['n']} batch means of "
            f"consecutive steps, not repeats: 95% CI {spread['ci95_low']:.1f} - {spread['ci95_high']:.1f} "
            f"(+/- {100 * half / spread['mean']:.1f}%), stdev {spread['stdev']:.1f}; {per_device} (95% CI "
            f"{device['ci95_low']:.1f} - {device['ci95_high']:.1f})")


def _over_ranks(spread: dict[str, float], shown: Callable[[float], str]) -> str:
    """A figure's mean over ranks, and its range where ranks differ."""
    mean, low, high = (shown(spread[key]) for key in ("mean", "minimum", "maximum"))
    return mean + ("" if low == high else f" (ranks {low} - {high})")


def _tflops(value: float) -> str:
    return f"{value:.3g} TFLOP/s"


def utilization_line(summary: dict[str, Any]) -> str:
    """Model TFLOP/s per device and MFU against the peak and against the probe, or why the run has none."""
    used = summary["utilization"]
    if used is None:
        return f"utilization: none ({summary['utilization_missing']})"
    peak = used["peak"]
    if used["mfu"] is None:
        mfu = f"MFU vs peak: - ({used['peak_missing']})"
    else:
        against = (f"the {peak['product']} {peak['form']} dense {used['precision']} peak {peak['tflops']:g} TFLOP/s "
                   f"({peak['source']})" if peak else f"each rank's own peak ({used['peak_missing']})")
        mfu = f"MFU {_over_ranks(used['mfu'], report.fraction)} of {against}"
    if used["mfu_vs_probe"] is None:
        probe = f"MFU vs probe: - ({used['probe_missing']})"
    else:
        probe = (f"MFU vs probe {_over_ranks(used['mfu_vs_probe'], report.fraction)} of the GEMM probe's "
                 f"{_over_ranks(used['probe_tflops'], _tflops)}")
    return (f"utilization ({used['precision']}): model {_over_ranks(used['model_tflops_per_device'], _tflops)} per "
            f"device; {mfu}; {probe}")


def memory_line(summary: dict[str, Any]) -> str:
    memory = summary["memory"]
    if memory["peak_bytes"] is None:
        return f"peak memory: not known ({memory['missing']})"
    return f"peak memory: {_size(memory['peak_bytes'])} (rank {memory['rank']}, {', '.join(memory['sources'])})"


def _size(count: float) -> str:
    for unit, factor in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20)):
        if count >= factor:
            return f"{count / factor:.1f} {unit}"
    return f"{count:.0f} B"


def _hardware(node: dict[str, Any]) -> str:
    cores = f"{node['cores']} cores, " if node["cores"] else ""
    memory = f"{_size(node['memory_bytes'])} memory" if node["memory_bytes"] else "memory not recorded"
    models = sorted(set(node["gpus"]))
    gpus = ", ".join(f"{node['gpus'].count(m)} x {m}" for m in models) if models else "no GPU"
    return f"{node['cpu_model']} ({cores}{node['logical_cpus']} logical CPUs), {memory}, {gpus}"


def hardware_line(summary: dict[str, Any]) -> str:
    nodes = summary.get("nodes")
    if not nodes:
        return "hardware per node: rank 0's node: " + _hardware({
            "cpu_model": summary["provenance"]["cpu"]["model"], "cores": summary["provenance"]["cpu"].get("cores"),
            "logical_cpus": summary["provenance"]["cpu"]["logical_cpus"],
            "memory_bytes": summary["provenance"].get("memory_bytes"), "gpus": summary["provenance"]["gpus"]})
    kinds = sorted({_hardware(n) for n in nodes})
    if len(kinds) == 1:
        return f"hardware per node ({len(nodes)} node{'s' if len(nodes) > 1 else ''}): {kinds[0]}"
    return "hardware DIFFERS between nodes: " + "; ".join(f"{', '.join(n['hosts'])}: {_hardware(n)}" for n in nodes)


def _when(summary: dict[str, Any]) -> str:
    return summary.get("started_at") or summary["created_at"]


def previous_lines(run_dir: Path, summary: dict[str, Any]) -> list[str]:
    """The most recent earlier run of the same point (stack, GPU count, every axis the report groups by) that passed
    sanity, in the same results folder, and the change since it."""
    others, unreadable = report.earlier_documents(run_dir, results.SUMMARY)
    earlier = [s for s in others if report.point(s) == report.point(summary)
               and report.when(_when(s)) < report.when(_when(summary))]
    if not earlier:
        line = (f"previous run of this point: none in {run_dir.parent} (same stack, ranks, workload, network, "
                "launcher, versions)")
    else:
        previous = max(earlier, key=lambda s: report.when(_when(s)))
        # The same point is the same model, so the same unit: one_unit refuses a pair that is not.
        unit = report.per_sec(report.one_unit([previous, summary], f"run {summary['run_id']} and {previous['run_id']}"))
        before, now = previous["throughput"]["total_per_sec"], summary["throughput"]["total_per_sec"]
        line = (f"previous run of this point: {previous['run_id']} ({report.day(_when(previous))}), {before:.1f} "
                f"{unit}; change since: {100 * (now / before - 1):+.1f}%"
                + ("" if previous["sanity"]["passed"] else " (that run FAILED sanity)"))
    return [line, *report.unreadable_line(unreadable)]


def _intro(summary: dict[str, Any], run_dir: Path | None = None) -> list[str]:
    w = workload_module.complete_record(summary["workload"])
    framework = frameworks.get(w["framework"])
    elapsed = summary["elapsed_s"]
    date = report.day(summary["started_at"]) if "started_at" in summary else (
        f"not recorded (summarized {report.day(summary['created_at'])})")
    return [
        f"run date: {date}",
        f"{w['model']}, {w['data']} data, batch {w['batch_size']}/rank"
        + (f" x {w['gradient_accumulation_steps']} micro-batches per step" if w["gradient_accumulation_steps"] > 1 else "")
        + f", {report.input_shape(w)}, {w['precision']}"
        + "".join(f", {part}" for part in framework.model_settings(w))
        + ("" if w["framework"] == frameworks.DEFAULT else f" ({w['framework']})"),
        f"stack {summary['stack']}, launcher {summary['launcher']}, network {summary['network']}, "
        f"{summary['ranks']} ranks on {len(summary.get('nodes') or summary['hosts'])} nodes",
        hardware_line(summary),
        throughput_line(summary),
        utilization_line(summary),
        memory_line(summary),
        training_line(w),
        # Summaries written before the input wait was measured have no "input".
        "input: " + summary.get("input", {}).get("verdict", "not recorded (summary made before input wait)")
        + (f"; pipeline: {framework.input_settings(w)}" if w["data"] != "synthetic" else ""),
        "sanity: " + ("passed" if summary["sanity"]["passed"] else "FAILED: " + "; ".join(
            c["detail"] for c in summary["sanity"]["checks"] if not c["passed"])),
        window_line(summary),
        *(previous_lines(run_dir, summary) if run_dir else []),
        (f"job elapsed: {elapsed:.1f} s" if elapsed is not None else "job elapsed: unknown (no launch time)")
        + "; " + startup_line(summary),
    ]


def _tables(summary: dict[str, Any]) -> list[report.Table]:
    ranks = [(str(r["rank"]), r["host"], f"{r['samples_per_sec']:.1f}", f"{r['step_time_s']['mean']:.4f}",
              f"{r['step_time_s']['stdev']:.4f}", f"{100 * r['step_time_s']['stdev'] / r['step_time_s']['mean']:.1f}%",
              _batch_ci(r)) for r in summary["throughput"]["per_rank"]]
    ranks.append(("total", "", f"{summary['throughput']['total_per_sec']:.1f}", "", "", "", ""))
    shown = report.shown_versions([summary])
    versions = [(name, str(value) if value is not None else "-") for name, value in summary["versions"].items()
                if name in shown]
    return [report.Table("Ranks", ("rank", "host", report.per_sec(summary["throughput"]["unit"]), "step time mean (s)",
                                   "step time stdev (s)", "step time CV", "mean's 95% CI, batch means (s)"), ranks,
                         "The interval is over the means of up to 10 consecutive batches of steps, since consecutive "
                         "steps are not independent."),
            *_input_table(summary),
            report.Table("Versions", ("component", "version"), versions)]


def _input_table(summary: dict[str, Any]) -> list[report.Table]:
    """Each rank's wait for its batches, for runs that read real data and measured it."""
    if not summary.get("input", {}).get("pipeline"):
        return []
    rows = [(str(r["rank"]), r["host"], f"{w['total_s']:.3f}", f"{100 * w['fraction_of_step_time']:.1f}%",
             f"{1000 * w['per_step_s']['mean']:.2f}", f"{1000 * w['per_step_s']['maximum']:.2f}")
            for r in summary["throughput"]["per_rank"] if (w := r.get("input_wait"))]
    return [report.Table("Input wait", ("rank", "host", "total (s)", "of step time", "per step mean (ms)",
                                        "per step max (ms)"), rows,
                         "Time each measured step spent getting its batch from the input pipeline, before its "
                         "compute.")] if rows else []


def _batch_ci(rank: dict[str, Any]) -> str:
    batches = rank.get("step_time_batch_means_s")
    if batches is None:
        return "- (summary made before batch means)"
    return f"{batches['ci95_low']:.4f} - {batches['ci95_high']:.4f} ({batches['n']} batches)"


def render_markdown(summary: dict[str, Any], run_dir: Path | None = None) -> str:
    """The run page as Markdown; given the run's folder, with the previous run of its point and its job files."""
    links = report.job_files(run_dir) if run_dir else []
    return report.markdown(f"Run {summary['run_id']}", _intro(summary, run_dir), _tables(summary), [], Path("."),
                           links)


def check_run_folder(run_dir: Path) -> None:
    """Refuse, before anything is written, a run folder whose summary would end in a failed or wrong latest link:
    one named like the results folder's own entries, or one beside a latest that is not a link."""
    if run_dir.name in results.RESERVED_RUN_IDS:
        raise results.ResultError(f"{run_dir}: {run_dir.name!r} is reserved for the results folder's own "
                                  f"{run_dir.name}, not a run's folder; rename the folder to its run id and "
                                  "summarize that")
    link = run_dir.parent / LATEST
    if link.exists() and not link.is_symlink():
        raise results.ResultError(f"{link}: not the link to the latest run but a {'folder' if link.is_dir() else 'file'}"
                                  "; move it away (a run folder: rename it to its run id), then summarize again")


def point_latest(run_dir: Path) -> Path:
    """Point <results>/latest at run_dir, replacing the old link in one rename."""
    link = run_dir.parent / LATEST
    tmp = run_dir.parent / f".{LATEST}.{os.getpid()}"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(run_dir.name)
    try:
        os.replace(tmp, link)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return link


def sweep_path(run_dir: Path) -> Path | None:
    """The run's allreduce result when the run was a sweep, else None."""
    path = run_dir / RAW_DIR / results.SWEEP_JSON
    return path if path.exists() else None


def stalled_path(run_dir: Path) -> Path | None:
    """The watchdog's record when it ended the run's job as stalled, else None."""
    path = run_dir / watchdog.STALLED_JSON
    return path if path.exists() else None


def write_stalled(run_dir: Path) -> dict[str, Any]:
    """The report of a run whose job stalled: what the watchdog recorded, since no rank measured anything."""
    check_run_folder(run_dir)
    stalled = results.load(results.STALLED, run_dir / watchdog.STALLED_JSON)
    report.write_stalled(run_dir, stalled)
    point_latest(run_dir)
    return stalled


def write_sweep(run_dir: Path, *, plots: bool = True) -> dict[str, Any]:
    check_run_folder(run_dir)
    sweep = results.load(results.ALLREDUCE_RESULT, run_dir / RAW_DIR / results.SWEEP_JSON)
    report.write_sweep(run_dir, sweep, plots=plots)
    point_latest(run_dir)
    return sweep


def write_report(run_dir: Path, summary: dict[str, Any], *, plots: bool = True) -> Path:
    """report.md, report.html and plots/ of one run, from its summary; plots=False leaves the plot for later and says
    so in the report."""
    title, intro, tables = f"Run {summary['run_id']}", _intro(summary, run_dir), _tables(summary)
    figures = []
    if plots:
        figures.append(report.loss_plot([("rank 0", summary["loss"]["rank0"])], run_dir / report.LOSS_PLOT,
                                        summary["workload"]["warmup_steps"]))
    else:
        intro.append(report.deferred_plots_line(run_dir))
    links = report.job_files(run_dir)
    results.write_atomic(run_dir / report.REPORT_MD, report.markdown(title, intro, tables, figures, run_dir, links))
    results.write_atomic(run_dir / report.REPORT_HTML, report.html_page(title, intro, tables, figures, links))
    return run_dir / report.REPORT_MD


def write(run_dir: Path, *, plots: bool = True) -> dict[str, Any]:
    check_run_folder(run_dir)
    summary = summarize(run_dir)
    results.save(results.SUMMARY, summary, run_dir / SUMMARY_JSON)
    write_report(run_dir, summary, plots=plots)
    point_latest(run_dir)
    return summary


def draw_plots(run_dir: Path) -> bool:
    """Complete the report of a run summarized without its plot (drawn, and the report written again with it); False
    when the run has its plot already."""
    sweep = sweep_path(run_dir)
    if (run_dir / (report.SWEEP_PLOT if sweep else report.LOSS_PLOT)).exists():
        return False
    if sweep:
        report.write_sweep(run_dir, results.load(results.ALLREDUCE_RESULT, sweep))
    else:
        write_report(run_dir, results.load(results.SUMMARY, run_dir / SUMMARY_JSON))
    return True
