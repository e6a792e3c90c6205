"""What every rank's training shares, whichever framework trains and whatever launched it: its run context, start-up
stages, learning-rate schedule, measured window and the metrics a result records of it."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchrunner import containers, stats, watchdog
from benchrunner.workload import Workload

PROCESS_STARTED_AT = time.time()
# When this rank finished each stage of its start before the first step (mark()), so a slow start shows where it went:
# the framework imported, the ranks joined (Horovod's init, the process group), the model and input ready.
STARTUP_STAGES = ("framework_imported", "ranks_joined", "model_ready")
_startup: dict[str, float] = {}


def mark(stage: str) -> None:
    if stage not in STARTUP_STAGES:
        raise ValueError(f"unknown start-up stage {stage!r}: one of {', '.join(STARTUP_STAGES)}")
    _startup[stage] = time.time()
    watchdog.reached(stage)


def startup(origin: float, first_step_done: float) -> dict[str, float]:
    """Seconds from the launch (or benchrunner's start) to the end of each stage this rank marked, ending with its
    first step; with a launch time, the process's own start comes first."""
    stages = {"process_started": PROCESS_STARTED_AT} if origin != PROCESS_STARTED_AT else {}
    stages |= {stage: _startup[stage] for stage in STARTUP_STAGES if stage in _startup}
    stages["first_step"] = first_step_done
    return {stage: at - origin for stage, at in stages.items()}


@dataclass(frozen=True)
class RunContext:
    """Where a rank's result goes and what it records about how it was launched."""

    run_id: str
    output_dir: Path
    # The launcher that started the rank, as it records it (checked at the rank's entry: cli._check_launcher).
    launcher: str
    stack: str = "baremetal"
    network: str = "tcp"
    launched_at: float | None = None
    git_commit: str | None = None
    # The container it ran in, as its provenance records it (checked at the rank's entry: cli._check_container).
    container: dict[str, Any] = field(default_factory=lambda: containers.record(None))


class Ops:
    """The arithmetic a learning-rate schedule needs, on Python floats: TensorFlow's training passes TensorFlow's
    for the optimizer, so the schedule the unit tests check is the one that trains."""

    cos = staticmethod(math.cos)
    minimum = staticmethod(min)
    maximum = staticmethod(max)


def learning_rate(workload: Workload, size: int, step: Any, ops: Any = Ops) -> Any:
    """The rate at `step` (counted from 0, the first warmup step) for `size` ranks: a linear warmup from the
    one-rank rate to the peak, then the peak (constant) or a cosine from the peak to 0 at the run's last step."""
    base = workload.learning_rate
    peak = base * size if workload.lr_scaling == "linear" else base
    warmup = workload.lr_warmup_steps
    rate = peak
    if workload.lr_schedule == "cosine":
        last = workload.warmup_steps + workload.measured_steps - 1
        progress = ops.minimum(ops.maximum(step - warmup, 0) / max(last - warmup, 1), 1.0)
        rate = peak * 0.5 * (1 + ops.cos(math.pi * progress))
    if warmup:
        # The ramp is below the peak until the warmup ends and the decay is at or below it after: the smaller
        # of the two is the schedule, with no branch on a step that may be a tensor.
        rate = ops.minimum(rate, base + (peak - base) * ops.minimum(step / warmup, 1.0))
    return rate


@dataclass
class Measurement:
    """What the loop measured: per measured step its time and the part of it spent waiting for the batch."""

    step_times: list[float] = field(default_factory=list)
    input_waits: list[float] = field(default_factory=list)
    losses: list[float | None] = field(default_factory=list)
    measured_s: float = 0.0
    first_step_done: float = 0.0


def measure(workload: Workload, next_batch: Callable[[], Any], train_step: Callable[[int, Any], float],
            after_first_step: Callable[[Any], None] = lambda batch: None,
            clock: Callable[[], float] = time.perf_counter, wall: Callable[[], float] = time.time) -> Measurement:
    """Run warmup + measured steps. Each measured step's time runs from asking for its batch to its loss being
    known, so the input pipeline is part of what is measured; the wait for the batch is also recorded apart,
    so an input-bound run shows as one."""
    out = Measurement()
    measured_from = 0.0
    for step in range(workload.warmup_steps + workload.measured_steps):
        started = clock()
        if step == workload.warmup_steps:
            measured_from = started
        batch = next_batch()
        fetched = clock()
        loss = train_step(step, batch)  # a float: the step has finished
        ended = clock()
        watchdog.advance()
        if step == 0:
            out.first_step_done = wall()
            after_first_step(batch)
        # JSON has no NaN or Infinity: a non-finite loss is recorded as null, and sanity fails the run on it.
        out.losses.append(loss if math.isfinite(loss) else None)
        if step >= workload.warmup_steps:
            out.step_times.append(ended - started)
            out.input_waits.append(fetched - started)
    # Throughput over the measured steps' wall time, so the loop's own work between steps counts against it.
    out.measured_s = clock() - measured_from
    return out


def input_wait(measurement: Measurement) -> dict[str, Any]:
    """The rank's input wait over its measured steps, as its result records it."""
    total = math.fsum(measurement.input_waits)
    return {"total_s": total, "fraction_of_step_time": total / math.fsum(measurement.step_times),
            "per_step_s": stats.describe(measurement.input_waits).as_dict()}


def measurements(workload: Workload, measured: Measurement, context: RunContext, finished_at: float) -> dict[str, Any]:
    """What a rank's result says of its measured steps, whichever framework trained: its metrics and the series."""
    step_times = measured.step_times
    return {
        "metrics": {
            # Each measured step is one optimizer step: units_per_step() counts its micro-batches and tokens.
            "samples_per_sec": workload.units_per_step() * len(step_times) / measured.measured_s,
            "unit": workload.unit,
            "measured_s": measured.measured_s,
            "step_time_s": stats.describe(step_times).as_dict(),
            "time_to_first_step_s": measured.first_step_done - (context.launched_at or PROCESS_STARTED_AT),
            "startup_s": startup(context.launched_at or PROCESS_STARTED_AT, measured.first_step_done),
            "launched_at": context.launched_at,
            "started_at": PROCESS_STARTED_AT,
            "finished_at": finished_at,
            "input_wait": input_wait(measured),
        },
        "step_times_s": step_times,
        "input_wait_s": measured.input_waits,
        "losses": measured.losses,
    }


def launched_at_from_env() -> float | None:
    value = os.environ.get("BENCHRUNNER_LAUNCHED_AT")
    return float(value) if value else None
