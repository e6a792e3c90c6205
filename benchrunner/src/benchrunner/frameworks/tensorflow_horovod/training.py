"""The training workload in TensorFlow and Horovod: the founding path, as Horovod's own synthetic benchmark trains."""

from __future__ import annotations

import os
import socket
import time
from typing import Any

from benchrunner import results
from benchrunner.frameworks.tensorflow_horovod import data, models, provenance
from benchrunner.rank_env import GPU_ENV
from benchrunner.train import RunContext, learning_rate, mark, measure, measurements
from benchrunner.workload import Workload


def init_horovod(workload: Workload) -> tuple[Any, Any]:
    """Import and start TensorFlow and Horovod with the workload's knobs in place."""
    # Horovod reads its knobs from the environment at init; an explicit workload setting wins.
    os.environ.update(workload.settings.horovod_environment())
    import horovod.tensorflow as hvd  # noqa: PLC0415 - heavy, only where training happens
    import tensorflow as tf  # noqa: PLC0415 - likewise

    mark("framework_imported")
    hvd.init()
    mark("ranks_joined")
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
    if workload.lr_schedule == "constant" and not workload.lr_warmup_steps:
        # A plain number, as Horovod's synthetic benchmark passes it: no schedule evaluated at every step.
        rate: Any = learning_rate(workload, size, 0)
    else:
        class Schedule(tf.keras.optimizers.schedules.LearningRateSchedule):
            def __call__(self, step: Any) -> Any:
                return learning_rate(workload, size, tf.cast(step, tf.float32), tf.math)

            def get_config(self) -> dict[str, Any]:
                return workload.record()

        rate = Schedule()
    if workload.optimizer == "adam":
        optimizer = tf.keras.optimizers.Adam(learning_rate=rate, beta_1=workload.momentum)
    else:
        optimizer = tf.keras.optimizers.SGD(learning_rate=rate, momentum=workload.momentum)
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
    if workload.settings.xla:
        # Auto-clustering compiles the model's ops and leaves Horovod's collectives outside XLA.
        tf.config.optimizer.set_jit("autoclustering")

    model = models.build(tf, workload.model, workload.image_size, workload.classes)
    if workload.multi_label:
        loss_fn = tf.keras.losses.BinaryCrossentropy(from_logits=True)
    else:
        loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer = _optimizer(tf, workload, hvd.size())
    scaled = workload.precision == "mixed_float16"
    compression = hvd.Compression.fp16 if workload.settings.fp16_allreduce else hvd.Compression.none
    batches = data.batches(tf, workload, hvd.rank(), hvd.size())
    mark("model_ready")

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

    def step(number: int, batch: Any) -> float:
        images, labels = batch
        return float(train_step(images, labels, number == 0))  # float() waits for the step to finish

    def trace_steady_state(batch: Any) -> None:
        # Traced now, so tracing is never inside a measured step whatever the warmup.
        train_step.get_concrete_function(*batch, False)

    measured = measure(workload, lambda: next(batches), step, trace_steady_state)
    finished_at = time.time()
    document = {
        "kind": results.RANK_RESULT,
        "schema_version": results.version_of(results.RANK_RESULT),
        "run_id": context.run_id,
        "rank": hvd.rank(),
        "size": hvd.size(),
        "local_rank": hvd.local_rank(),
        "local_size": hvd.local_size(),
        "host": socket.gethostname(),
        "workload": workload.record(),
        "framework": workload.framework,
        "model": {"name": workload.model, "parameters": int(model.count_params()), "source": "keras",
                  "kind": workload.kind},
        **measurements(workload, measured, context, finished_at),
        "device": {
            "asked_gpu": os.environ.get(GPU_ENV) == "1",
            # Where the model's weights live, so where the steps ran: /.../device:GPU:0, or CPU:0.
            "trained_on": model.trainable_variables[0].device,
            "gpus_visible": len(tf.config.list_physical_devices("GPU")),
        },
        "provenance": provenance.collect(tf, hvd, context),
    }
    results.save(results.RANK_RESULT, document, context.output_dir / f"rank-{hvd.rank():05d}.json")
    hvd.shutdown()
    return document
