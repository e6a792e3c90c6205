"""The benchmark's models by name, whatever framework builds them: each model's kind (which workload settings shape
its input, and the unit its throughput is counted in), the frameworks that build it, and its published parameter
count where there is one.

Each family of models is one module of this package declaring what the interface of its models' kinds asks
(`Family`, and `ImageFamily` or `TextFamily`), its TORCH_BUILDER among them: the module of
benchrunner.frameworks._torch that builds its models in torch. The rest of the package asks a model's questions here,
by the model's name, and never names a family."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import Any, Protocol

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

    def __post_init__(self) -> None:
        if self.kind not in UNITS:
            raise ValueError(f"model {self.name}: kind {self.kind!r} is not one of {', '.join(UNITS)}")
        if (self.kind == "text") != (self.vocab_size is not None):
            raise ValueError(f"model {self.name}: text models, and they alone, declare a vocabulary size")


class Family(Protocol):
    """What every family module declares."""

    NAME: str
    MODELS: Mapping[str, ModelSpec]
    # The dotted name of the module that builds the family's models in torch (imported only where torch is): its
    # `for_workload(workload, device)` returns (the model on the device, who defined it) and `for_catalogue(name)`
    # the model as the catalogue counts its parameters, built on the current default device. A text model's blocks
    # are its `layers`, which FSDP shards and checkpointing and compile wrap one by one.
    TORCH_BUILDER: str


class ImageFamily(Family, Protocol):
    """A family of image models: what shapes their input and output."""

    def min_image_size(self, name: str) -> int:
        """The smallest image side the model accepts."""

    def multi_label(self, name: str) -> bool:
        """Whether the model trains on independent binary targets whatever the data (real data always does)."""

    def multi_label_classes(self, name: str) -> int:
        """The model's outputs where it trains multi-label: one per finding."""

    def catalogue_input(self, name: str) -> tuple[int, int]:
        """(image size, classes) the catalogue counts the model's parameters at."""


class TextFamily(Family, Protocol):
    """A family of text models: the longest sequence each takes and the arithmetic of a token."""

    def max_sequence_length(self, name: str) -> int:
        """The longest sequence, in tokens, the model takes."""

    def flops(self, name: str, sequence_length: int) -> dict[str, Any]:
        """The model FLOPs per token trained at the sequence length, with the formula and its terms
        (benchrunner.mfu.flops_per_token's)."""


INTERFACES: dict[str, type] = {"image": ImageFamily, "text": TextFamily}


def members(interface: type) -> tuple[str, ...]:
    """The names an interface asks a family module to declare."""
    names: dict[str, None] = {}
    for klass in reversed(interface.__mro__):
        if Family in klass.__mro__:
            names.update(dict.fromkeys(name for name in (*getattr(klass, "__annotations__", {}), *vars(klass))
                                       if not name.startswith("_")))
    return tuple(names)


def missing(family: ModuleType) -> list[str]:
    """What the family module lacks of the interfaces its models' kinds ask."""
    kinds = sorted({spec.kind for spec in getattr(family, "MODELS", {}).values()})
    asked = dict.fromkeys(name for interface in (Family, *(INTERFACES[kind] for kind in kinds))
                          for name in members(interface))
    return [name for name in asked if not hasattr(family, name)]


@cache
def families() -> dict[str, ModuleType]:
    """Every family module of this package by its NAME, each declaring what its models' kinds ask."""
    found = plugins.discover(__name__, __path__, "model family")
    for family in found.values():
        lacking = missing(family)
        if lacking:
            raise RuntimeError(f"model family {family.NAME} ({family.__name__}) does not declare "
                               f"{', '.join(lacking)}: see benchrunner.models.Family and its kinds' interfaces")
    return found


def owners() -> dict[str, ModuleType]:
    """Every model's family by the model's name; a name in two families is an error, never a silent pick."""
    found: dict[str, ModuleType] = {}
    for family in families().values():
        for name in family.MODELS:
            if name in found:
                raise RuntimeError(f"two model families define {name}: {found[name].NAME} and {family.NAME}")
            found[name] = family
    return found


def registry() -> dict[str, ModelSpec]:
    """Every model of every family by its name."""
    return {name: family.MODELS[name] for name, family in owners().items()}


def names() -> tuple[str, ...]:
    return tuple(sorted(owners()))


def family_of(name: str) -> ModuleType:
    try:
        return owners()[name]
    except KeyError:
        raise ValueError(f"model {name!r} is not one of {', '.join(names())}") from None


def get(name: str) -> ModelSpec:
    return family_of(name).MODELS[name]


def unit(name: str) -> str:
    return UNITS[get(name).kind]


def frameworks_for(name: str) -> tuple[str, ...]:
    """The frameworks that build the model: those that build its kind."""
    kind = get(name).kind
    return tuple(framework for framework in frameworks.names() if kind in frameworks.get(framework).KINDS)


def _member(name: str, member: str) -> Any:
    """What the model's family declares under that name: refused, naming the model and its family, where the
    family has none (a question of another kind's models, or a family lacking part of its interface)."""
    family, kind = family_of(name), get(name).kind
    found = getattr(family, member, None)
    if found is None:
        asked_of = next((other for other, interface in INTERFACES.items() if member in members(interface)), None)
        why = (f"that is asked of {asked_of} models, and {name} is {'an' if kind == 'image' else 'a'} {kind} model"
               if asked_of not in (None, kind) else f"benchrunner.models.{INTERFACES[kind].__name__} asks for it")
        raise ValueError(f"model {name}'s family {family.NAME} ({family.__name__}) declares no {member}: {why}")
    return found


def torch_builder(name: str) -> str:
    """The dotted name of the module that builds the model in torch."""
    return _member(name, "TORCH_BUILDER")


def min_image_size(name: str) -> int:
    return _member(name, "min_image_size")(name)


def multi_label(name: str) -> bool:
    return _member(name, "multi_label")(name)


def multi_label_classes(name: str) -> int:
    return _member(name, "multi_label_classes")(name)


def catalogue_input(name: str) -> tuple[int, int]:
    return _member(name, "catalogue_input")(name)


def max_sequence_length(name: str) -> int:
    return _member(name, "max_sequence_length")(name)


def flops(name: str, sequence_length: int) -> dict[str, Any]:
    return _member(name, "flops")(name, sequence_length)
