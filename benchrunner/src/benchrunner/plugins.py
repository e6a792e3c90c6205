"""Plugin packages: every module of a package is one plugin, known by the NAME it declares; a module whose name starts
with an underscore holds what plugins share and is none."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from types import ModuleType


def discover(package: str, path: Iterable[str], kind: str) -> dict[str, ModuleType]:
    """Every module (or subpackage) of the package by its NAME; two of one name is an error, never a silent pick."""
    found: dict[str, ModuleType] = {}
    for info in pkgutil.iter_modules(list(path)):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        if module.NAME in found:
            raise RuntimeError(f"two {kind} modules are named {module.NAME}")
        found[module.NAME] = module
    return found


def pick(found: dict[str, ModuleType], name: str, kind: str) -> ModuleType:
    try:
        return found[name]
    except KeyError:
        raise ValueError(f"{kind} {name!r} is not one of {', '.join(sorted(found))}") from None
