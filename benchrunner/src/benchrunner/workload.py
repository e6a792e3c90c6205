"""What is trained and how: the settings that reach every rank unchanged, whatever launched it."""

from __future__ import annotations

import argparse
import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from benchrunner import models

DATA_MODES = ("synthetic", "images", "tfrecord")
PRECISIONS = ("fp32", "mixed_float16", "mixed_bfloat16")
MIB = 1024 * 1024


@dataclass(frozen=True)
class Workload:
    model: str = "small_cnn"
    # synthetic: random tensors made once on the device; images: a ChestX-ray14-style folder
    # (PNG files and a labels CSV); tfrecord: TFRecord shards of the same.
    data: str = "synthetic"
    data_dir: str | None = None
    batch_size: int = 32
    image_size: int = 32
    num_classes: int = 10
    precision: str = "fp32"
    xla: bool = False
    # The peers' windows (Horovod's synthetic benchmark, tf_cnn_benchmarks): ~100 measured batches after >= 10 warmup.
    warmup_steps: int = 10
    measured_steps: int = 100
    learning_rate: float = 0.01
    # Horovod knobs. None leaves Horovod's own default (or the launcher's environment) in place.
    fusion_threshold_mb: int | None = None
    cycle_time_ms: float | None = None
    fp16_allreduce: bool = False
    hierarchical_allreduce: bool = False

    def validate(self) -> None:
        problems = []
        if self.model not in models.MODELS:
            problems.append(f"model {self.model!r} is not one of {', '.join(sorted(models.MODELS))}")
        if self.data not in DATA_MODES:
            problems.append(f"data {self.data!r} is not one of {', '.join(DATA_MODES)}")
        if self.data != "synthetic" and not self.data_dir:
            problems.append(f"data {self.data!r} needs a data directory")
        if self.data_dir is not None and not self.data_dir.startswith("/"):
            # Ranks start in whatever folder their launcher chose: a relative folder means a different one on each.
            problems.append(f"data directory {self.data_dir!r} must be an absolute path")
        if self.precision not in PRECISIONS:
            problems.append(f"precision {self.precision!r} is not one of {', '.join(PRECISIONS)}")
        if self.batch_size < 1 or self.measured_steps < 1:
            problems.append("batch size and measured steps must be >= 1")
        if self.warmup_steps < 1:
            # The first step traces the graph and broadcasts rank 0's weights: never a steady-state step.
            problems.append("warmup steps must be >= 1")
        smallest = models.MIN_IMAGE_SIZE.get(self.model, 8)
        if self.image_size < smallest:
            problems.append(f"image size {self.image_size} is below the {smallest} px {self.model} accepts")
        if self.num_classes < 2:
            problems.append("classes must be >= 2")
        # Written so that NaN fails too: every comparison with NaN is false.
        if not (math.isfinite(self.learning_rate) and self.learning_rate > 0):
            problems.append(f"learning rate must be a finite number > 0 (got {self.learning_rate})")
        if self.fusion_threshold_mb is not None and not self.fusion_threshold_mb >= 0:
            problems.append(f"fusion threshold must be >= 0 MiB (got {self.fusion_threshold_mb})")
        if self.cycle_time_ms is not None and not (math.isfinite(self.cycle_time_ms) and self.cycle_time_ms > 0):
            problems.append(f"cycle time must be a finite number > 0 ms (got {self.cycle_time_ms})")
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def multi_label(self) -> bool:
        """Real data is ChestX-ray14-style (14 independent findings), as is CheXNet on any data."""
        return self.model in models.MULTI_LABEL or self.data != "synthetic"

    @property
    def classes(self) -> int:
        return models.CHEXNET_FINDINGS if self.multi_label else self.num_classes

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

    def record(self) -> dict[str, Any]:
        """The workload as results store it."""
        document = asdict(self)
        document["num_classes"] = self.classes
        return document

    def to_argv(self) -> list[str]:
        """Command-line options that make `from_args` build this same workload."""
        argv: list[str] = []
        default = Workload()
        for field in fields(self):
            value = getattr(self, field.name)
            if value == getattr(default, field.name):
                continue
            flag = "--" + field.name.replace("_", "-")
            if isinstance(value, bool):
                argv.append(flag if value else "--no-" + flag[2:])
            else:
                argv += [flag, str(value)]
        return argv

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Workload:
        return cls(**{field.name: getattr(args, field.name) for field in fields(cls)})

    @classmethod
    def from_mapping(cls, values: dict[str, Any]) -> Workload:
        known = {field.name for field in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown workload settings: {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        return cls(**values)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The workload options shared by `train`, `allreduce` and `launch`."""
    d = Workload()
    group = parser.add_argument_group("workload (identical on every rank and every launcher)")
    group.add_argument("--model", default=d.model, help=f"one of {', '.join(sorted(models.MODELS))}")
    group.add_argument("--data", default=d.data, choices=DATA_MODES,
                       help="synthetic tensors, or a dataset made by 'benchrunner dataset' (images or tfrecord)")
    group.add_argument("--data-dir", default=d.data_dir, help="the dataset folder, the same path on every node")
    group.add_argument("--batch-size", type=int, default=d.batch_size, help="images per rank per step")
    group.add_argument("--image-size", type=int, default=d.image_size, help="input height and width in pixels")
    group.add_argument("--num-classes", type=int, default=d.num_classes,
                       help="classes for single-label synthetic data (multi-label data has 14 findings)")
    group.add_argument("--precision", choices=PRECISIONS, default=d.precision)
    group.add_argument("--xla", action=argparse.BooleanOptionalAction, default=d.xla,
                       help="XLA auto-clustering of the model's computation")
    group.add_argument("--warmup-steps", type=int, default=d.warmup_steps, help="steps run but not measured")
    group.add_argument("--measured-steps", type=int, default=d.measured_steps)
    group.add_argument("--learning-rate", type=float, default=d.learning_rate,
                       help="per rank; scaled by the number of ranks")
    group.add_argument("--fusion-threshold-mb", type=int, default=d.fusion_threshold_mb,
                       help="Horovod tensor fusion buffer in MiB (0 disables fusion)")
    group.add_argument("--cycle-time-ms", type=float, default=d.cycle_time_ms, help="Horovod cycle time in ms")
    group.add_argument("--fp16-allreduce", action=argparse.BooleanOptionalAction, default=d.fp16_allreduce,
                       help="compress gradients to float16 for the allreduce")
    group.add_argument("--hierarchical-allreduce", action=argparse.BooleanOptionalAction,
                       default=d.hierarchical_allreduce, help="Horovod's hierarchical allreduce")
