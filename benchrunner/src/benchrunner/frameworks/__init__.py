"""The frameworks a workload trains with, each one module of this package, found here and nowhere else.

A framework module declares its NAME, a frozen dataclass `Settings` holding the workload settings that belong to
it alone (each field's metadata["help"] is its command-line help), and two rank programs, `train(workload,
settings, context)` and `allreduce(context, min_bytes, max_bytes)`. Importing a framework module imports nothing
heavy: each program imports its framework when it runs, so the PyTorch path never loads TensorFlow or Horovod.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import fields
from functools import cache
from types import ModuleType

DEFAULT = "tensorflow-horovod"


@cache
def registry() -> dict[str, ModuleType]:
    """Every framework module of this package by its NAME."""
    found: dict[str, ModuleType] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        if module.NAME in found:
            raise RuntimeError(f"two framework modules are named {module.NAME}")
        found[module.NAME] = module
    return found


def names() -> tuple[str, ...]:
    return tuple(sorted(registry()))


def get(name: str) -> ModuleType:
    try:
        return registry()[name]
    except KeyError:
        raise ValueError(f"framework {name!r} is not one of {', '.join(names())}") from None


def setting_names(name: str) -> tuple[str, ...]:
    return tuple(field.name for field in fields(get(name).Settings))


def owner_of(setting: str) -> str | None:
    """The framework a setting belongs to, if any."""
    return next((name for name in names() if setting in setting_names(name)), None)
