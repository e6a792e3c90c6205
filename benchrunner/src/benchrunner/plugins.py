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


def instance_of(base: type, kind: str) -> Callable[[ModuleType], Any]:
    """A plugin maker for modules that each define one subclass of `base` naming itself (a base a module defines for
    its plugins to share names none): an instance of it."""
    def make(module: ModuleType) -> Any:
        defined = [value for value in vars(module).values() if isinstance(value, type) and issubclass(value, base)
                   and value.__module__ == module.__name__ and "name" in vars(value)]
        if len(defined) != 1:
            raise RuntimeError(f"{kind} module {module.__name__} defines {len(defined)} named {kind}s, not one")
        return defined[0]()
    return make


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
