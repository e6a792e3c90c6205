"""The catalogue's models in torch, whatever their family: each family names the module that builds its models
(benchrunner.models.Family's TORCH_BUILDER), and this one asks it by the model's name."""

from __future__ import annotations

import importlib
from types import ModuleType

import torch
from torch import nn

from benchrunner import models
from benchrunner.workload import Workload


def parameter_count(module: nn.Module) -> int:
    return sum(parameter.numel() for parameter in module.parameters())


def builder(name: str) -> ModuleType:
    """The module that builds the model in torch; refused, naming the model and its family, where it lacks what a
    builder declares."""
    module = importlib.import_module(models.torch_builder(name))
    lacking = [member for member in ("for_workload", "for_catalogue") if not hasattr(module, member)]
    if lacking:
        raise ValueError(f"model {name}'s family {models.family_of(name).NAME} names {module.__name__} as its torch "
                         f"builder, which declares no {' or '.join(lacking)}")
    return module


def build(workload: Workload, device: torch.device) -> tuple[nn.Module, str]:
    """(the workload's model on the device, who defined it: "torchvision" or "benchrunner")."""
    return builder(workload.model).for_workload(workload, device)


def parameter_count_on_meta(name: str) -> int:
    """Any model of the catalogue built on the meta device, which allocates nothing, as the catalogue counts it (image
    models at their family's catalogue_input), and its parameters counted."""
    with torch.device("meta"):
        return parameter_count(builder(name).for_catalogue(name))
