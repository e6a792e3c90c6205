"""The training workload every rank runs, whatever launched it."""

from __future__ import annotations

import math
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchrunner import models, provenance, results, stats

PROCESS_STARTED_AT = time.time()


@dataclass(frozen=True)
class TrainConfig:
    run_id: str
    output_dir: Path
    model: str = "small_cnn"
    batch_size: int = 32
    image_size: int = 32
    num_classes: int = 10
    precision: str = "fp32"
    warmup_steps: int = 5
    measured_steps: int = 20
    learning_rate: float = 0.01
    stack: str = "baremetal"
    launcher: str = "mpirun"
    network: str = "tcp"
    launched_at: float | None = None
    git_commit: str | None = None

    def validate(self) -> None:
        if self.model not in models.MODELS:
            raise ValueError(f"unknown model {self.model!r}; choose one of {', '.join(sorted(models.MODELS))}")
        if self.batch_size < 1 or self.measured_steps < 1 or self.warmup_steps < 0:
            raise ValueError("batch size and measured steps must be >= 1, warmup steps >= 0")
        if self.image_size < 8 or self.num_classes < 2:
            raise ValueError("image size must be >= 8 and classes >= 2")


def _configure_devices(tf: Any, hvd: Any) -> None:
    # One GPU per rank, memory grown on demand so co-located ranks do not starve each other.
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    if gpus:
        tf.config.set_visible_devices(gpus[hvd.local_rank() % len(gpus)], "GPU")


def run(config: TrainConfig) -> dict[str, Any]:
    """Train for warmup + measured steps on synthetic data; write and return this rank's result."""
    config.validate()
    import horovod.tensorflow as hvd  # noqa: PLC0415 - heavy, only where training happens
    import tensorflow as tf  # noqa: PLC0415

    hvd.init()
    _configure_devices(tf, hvd)
    if config.precision != "fp32":
        tf.keras.mixed_precision.set_global_policy(config.precision)

    classes = models.CHEXNET_FINDINGS if config.model in models.MULTI_LABEL else config.num_classes
    model = models.build(tf, config.model, config.image_size, classes)
    # Synthetic data is made once on the device, so the input pipeline is not what is measured.
    images = tf.random.uniform([config.batch_size, config.image_size, config.image_size, 3], seed=hvd.rank())
    if config.model in models.MULTI_LABEL:
        labels = tf.cast(tf.random.uniform([config.batch_size, classes], seed=hvd.rank()) > 0.5, tf.float32)
        loss_fn = tf.keras.losses.BinaryCrossentropy(from_logits=True)
    else:
        labels = tf.random.uniform([config.batch_size], maxval=classes, dtype=tf.int64, seed=hvd.rank())
        loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    # Linear scaling of the learning rate with the number of ranks, as Horovod recommends.
    optimizer = tf.keras.optimizers.SGD(learning_rate=config.learning_rate * hvd.size(), momentum=0.9)

    @tf.function
    def train_step(first_batch: bool) -> Any:
        with tf.GradientTape() as tape:
            logits = model(images, training=True)
            loss = loss_fn(labels, tf.cast(logits, tf.float32))
        tape = hvd.DistributedGradientTape(tape)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        # Optimizer slots exist only after the first apply, so broadcast rank 0's state then.
        if first_batch:
            hvd.broadcast_variables(model.variables, root_rank=0)
            hvd.broadcast_variables(optimizer.variables(), root_rank=0)
        return loss

    step_times: list[float] = []
    losses: list[float | None] = []
    first_step_done = None
    for step in range(config.warmup_steps + config.measured_steps):
        started = time.perf_counter()
        loss = float(train_step(step == 0))  # float() waits for the step to finish
        elapsed = time.perf_counter() - started
        if first_step_done is None:
            first_step_done = time.time()
        losses.append(None if math.isnan(loss) else loss)
        if step >= config.warmup_steps:
            step_times.append(elapsed)
    finished_at = time.time()

    step_stats = stats.describe(step_times)
    document = {
        "kind": results.RANK_RESULT,
        "schema_version": results.SCHEMA_VERSION,
        "run_id": config.run_id,
        "rank": hvd.rank(),
        "size": hvd.size(),
        "local_rank": hvd.local_rank(),
        "local_size": hvd.local_size(),
        "host": socket.gethostname(),
        "workload": {
            "model": config.model, "data": "synthetic", "batch_size": config.batch_size,
            "image_size": config.image_size, "num_classes": classes, "precision": config.precision,
            "warmup_steps": config.warmup_steps, "measured_steps": config.measured_steps,
        },
        "metrics": {
            "images_per_sec": config.batch_size * len(step_times) / sum(step_times),
            "step_time_s": step_stats.as_dict(),
            "time_to_first_step_s": first_step_done - (config.launched_at or PROCESS_STARTED_AT),
            "launched_at": config.launched_at,
            "started_at": PROCESS_STARTED_AT,
            "finished_at": finished_at,
        },
        "step_times_s": step_times,
        "losses": losses,
        "provenance": provenance.collect(tf, hvd, stack=config.stack, launcher=config.launcher,
                                         network=config.network, git_commit=config.git_commit),
    }
    results.save(results.RANK_RESULT, document, config.output_dir / f"rank-{hvd.rank():05d}.json")
    hvd.shutdown()
    return document


def launched_at_from_env() -> float | None:
    value = os.environ.get("BENCHRUNNER_LAUNCHED_AT")
    return float(value) if value else None
