"""What is trained and how: the settings that reach every rank unchanged, whatever launched it.

A workload is the settings every framework shares (model, data, batch, precision, steps, optimizer) plus its
framework's own (`settings`, a dataclass the framework module declares): a setting of another framework is refused
by name. Of the input's shape, an image model takes the image settings and a text model the sequence length; the other
kind's are refused by name too, and neither is recorded for the other."""

from __future__ import annotations

import argparse
import math
import types
import typing
from dataclasses import MISSING, asdict, dataclass, fields
from functools import cache
from typing import Any

from benchrunner import frameworks, models

DATA_MODES = ("synthetic", "images", "tfrecord", "tokens")
# The data modes that read a dataset of each kind; synthetic data is made for either.
KIND_DATA = {"image": ("images", "tfrecord"), "text": ("tokens",)}
# The settings that shape one kind's input, refused (and not recorded) for the other kind's models.
KIND_SETTINGS = {"image": ("image_size", "num_classes"), "text": ("sequence_length",)}
# Llama 3.1 trains on up to 131,072 tokens a sequence; far beyond it a value is a typo, not a setting.
MAX_SEQUENCE_LENGTH = 1 << 20
# More micro-batches per optimizer step than this is a typo: the effective batch would dwarf any published recipe.
MAX_ACCUMULATION_STEPS = 4096
PRECISIONS = ("fp32", "mixed_float16", "mixed_bfloat16")
# Keras 2.15's tf.keras.optimizers and torch.optim alike: SGD (momentum=0 is plain gradient descent), Adam, and AdamW
# (Adam with decoupled weight decay, as transformers are pretrained).
OPTIMIZERS = ("sgd", "adam", "adamw")
# linear: the rate times the number of ranks (Goyal et al. 2017, as Horovod's examples scale it); none: as given.
LR_SCALINGS = ("linear", "none")
LR_SCHEDULES = ("constant", "cosine")
# Named sets of settings, recorded by name. horovod_synthetic is how Horovod 0.28.1's
# examples/tensorflow2/tensorflow2_synthetic_benchmark.py trains: `tf.optimizers.SGD(0.01)`, i.e. Keras SGD
# with its default momentum 0.0 and a constant rate of 0.01 that is not scaled by the number of ranks.
# Model, batch, image size and ranks are the comparison's own axes and stay the point's.
PRESETS: dict[str, dict[str, Any]] = {
    "horovod_synthetic": {"optimizer": "sgd", "momentum": 0.0, "learning_rate": 0.01, "lr_scaling": "none",
                          "lr_schedule": "constant", "lr_warmup_steps": 0},
}


@dataclass(frozen=True)
class Workload:
    model: str = "small_cnn"
    # synthetic: random tensors made once on the device; images: a ChestX-ray14-style folder
    # (PNG files and a labels CSV); tfrecord: TFRecord shards of the same; tokens: a token folder (benchrunner.tokens).
    data: str = "synthetic"
    data_dir: str | None = None
    # Samples per rank per micro-batch: images, or sequences of sequence_length tokens.
    batch_size: int = 32
    image_size: int = 32
    num_classes: int = 10
    sequence_length: int = 256
    # Micro-batches whose gradients add up to one optimizer step.
    gradient_accumulation_steps: int = 1
    precision: str = "fp32"
    # The peers' windows (Horovod's synthetic benchmark, tf_cnn_benchmarks): ~100 measured batches after >= 10 warmup.
    warmup_steps: int = 10
    measured_steps: int = 100
    learning_rate: float = 0.01
    # A name from PRESETS: its settings apply, and a workload naming it must agree with every one of them.
    preset: str | None = None
    optimizer: str = "sgd"
    # SGD's momentum (0 is plain gradient descent); for adam, Adam's beta_1 (its first moment's decay), whose
    # Keras default is also 0.9.
    momentum: float = 0.9
    # AdamW's decoupled weight decay (adamw only).
    weight_decay: float = 0.0
    lr_scaling: str = "linear"
    # Steps count from the first warmup step. Warmup ramps the rate linearly from the one-rank rate to the scaled
    # one (Goyal et al. 2017; Horovod's LearningRateWarmupCallback ramps alike); cosine then decays it to 0 at
    # the run's last step.
    lr_schedule: str = "constant"
    lr_warmup_steps: int = 0
    # The framework (a module of benchrunner.frameworks) and its own settings; None: its defaults.
    framework: str = frameworks.DEFAULT
    settings: Any = None

    def __post_init__(self) -> None:
        if self.settings is None and self.framework in frameworks.names():
            object.__setattr__(self, "settings", frameworks.get(self.framework).Settings())

    def common(self) -> dict[str, Any]:
        """The settings every framework shares, by name."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("framework", "settings")}

    def validate(self) -> None:
        if self.framework not in frameworks.names():
            raise ValueError(f"framework {self.framework!r} is not one of {', '.join(frameworks.names())}")
        type_problems = _type_problems(self.common(), _hints(Workload)) + _type_problems(
            asdict(self.settings), _hints(type(self.settings)))
        if type_problems:
            # Ranges mean nothing for a value of the wrong type (and would raise comparing "32" with 1).
            raise ValueError("; ".join(type_problems))
        problems = []
        if self.model not in models.names():
            # Nothing else can be judged of an unknown model's input.
            raise ValueError(f"model {self.model!r} is not one of {', '.join(models.names())}")
        if self.data not in DATA_MODES:
            problems.append(f"data {self.data!r} is not one of {', '.join(DATA_MODES)}")
        problems += self._kind_problems()
        if self.data != "synthetic" and not self.data_dir:
            problems.append(f"data {self.data!r} needs a data directory")
        if self.data_dir is not None and not self.data_dir.startswith("/"):
            # Ranks start in whatever folder their launcher chose: a relative folder means a different one on each.
            problems.append(f"data directory {self.data_dir!r} must be an absolute path")
        if self.precision not in PRECISIONS:
            problems.append(f"precision {self.precision!r} is not one of {', '.join(PRECISIONS)}")
        if self.batch_size < 1 or self.measured_steps < 1:
            problems.append("batch size and measured steps must be >= 1")
        if not 1 <= self.gradient_accumulation_steps <= MAX_ACCUMULATION_STEPS:
            problems.append(f"gradient accumulation steps must be from 1 to {MAX_ACCUMULATION_STEPS} (got "
                            f"{self.gradient_accumulation_steps})")
        if self.warmup_steps < 1:
            # The first step traces the graph and broadcasts rank 0's weights: never a steady-state step.
            problems.append("warmup steps must be >= 1")
        # Written so that NaN fails too: every comparison with NaN is false.
        if not (math.isfinite(self.learning_rate) and self.learning_rate > 0):
            problems.append(f"learning rate must be a finite number > 0 (got {self.learning_rate})")
        problems += self._training_problems() + self.settings.problems(self)
        if problems:
            raise ValueError("; ".join(problems))

    def _kind_problems(self) -> list[str]:
        """The input settings of the model's kind, and the other kind's left at their defaults."""
        kind, problems = self.kind, []
        named = f"{self.model} is {'an' if kind == 'image' else 'a'} {kind} model"
        builders = models.frameworks_for(self.model)
        if self.framework not in builders:
            problems.append(f"{named}, which {self.framework} does not build: use "
                            f"{' or '.join(builders)}")
        default = Workload(framework=self.framework)
        for other, keys in KIND_SETTINGS.items():
            given = [key for key in keys if other != kind and getattr(self, key) != getattr(default, key)]
            if given:
                problems.append(f"{', '.join(given)} shape{'s' if len(given) == 1 else ''} {other} models' input; "
                                f"{named}: leave {'it' if len(given) == 1 else 'them'} out")
        other_data = [mode for other, modes in KIND_DATA.items() if other != kind for mode in modes]
        if self.data in other_data:
            problems.append(f"data {self.data!r} feeds {'image' if kind == 'text' else 'text'} models; {named}: use "
                            f"data 'synthetic' or {' or '.join(map(repr, KIND_DATA[kind]))}")
        if kind == "image":
            smallest = models.min_image_size(self.model)
            if self.image_size < smallest:
                problems.append(f"image size {self.image_size} is below the {smallest} px {self.model} accepts")
            if self.num_classes < 2:
                problems.append("classes must be >= 2")
        elif not 1 <= self.sequence_length <= MAX_SEQUENCE_LENGTH:
            problems.append(f"sequence length must be from 1 to {MAX_SEQUENCE_LENGTH} tokens (got "
                            f"{self.sequence_length})")
        elif self.sequence_length > models.max_sequence_length(self.model):
            problems.append(f"sequence length {self.sequence_length} is longer than the "
                            f"{models.max_sequence_length(self.model)} tokens {self.model} takes")
        return problems

    def _training_problems(self) -> list[str]:
        problems = []
        if self.optimizer not in OPTIMIZERS:
            problems.append(f"optimizer {self.optimizer!r} is not one of {', '.join(OPTIMIZERS)}")
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            problems.append(f"weight decay must be a finite number >= 0 (got {self.weight_decay})")
        elif self.weight_decay and self.optimizer != "adamw":
            problems.append(f"weight decay is AdamW's; optimizer {self.optimizer} has none: use optimizer adamw or "
                            "leave weight decay out")
        # Keras refuses momentum outside [0, 1]; 1 never forgets a gradient, so it is refused here too.
        if not (0 <= self.momentum < 1):
            problems.append(f"momentum must be a number >= 0 and < 1 (got {self.momentum})")
        if self.lr_scaling not in LR_SCALINGS:
            problems.append(f"lr scaling {self.lr_scaling!r} is not one of {', '.join(LR_SCALINGS)}")
        if self.lr_schedule not in LR_SCHEDULES:
            problems.append(f"lr schedule {self.lr_schedule!r} is not one of {', '.join(LR_SCHEDULES)}")
        total = self.warmup_steps + self.measured_steps
        if self.lr_warmup_steps < 0:
            problems.append(f"lr warmup steps must be >= 0 (got {self.lr_warmup_steps})")
        elif self.lr_warmup_steps >= total:
            problems.append(f"lr warmup of {self.lr_warmup_steps} steps leaves none of the run's {total} steps "
                            "after it")
        elif self.lr_warmup_steps and self.lr_scaling == "none":
            problems.append("lr warmup ramps from the one-rank rate to the rate scaled by the ranks: with lr "
                            "scaling none there is nothing to ramp")
        if self.preset is not None:
            if self.preset not in PRESETS:
                problems.append(f"preset {self.preset!r} is not one of {', '.join(sorted(PRESETS))}")
            else:
                differ = [f"{key} {getattr(self, key)!r} (the preset's is {value!r})"
                          for key, value in PRESETS[self.preset].items() if getattr(self, key) != value]
                if differ:
                    problems.append(f"preset {self.preset} disagrees with {', '.join(differ)}: drop the preset "
                                    "or those settings")
        return problems

    @property
    def kind(self) -> str:
        """The model's kind: "image" or "text"."""
        return models.get(self.model).kind

    @property
    def unit(self) -> str:
        """What one sample of the throughput counts: images, or tokens."""
        return models.unit(self.model)

    def units_per_step(self) -> int:
        """What one rank processes per optimizer step, in `unit`."""
        per_sample = self.sequence_length if self.kind == "text" else 1
        return self.batch_size * self.gradient_accumulation_steps * per_sample

    @property
    def multi_label(self) -> bool:
        """Real data is ChestX-ray14-style (14 independent findings), as is CheXNet on any data."""
        return models.multi_label(self.model) or self.data != "synthetic"

    @property
    def classes(self) -> int:
        return models.multi_label_classes(self.model) if self.multi_label else self.num_classes

    def record(self) -> dict[str, Any]:
        """The workload as results store it: one flat mapping, the framework's settings beside the shared ones, the
        input settings of the model's kind alone."""
        others = {key for kind, keys in KIND_SETTINGS.items() if kind != self.kind for key in keys}
        common = {key: value for key, value in self.common().items() if key not in others}
        if self.kind == "image":
            common["num_classes"] = self.classes
        return {**common, "framework": self.framework, **asdict(self.settings)}

    def to_argv(self) -> list[str]:
        """Command-line options that make `from_args` build this same workload."""
        default = Workload(framework=self.framework)
        argv = [] if self.framework == frameworks.DEFAULT else ["--framework", self.framework]
        pairs = [(name, value, getattr(default, name)) for name, value in self.common().items()]
        pairs += [(name, value, getattr(default.settings, name)) for name, value in asdict(self.settings).items()]
        for name, value, unset in pairs:
            if value == unset:
                continue
            flag = "--" + name.replace("_", "-")
            if isinstance(value, bool):
                argv.append(flag if value else "--no-" + flag[2:])
            else:
                argv += [flag, str(value)]
        return argv

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Workload:
        # add_arguments leaves options that were not given out of the namespace, so a preset can tell them
        # from ones given with the default's value.
        names = [*option_names(), "framework"]
        return cls.from_mapping({name: getattr(args, name) for name in names if hasattr(args, name)})

    @classmethod
    def from_mapping(cls, values: dict[str, Any]) -> Workload:
        """A workload from settings as a job or campaign document gives them: unknown keys, another framework's
        settings and values of the wrong type are refused by name, a preset's settings fill in what is not given
        (validate refuses conflicts)."""
        framework = values.get("framework", frameworks.DEFAULT)
        if framework not in frameworks.names():
            raise ValueError(f"framework {framework!r} is not one of {', '.join(frameworks.names())}")
        own = set(frameworks.setting_names(framework))
        known = {*_common_names(), "framework", *own}
        foreign = sorted(key for key in set(values) - known if frameworks.owners_of(key))
        unknown = sorted(key for key in set(values) - known if not frameworks.owners_of(key))
        problems = [f"workload setting {key} belongs to {' and '.join(frameworks.owners_of(key))}, not to this job's "
                    f"framework {framework}" for key in foreign]
        if unknown:
            problems.append(f"unknown workload settings: {', '.join(unknown)} (known: "
                            f"{', '.join(sorted(known - {'framework'}))})")
        settings_type = frameworks.get(framework).Settings
        common = {k: v for k, v in values.items() if k in _common_names()}
        mine = {k: v for k, v in values.items() if k in own}
        problems += _type_problems(common, _hints(Workload)) + _type_problems(mine, _hints(settings_type))
        if problems:
            raise ValueError("; ".join(problems))
        common = {**PRESETS.get(common.get("preset") or "", {}), **_as_floats(common, _hints(Workload))}
        return cls(**common, framework=framework, settings=settings_type(**_as_floats(mine, _hints(settings_type))))


# What benchrunner did before these settings existed and were recorded (results of schema v2 made before them lack
# the keys): TensorFlow and Horovod, SGD with momentum 0.9, a constant rate scaled linearly by the ranks, and
# TensorFlow's settings as they were then.
BEFORE_RECORDED: dict[str, Any] = {
    "framework": frameworks.DEFAULT, "preset": None, "optimizer": "sgd", "momentum": 0.9, "lr_scaling": "linear",
    "lr_schedule": "constant", "lr_warmup_steps": 0, "gradient_accumulation_steps": 1, "weight_decay": 0.0,
}


def complete_record(record: dict[str, Any]) -> dict[str, Any]:
    """A recorded workload with the settings it predates filled in as they were then, so runs from before and
    after compare on every axis."""
    completed = {**BEFORE_RECORDED, **record}
    return {**frameworks.get(completed["framework"]).BEFORE_RECORDED, **completed}


def option_names() -> tuple[str, ...]:
    """Every workload setting but the framework: the shared ones and each framework's own."""
    own = (name for f in frameworks.names() for name in frameworks.setting_names(f))
    return (*_common_names(), *dict.fromkeys(own))


@cache
def _common_names() -> tuple[str, ...]:
    return tuple(f.name for f in fields(Workload) if f.name not in ("framework", "settings"))


@cache
def _hints(kind: type) -> dict[str, Any]:
    return typing.get_type_hints(kind)


def _as_floats(values: dict[str, Any], hints: dict[str, Any]) -> dict[str, Any]:
    """A whole number where a float is expected (learning_rate: 1) is that float, so records hold one type."""
    return {key: float(value) if hints[key] is float and isinstance(value, int) and not isinstance(value, bool)
            else value for key, value in values.items()}


_TYPE_NAMES = {bool: "true or false", int: "an integer", float: "a number", str: "a string", type(None): "null"}
_GOT_NAMES = {**_TYPE_NAMES, bool: "a boolean"}


def _allowed(hint: Any) -> tuple[type, ...]:
    return typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)


def _accepts(allowed: tuple[type, ...], value: Any) -> bool:
    if isinstance(value, bool):  # bool is an int to Python, never to a workload
        return bool in allowed
    if isinstance(value, int):
        return int in allowed or float in allowed
    return any(isinstance(value, kind) for kind in allowed if kind not in (bool, int))


def _type_problems(values: dict[str, Any], hints: dict[str, Any]) -> list[str]:
    """Each setting whose value is not of its field's type, named with the type it takes."""
    problems = []
    for key, value in values.items():
        allowed = _allowed(hints[key])
        if not _accepts(allowed, value):
            expected = " or ".join(_TYPE_NAMES[kind] for kind in allowed)
            problems.append(f"{key} must be {expected} (got {value!r}, "
                            f"{_GOT_NAMES.get(type(value), type(value).__name__)})")
    return problems


def _number_or_word(word: str) -> Any:
    """For a setting that takes a word or a whole number ('autotune' or 4)."""
    def parse(text: str) -> int | str:
        if text == word:
            return text
        try:
            return int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is neither {word!r} nor an integer") from None
    return parse


def _option_kwargs(hint: Any, default: Any) -> dict[str, Any]:
    """How argparse reads a framework setting, from its type."""
    allowed = set(_allowed(hint)) - {type(None)}
    if allowed == {bool}:
        return {"action": argparse.BooleanOptionalAction}
    if allowed == {int, str}:
        return {"type": _number_or_word(default)}
    if len(allowed) == 1 and next(iter(allowed)) in (int, float):
        return {"type": next(iter(allowed))}
    return {}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The workload options shared by `train`, `allreduce` and `launch`. An option not given stays out of the
    namespace (from_args fills in the default or the preset's value)."""
    d = Workload()
    group = parser.add_argument_group("workload (identical on every rank and every launcher)")

    def option(name: str, text: str = "", default: Any = MISSING, **kwargs: Any) -> None:
        default = getattr(d, name) if default is MISSING else default
        shown = "unset" if default is None else str(default).lower() if isinstance(default, bool) else default
        group.add_argument("--" + name.replace("_", "-"), default=argparse.SUPPRESS,
                           help=f"{text}{'; ' if text else ''}default: {shown}", **kwargs)

    option("framework", "what trains: its own settings below are refused for the other", choices=frameworks.names())
    option("model", f"one of {', '.join(models.names())} ('benchrunner models' lists them)")
    option("data", "synthetic tensors, or a dataset made by 'benchrunner dataset' (images or tfrecord; tokens: --tokens)",
           choices=DATA_MODES)
    option("data_dir", "the dataset folder, the same path on every node")
    option("batch_size", "samples (images, or sequences) per rank per micro-batch", type=int)
    option("image_size", "image models: input height and width in pixels", type=int)
    option("num_classes", "image models: classes for single-label synthetic data (multi-label data has 14 findings)",
           type=int)
    option("sequence_length", "text models: tokens per sequence", type=int)
    option("gradient_accumulation_steps", "micro-batches per optimizer step", type=int)
    option("precision", choices=PRECISIONS)
    option("warmup_steps", "steps run but not measured", type=int)
    option("measured_steps", type=int)
    option("preset", f"named training settings, recorded by name: {', '.join(sorted(PRESETS))} (Horovod's "
           "synthetic benchmark: plain SGD, constant rate 0.01, not scaled)", choices=sorted(PRESETS))
    option("optimizer", choices=OPTIMIZERS)
    option("momentum", "SGD's momentum (0: plain SGD), or Adam's and AdamW's beta_1", type=float)
    option("weight_decay", "AdamW's decoupled weight decay", type=float)
    option("learning_rate", "per rank, before lr scaling", type=float)
    option("lr_scaling", "linear: times the number of ranks; none: as given", choices=LR_SCALINGS)
    option("lr_schedule", "constant, or cosine decay to 0 at the last step", choices=LR_SCHEDULES)
    option("lr_warmup_steps", "steps ramping the rate linearly from the one-rank rate to the scaled one", type=int)
    added: set[str] = set()
    for name in frameworks.names():
        settings = frameworks.get(name).Settings
        hints = _hints(settings)
        for f in fields(settings):
            if f.name in added:  # shared by several frameworks (PyTorch's): one option
                continue
            added.add(f.name)
            option(f.name, f"{', '.join(frameworks.owners_of(f.name))} only: {f.metadata['help']}", default=f.default,
                   **_option_kwargs(hints[f.name], f.default))
