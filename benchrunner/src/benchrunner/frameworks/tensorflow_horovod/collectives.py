"""Horovod allreduce sweep over message sizes: time, algorithm bandwidth and bus bandwidth.

Bus bandwidth follows nccl-tests: busbw = algbw * 2(n-1)/n, the rate each link must carry for a ring
allreduce, comparable across rank counts; so a gap between stacks can be traced to the network.
"""

from __future__ import annotations

import datetime as dt
import socket
import time
from pathlib import Path
from typing import Any

from benchrunner import results, watchdog
from benchrunner.frameworks.tensorflow_horovod import provenance
from benchrunner.frameworks.tensorflow_horovod.training import init_horovod
from benchrunner.sweep import bus_bandwidth, iterations_for, sizes
from benchrunner.train import RunContext
from benchrunner.workload import Workload


def back_to_back(tf: Any, hvd: Any, count: int) -> Any:
    """A function running `count` allreduces one after the other on the device, each on the last one's output.

    As nccl-tests times a collective: no copy to the host between operations (a `.numpy()` per call timed a
    device-to-host copy of the whole message), one synchronisation after the last. Average keeps the values
    finite however many ranks and iterations; the chain keeps TensorFlow from running two at once.
    """

    @tf.function
    def chain(tensor: Any) -> Any:
        for _ in range(count):
            tensor = hvd.allreduce(tensor, op=hvd.Average)
        return tensor

    return chain


def timed(tf: Any, chain: Any, tensor: Any) -> float:
    """Seconds for one call of chain, synchronised by reading back a single element."""
    started = time.perf_counter()
    tf.reshape(chain(tensor), [-1])[0].numpy()
    return time.perf_counter() - started


def seconds_per_operation(tf: Any, hvd: Any, size: int) -> tuple[int, float]:
    """(iterations, seconds per allreduce of `size` bytes) on this rank."""
    tensor = tf.ones([size // 4], dtype=tf.float32)
    count = iterations_for(size)
    chain = back_to_back(tf, hvd, count)
    # The first call traces the function and warms the collective up; it is not timed.
    timed(tf, chain, tensor)
    return count, timed(tf, chain, tensor) / count


def run(context: RunContext, min_bytes: int, max_bytes: int) -> dict[str, Any]:
    tf, hvd = init_horovod(Workload())
    ranks = hvd.size()
    points = []
    for size in sizes(min_bytes, max_bytes):
        count, mine = seconds_per_operation(tf, hvd, size)
        # The slowest rank sets the collective's time.
        seconds = float(hvd.allreduce(tf.constant(mine, dtype=tf.float64), op=hvd.Max, name=f"time.{size}").numpy())
        algbw = size / seconds
        points.append({"bytes": size, "iterations": count, "time_s": seconds, "algbw_bytes_per_s": algbw,
                       "busbw_bytes_per_s": bus_bandwidth(algbw, ranks)})
        watchdog.advance()
    document = {
        "kind": results.ALLREDUCE_RESULT,
        "schema_version": results.SCHEMA_VERSION,
        "run_id": context.run_id,
        "ranks": ranks,
        "host": socket.gethostname(),
        "measured_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "points": points,
        "provenance": provenance.collect(tf, hvd, context),
    }
    if hvd.rank() == 0:
        results.save(results.ALLREDUCE_RESULT, document, Path(context.output_dir) / results.SWEEP_JSON)
    hvd.shutdown()
    return document
