#!/usr/bin/env python3
"""Harness overhead: the same model, batch and steps trained by the plain Horovod tf.keras loop and by
`benchrunner train`, each trial in a fresh process, interleaved, in one run; prints their ratio.

Run where TensorFlow, Horovod and benchrunner are installed (a node's environment): `make bench`.
Target: benchrunner's reported throughput is at least 0.98 of the bare loop's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 0.98


def bare_loop(args: argparse.Namespace) -> float:
    """The plain Horovod TensorFlow 2 loop (hvd.init, DistributedGradientTape, broadcast after the
    first step), timed as Horovod's own synthetic benchmark times it: all measured steps as one block,
    synchronised once at the end. No per-step timing, loss recording, input iterator or result file."""
    import horovod.tensorflow as hvd  # noqa: PLC0415 - the nodes' environment has them, the control host not
    import tensorflow as tf  # noqa: PLC0415 - likewise

    from benchrunner import models  # noqa: PLC0415 - same network; the loop around it is what is compared

    hvd.init()
    model = models.build(tf, args.model, args.image_size, args.num_classes)
    images = tf.random.uniform([args.batch_size, args.image_size, args.image_size, 3], seed=0)
    labels = tf.random.uniform([args.batch_size], maxval=args.num_classes, dtype=tf.int64, seed=0)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer = tf.keras.optimizers.SGD(learning_rate=0.01 * hvd.size(), momentum=0.9)

    @tf.function
    def step(first_batch: bool):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        tape = hvd.DistributedGradientTape(tape)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        if first_batch:
            hvd.broadcast_variables(model.variables, root_rank=0)
            hvd.broadcast_variables(optimizer.variables(), root_rank=0)
        return loss

    for warmup in range(args.warmup_steps):
        step(warmup == 0)
    float(step(False))
    started = time.perf_counter()
    for _ in range(args.steps):
        loss = step(False)
    float(loss)
    return args.batch_size * args.steps / (time.perf_counter() - started)


def _mpi_singleton_env() -> dict[str, str]:
    env = dict(os.environ)
    if os.geteuid() == 0:
        # Horovod's MPI singleton refuses root unless told otherwise.
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


def harness(args: argparse.Namespace, trial: int) -> float:
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, "-m", "benchrunner", "train", "--run-id", f"overhead-{trial}", "--output-dir", out,
                   "--model", args.model, "--batch-size", str(args.batch_size), "--image-size", str(args.image_size),
                   "--num-classes", str(args.num_classes), "--warmup-steps", str(args.warmup_steps),
                   "--measured-steps", str(args.steps)]
        subprocess.run(command, check=True, capture_output=True, env=_mpi_singleton_env())
        document = json.loads(next(Path(out).glob("rank-*.json")).read_text())
        return document["metrics"]["images_per_sec"]


def bare_in_subprocess(args: argparse.Namespace) -> float:
    command = [sys.executable, __file__, "--bare-loop-only", "--model", args.model, "--batch-size", str(args.batch_size),
               "--image-size", str(args.image_size), "--num-classes", str(args.num_classes),
               "--warmup-steps", str(args.warmup_steps), "--steps", str(args.steps)]
    out = subprocess.run(command, check=True, capture_output=True, text=True, env=_mpi_singleton_env()).stdout
    return float(out.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--model", default="small_cnn")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--num-classes", type=int, default=10)
    parser.add_argument("--warmup-steps", type=int, default=10)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--bare-loop-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare_loop_only:
        print(bare_loop(args))
        return 0

    rows = []
    for trial in range(args.repeats):
        # Alternate which side goes first so drift in the machine's speed hits both.
        if trial % 2 == 0:
            bare, wrapped = bare_in_subprocess(args), harness(args, trial)
        else:
            wrapped, bare = harness(args, trial), bare_in_subprocess(args)
        rows.append((bare, wrapped))
        print(f"trial {trial + 1}: bare loop {bare:9.1f} images/s   benchrunner {wrapped:9.1f} images/s   "
              f"ratio {wrapped / bare:.3f}", flush=True)
    ratio = statistics.median(w / b for b, w in rows)
    print(f"{args.model}, batch {args.batch_size}, {args.image_size}px, {args.steps} steps after {args.warmup_steps} warmup,"
          f" {args.repeats} interleaved trials")
    print(f"median ratio benchrunner / bare loop: {ratio:.3f} (target >= {TARGET}: {'met' if ratio >= TARGET else 'NOT met'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
