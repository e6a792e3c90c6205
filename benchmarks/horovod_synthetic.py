#!/usr/bin/env python3
"""The peer: Horovod's own synthetic benchmark method, as examples/tensorflow2/tensorflow2_synthetic_benchmark.py
in Horovod 0.28.1 measures (read from that release; written here, not copied):

- plain SGD at learning rate 0.01 (no momentum, not scaled by ranks), sparse categorical cross-entropy;
- one step with the broadcast of rank 0's variables, then 10 warmup batches;
- 10 iterations of 10 batches, each iteration timed as one block (timeit); images/s per device is the mean over the
  iterations, reported with 1.96 standard deviations.

The network is benchrunner's (benchrunner.frameworks.tensorflow_horovod.models), so that only the loop around it
differs. Rank 0 prints one JSON line: the per-iteration images/s of this device.
"""

from __future__ import annotations

import argparse
import json
import timeit


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--model", default="small_cnn")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--num-classes", type=int, default=10)
    parser.add_argument("--num-warmup-batches", type=int, default=10)
    parser.add_argument("--num-batches-per-iter", type=int, default=10)
    parser.add_argument("--num-iters", type=int, default=10)
    args = parser.parse_args()

    import horovod.tensorflow as hvd  # noqa: PLC0415 - the nodes' environment has them, the control host not
    import tensorflow as tf  # noqa: PLC0415 - likewise

    from benchrunner.frameworks.tensorflow_horovod import models  # noqa: PLC0415 - the same network as benchrunner's

    hvd.init()
    model = models.build(tf, args.model, args.image_size, args.num_classes)
    optimizer = tf.optimizers.SGD(0.01)
    data = tf.random.uniform([args.batch_size, args.image_size, args.image_size, 3])
    target = tf.random.uniform([args.batch_size, 1], minval=0, maxval=args.num_classes, dtype=tf.int64)
    # benchrunner's networks end in logits; the upstream script's keras application ends in a softmax.
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(first_batch: bool) -> None:
        with tf.GradientTape() as tape:
            loss = loss_fn(target, model(data, training=True))
        tape = hvd.DistributedGradientTape(tape)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        if first_batch:
            hvd.broadcast_variables(model.variables, root_rank=0)
            hvd.broadcast_variables(optimizer.variables(), root_rank=0)

    step(first_batch=True)
    timeit.timeit(lambda: step(first_batch=False), number=args.num_warmup_batches)
    rates = []
    for _ in range(args.num_iters):
        seconds = timeit.timeit(lambda: step(first_batch=False), number=args.num_batches_per_iter)
        rates.append(args.batch_size * args.num_batches_per_iter / seconds)
    if hvd.rank() == 0:
        print(json.dumps({"images_per_sec_per_device": rates, "size": hvd.size()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
