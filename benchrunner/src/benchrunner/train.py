"""The training workload every rank runs, whatever launched it."""

from __future__ import annotations

import math
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchrunner import data, models, provenance, results, stats
from benchrunner.launchers import GPU_ENV
from benchrunner.workload import Workload

PROCESS_STARTED_AT = time.time()


@dataclass(frozen=True)
class RunContext:
    """Where a rank's result goes and what it records about how it was launched."""

    run_id: str
    output_dir: Path
    stack: str = "baremetal"
    launcher: str = "mpirun"
    network: str = "tcp"
    launched_at: float | None = None
    git_commit: str | None = None

    def provenance(self, tf: Any, hvd: Any) -> dict[str, Any]:
        return provenance.collect(tf, hvd, stack=self.stack, launcher=self.launcher, network=self.network,
                                  git_commit=self.git_commit)


def init_horovod(workload: Workload) -> tuple[Any, Any]:
    """Import and start TensorFlow and Horovod with the workload's knobs in place."""
    # Horovod reads its knobs from the environment at init; an explicit workload setting wins.
    os.environ.update(workload.horovod_environment())
    import horovod.tensorflow as hvd  # noqa: PLC0415 - heavy, only where training happens
    import tensorflow as tf  # noqa: PLC0415 - likewise

    hvd.init()
    _configure_devices(tf, hvd)
    return tf, hvd


def _configure_devices(tf: Any, hvd: Any) -> None:
    # One GPU per rank, memory grown on demand so co-located ranks do not starve each other.
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    if gpus:
        tf.config.set_visible_devices(gpus[hvd.local_rank() % len(gpus)], "GPU")


def _optimizer(tf: Any, workload: Workload, size: int) -> Any:
    # Linear scaling of the learning rate with the number of ranks, as Horovod recommends.
    optimizer = tf.keras.optimizers.SGD(learning_rate=workload.learning_rate * size, momentum=0.9)
    if workload.precision == "mixed_float16":
        # float16 gradients underflow without loss scaling; bfloat16 has float32's range and needs none.
        optimizer = tf.keras.mixed_precision.LossScaleOptimizer(optimizer)
    return optimizer


def run(workload: Workload, context: RunContext) -> dict[str, Any]:
    """Train for warmup + measured steps; write and return this rank's result."""
    workload.validate()
    tf, hvd = init_horovod(workload)
    if workload.precision != "fp32":
        tf.keras.mixed_precision.set_global_policy(workload.precision)
    if workload.xla:
        # Auto-clustering compiles the model's ops and leaves Horovod's collectives outside XLA.
        tf.config.optimizer.set_jit("autoclustering")

    model = models.build(tf, workload.model, workload.image_size, workload.classes)
    if workload.multi_label:
        loss_fn = tf.keras.losses.BinaryCrossentropy(from_logits=True)
    else:
        loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer = _optimizer(tf, workload, hvd.size())
    scaled = workload.precision == "mixed_float16"
    compression = hvd.Compression.fp16 if workload.fp16_allreduce else hvd.Compression.none
    batches = data.batches(tf, workload, hvd.rank(), hvd.size())

    @tf.function
    def train_step(images: Any, labels: Any, first_batch: bool) -> Any:
        with tf.GradientTape() as tape:
            logits = model(images, training=True)
            loss = loss_fn(labels, tf.cast(logits, tf.float32))
            scaled_loss = optimizer.get_scaled_loss(loss) if scaled else loss
        tape = hvd.DistributedGradientTape(tape, compression=compression)
        gradients = tape.gradient(scaled_loss, model.trainable_variables)
        if scaled:
            gradients = optimizer.get_unscaled_gradients(gradients)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        # Optimizer slots exist only after the first apply, so broadcast rank 0's state then.
        if first_batch:
            hvd.broadcast_variables(model.variables, root_rank=0)
            hvd.broadcast_variables(optimizer.variables(), root_rank=0)
        return loss

    step_times: list[float] = []
    losses: list[float | None] = []
    first_step_done = None
    measured_from = 0.0
    for step in range(workload.warmup_steps + workload.measured_steps):
        # Fetching the batch is inside the timing: with real data the pipeline is part of what is measured.
        started = time.perf_counter()
        if step == workload.warmup_steps:
            measured_from = started
        images, labels = next(batches)
        loss = float(train_step(images, labels, step == 0))  # float() waits for the step to finish
        elapsed = time.perf_counter() - started
        if first_step_done is None:
            first_step_done = time.time()
        # JSON has no NaN or Infinity: a non-finite loss is recorded as null, and sanity fails the run on it.
        losses.append(loss if math.isfinite(loss) else None)
        if step == 0:
            # Trace the steady-state step now, so tracing is never inside a measured step whatever the warmup.
            train_step.get_concrete_function(images, labels, False)
        if step >= workload.warmup_steps:
            step_times.append(elapsed)
    # Throughput over the measured steps' wall time, so the loop's own work between steps counts against it.
    measured_s = time.perf_counter() - measured_from
    finished_at = time.time()

    step_stats = stats.describe(step_times)
    document = {
        "kind": results.RANK_RESULT,
        "schema_version": results.SCHEMA_VERSION,
        "run_id": context.run_id,
        "rank": hvd.rank(),
        "size": hvd.size(),
        "local_rank": hvd.local_rank(),
        "local_size": hvd.local_size(),
        "host": socket.gethostname(),
        "workload": workload.record(),
        "metrics": {
            "images_per_sec": workload.batch_size * len(step_times) / measured_s,
            "measured_s": measured_s,
            "step_time_s": step_stats.as_dict(),
            "time_to_first_step_s": first_step_done - (context.launched_at or PROCESS_STARTED_AT),
            "launched_at": context.launched_at,
            "started_at": PROCESS_STARTED_AT,
            "finished_at": finished_at,
        },
        "step_times_s": step_times,
        "losses": losses,
        "device": {
            "asked_gpu": os.environ.get(GPU_ENV) == "1",
            # Where the model's weights live, so where the steps ran: /.../device:GPU:0, or CPU:0.
            "trained_on": model.trainable_variables[0].device,
            "gpus_visible": len(tf.config.list_physical_devices("GPU")),
        },
        "provenance": context.provenance(tf, hvd),
    }
    results.save(results.RANK_RESULT, document, context.output_dir / f"rank-{hvd.rank():05d}.json")
    hvd.shutdown()
    return document


def launched_at_from_env() -> float | None:
    value = os.environ.get("BENCHRUNNER_LAUNCHED_AT")
    return float(value) if value else None
