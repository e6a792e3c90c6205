"""The frameworks a workload trains with, each one module of this package, found here and nowhere else.

A framework module declares its NAME, the model KINDS it builds (benchrunner.models), a frozen dataclass `Settings`
holding the workload settings that belong to it (each field's metadata["help"] is its command-line help; PyTorch's
frameworks share theirs), and two rank programs, `train(workload,
settings, context)` and `allreduce(context, min_bytes, max_bytes)`; with them `rank_environment(first_host)` (what its
ranks need to find each other where the launcher does not say), `versions(provenance)`, `model_settings(record)` and
`input_settings(record)` (what a run's page names), and BEFORE_RECORDED (its settings older results lack).
Importing a framework module imports nothing heavy: each program imports its framework when it runs, so the
PyTorch path never loads TensorFlow or Horovod.
"""

from __future__ import annotations

from dataclasses import fields
from functools import cache
from types import ModuleType

from benchrunner import plugins

DEFAULT = "tensorflow-horovod"
# The most processes (a DataLoader's workers) or threads (tf.data's parallel calls, its files read at once) one rank's
# input may be given. Every rank of a node runs that many: 256 a rank is eight ranks' 2,048, more than the hardware
# threads of the largest two-socket nodes (2 x 192 cores x 2). A larger value is a typo, not a setting.
MAX_WORKERS_PER_RANK = 256


@cache
def registry() -> dict[str, ModuleType]:
    """Every framework module of this package by its NAME."""
    return plugins.discover(__name__, __path__, "framework")


def names() -> tuple[str, ...]:
    return tuple(sorted(registry()))


def get(name: str) -> ModuleType:
    return plugins.pick(registry(), name, "framework")


def setting_names(name: str) -> tuple[str, ...]:
    return tuple(field.name for field in fields(get(name).Settings))


def owners_of(setting: str) -> tuple[str, ...]:
    """The frameworks a setting belongs to (PyTorch's share theirs), none for a setting of every framework."""
    return tuple(name for name in names() if setting in setting_names(name))
