"""TensorFlow 2.15 with Horovod 0.28.1: the workload the project was founded on.

Importing this package imports neither TensorFlow nor Horovod: its settings are read and checked where they are not
installed; only a rank, through `train` or `allreduce`, loads them (training, collectives).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from benchrunner.frameworks import MAX_WORKERS_PER_RANK

NAME = "tensorflow-horovod"
# Keras builds the image models; no transformer is written for TensorFlow.
KINDS = ("image",)
# tf.data.AUTOTUNE, spelled as a word in settings; the pipeline passes tf.data.AUTOTUNE.
AUTOTUNE = "autotune"
CACHE_IN_MEMORY = "memory"
MIB = 1024 * 1024
# Horovod's autotuner (horovod/common/parameter_manager.cc) searches fusion buffers of 0 to 64 MiB and cycle times of
# 1 to 100 ms: 16 and 10 times those are far beyond any tuned value, and a buffer of each GPU's memory or a cycle that
# stalls every allreduce above them.
MAX_FUSION_THRESHOLD_MB = 1024
MAX_CYCLE_TIME_MS = 1000
# Settings that shape the tf.data pipeline of real data; synthetic data has no pipeline to shape.
PIPELINE_KEYS = ("cache", "prefetch_to_device", "num_parallel_calls", "interleave_cycle_length")


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass(frozen=True)
class Settings:
    """What only TensorFlow and Horovod have: XLA, the tf.data pipeline of real data, Horovod's knobs."""

    xla: bool = field(default=False, metadata=_help("XLA auto-clustering of the model's computation"))
    # The decoded, resized images are cached (Dataset.cache(filename)), before the random flip and shuffle.
    cache: str | None = field(default=None, metadata=_help(
        f"real data: cache decoded images in {CACHE_IN_MEMORY!r} or in files under this absolute folder"))
    # tf.data.experimental.prefetch_to_device onto the rank's GPU, as the pipeline's last step.
    prefetch_to_device: bool = field(default=False, metadata=_help("real data: prefetch batches onto the rank's GPU"))
    num_parallel_calls: int | str = field(default=AUTOTUNE, metadata=_help(
        f"real data: parallel decode and batch calls, {AUTOTUNE!r} or a number"))
    # For tfrecord data, the shard files read at once (Dataset.interleave's cycle_length).
    interleave_cycle_length: int | str = field(default=AUTOTUNE, metadata=_help(
        f"tfrecord data: shard files read at once, {AUTOTUNE!r} or a number"))
    # None leaves Horovod's own default (or the launcher's environment) in place.
    fusion_threshold_mb: int | None = field(default=None, metadata=_help(
        "Horovod tensor fusion buffer in MiB (0 disables fusion)"))
    cycle_time_ms: float | None = field(default=None, metadata=_help("Horovod cycle time in ms"))
    fp16_allreduce: bool = field(default=False, metadata=_help("compress gradients to float16 for the allreduce"))
    hierarchical_allreduce: bool = field(default=False, metadata=_help("Horovod's hierarchical allreduce"))

    def problems(self, workload: Any) -> list[str]:
        problems = []
        if self.fusion_threshold_mb is not None and not 0 <= self.fusion_threshold_mb <= MAX_FUSION_THRESHOLD_MB:
            problems.append(f"fusion threshold must be from 0 to {MAX_FUSION_THRESHOLD_MB} MiB (got "
                            f"{self.fusion_threshold_mb})")
        # Written so that NaN fails too: every comparison with NaN is false.
        if self.cycle_time_ms is not None and not 0 < self.cycle_time_ms <= MAX_CYCLE_TIME_MS:
            problems.append(f"cycle time must be a number > 0 and at most {MAX_CYCLE_TIME_MS} ms (got "
                            f"{self.cycle_time_ms})")
        for key in ("num_parallel_calls", "interleave_cycle_length"):
            value = getattr(self, key)
            if value != AUTOTUNE and not (isinstance(value, int) and 1 <= value <= MAX_WORKERS_PER_RANK):
                problems.append(f"{key.replace('_', ' ')} must be {AUTOTUNE!r} or an integer from 1 to "
                                f"{MAX_WORKERS_PER_RANK} per rank (got {value!r})")
        if self.cache not in (None, CACHE_IN_MEMORY) and not self.cache.startswith("/"):
            problems.append(f"cache must be {CACHE_IN_MEMORY!r} or an absolute folder (got {self.cache!r}); leave it "
                            "unset for none")
        default = Settings()
        tuned = [key for key in PIPELINE_KEYS if getattr(self, key) != getattr(default, key)]
        if workload.data == "synthetic" and tuned:
            problems.append(f"{', '.join(tuned)} tune the input pipeline of real data; synthetic data has none")
        elif workload.data == "images" and "interleave_cycle_length" in tuned:
            problems.append("interleave cycle length is the number of TFRecord files read at once: tfrecord data "
                            "only")
        cycle, calls = self.interleave_cycle_length, self.num_parallel_calls
        if workload.data == "tfrecord" and isinstance(cycle, int) and isinstance(calls, int) and calls > cycle:
            # TF 2.15's interleave refuses it (InvalidArgumentError): with a fixed cycle, at most one call per file.
            problems.append(f"num parallel calls {calls} exceeds the interleave cycle length {cycle}: tf.data allows "
                            "no more parallel calls than files in the cycle")
        return problems

    def horovod_environment(self) -> dict[str, str]:
        """Horovod reads these at init; set by each rank itself so every launcher delivers them alike."""
        env = {}
        if self.fusion_threshold_mb is not None:
            env["HOROVOD_FUSION_THRESHOLD"] = str(self.fusion_threshold_mb * MIB)
        if self.cycle_time_ms is not None:
            env["HOROVOD_CYCLE_TIME"] = f"{self.cycle_time_ms:g}"
        if self.hierarchical_allreduce:
            env["HOROVOD_HIERARCHICAL_ALLREDUCE"] = "1"
        return env


# What benchrunner did before these settings existed and were recorded (results of schema v2 made before them lack
# the keys): no cache, no prefetch to the device, and tf.data choosing its parallelism.
BEFORE_RECORDED: dict[str, Any] = {key: getattr(Settings(), key) for key in PIPELINE_KEYS}


def model_settings(record: dict[str, Any]) -> list[str]:
    """How the model ran, as a run's page names it."""
    return ["XLA"] if record.get("xla") else []


def input_settings(record: dict[str, Any]) -> str:
    """Real data's tf.data pipeline, as a run's page names it."""
    return (f"cache {record['cache'] or 'none'}, prefetch to device {'yes' if record['prefetch_to_device'] else 'no'}, "
            f"parallel calls {record['num_parallel_calls']}"
            + (f", interleave cycle {record['interleave_cycle_length']}" if record["data"] == "tfrecord" else ""))


def versions(provenance: dict[str, Any]) -> dict[str, str | None]:
    """What a run's summary names of this framework's build, from a rank's provenance."""
    return {
        "tensorflow": provenance["tensorflow"]["version"],
        "horovod": provenance["horovod"]["version"],
        "horovod_controller": provenance["horovod"]["controller"],
        "tensorflow_built_cuda": provenance["tensorflow"].get("cuda"),
        "tensorflow_built_cudnn": provenance["tensorflow"].get("cudnn"),
        "nccl": provenance["horovod"].get("nccl"),
    }


def train(workload: Any, settings: Settings, context: Any) -> dict[str, Any]:
    from benchrunner.frameworks.tensorflow_horovod import training  # noqa: PLC0415 - imports TensorFlow when it runs

    return training.run(workload, context)


def allreduce(context: Any, min_bytes: int, max_bytes: int) -> dict[str, Any]:
    from benchrunner.frameworks.tensorflow_horovod import collectives  # noqa: PLC0415 - likewise

    return collectives.run(context, min_bytes, max_bytes)


def rank_environment(first_host: str | None) -> dict[str, str]:
    """Nothing: Horovod finds its peers through MPI or Gloo, whichever launcher started the ranks."""
    return {}
