"""Plugin packages: every module of a package is one plugin (the module itself, or what it defines), known by its
name (a module's NAME); a module whose name starts with an underscore holds what plugins share and is none."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any, TypeVar

Plugin = TypeVar("Plugin")


def _module(module: ModuleType) -> Any:
    return module


def _declared_name(module: ModuleType) -> str:
    return module.NAME


def discover(package: str, path: Iterable[str], kind: str, plugin: Callable[[ModuleType], Any] = _module,
             name: Callable[[Any], str] = _declared_name) -> dict[str, Any]:
    """Every module (or subpackage) of the package as `plugin` makes it, by its `name`; two of one name is an error,
    never a silent pick."""
    found: dict[str, Any] = {}
    for info in pkgutil.iter_modules(list(path)):
        if info.name.startswith("_"):
            continue
        made = plugin(importlib.import_module(f"{package}.{info.name}"))
        if name(made) in found:
            raise RuntimeError(f"two {kind} modules are named {name(made)}")
        found[name(made)] = made
    return found


def pick(found: dict[str, Plugin], name: str, kind: str) -> Plugin:
    try:
        return found[name]
    except KeyError:
        raise ValueError(f"{kind} {name!r} is not one of {', '.join(sorted(found))}") from None
