"""The benchmark's models by name, whatever framework builds them: each model's kind (which workload settings shape
its input, and the unit its throughput is counted in), the frameworks that build it, and its published parameter
count where there is one. Each family of models is one module of this package declaring NAME and MODELS."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from benchrunner import frameworks, plugins

# A model's kind names the unit of one sample of its input: an image, or a token of a sequence.
UNITS = {"image": "images", "text": "tokens"}


@dataclass(frozen=True)
class ModelSpec:
    name: str
    kind: str
    published_parameters: int | None = None
    # Where that count is published.
    published_source: str | None = None
    # Text models: the token ids the embedding takes (a token folder's must fit).
    vocab_size: int | None = None


@cache
def registry() -> dict[str, ModelSpec]:
    """Every model of every family module by its name; a name in two families is an error, never a silent pick."""
    found: dict[str, ModelSpec] = {}
    for family in plugins.discover(__name__, __path__, "model family").values():
        for name, spec in family.MODELS.items():
            if name in found:
                raise RuntimeError(f"two model families define {name}")
            found[name] = spec
    return found


def names() -> tuple[str, ...]:
    return tuple(sorted(registry()))


def get(name: str) -> ModelSpec:
    try:
        return registry()[name]
    except KeyError:
        raise ValueError(f"model {name!r} is not one of {', '.join(names())}") from None


def unit(name: str) -> str:
    return UNITS[get(name).kind]


def frameworks_for(name: str) -> tuple[str, ...]:
    """The frameworks that build the model: those that build its kind."""
    kind = get(name).kind
    return tuple(framework for framework in frameworks.names() if kind in frameworks.get(framework).KINDS)
