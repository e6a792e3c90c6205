"""Checks on the Kubernetes objects benchrunner writes, made offline (no cluster needed)."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

import jsonschema

MPIJOB_SCHEMA = "mpijob.kubeflow.org-v2beta1.json"


@cache
def _schema(name: str) -> dict[str, Any]:
    return json.loads(resources.files("benchrunner").joinpath("schemas", name).read_text())


def validate_mpijob(manifest: dict[str, Any]) -> None:
    """Raise ValueError naming the first place the MPIJob departs from the v2beta1 API."""
    errors = sorted(jsonschema.Draft202012Validator(_schema(MPIJOB_SCHEMA)).iter_errors(manifest),
                    key=lambda e: list(e.absolute_path))
    if errors:
        where = "/".join(str(p) for p in errors[0].absolute_path) or "(top level)"
        raise ValueError(f"MPIJob does not match kubeflow.org/v2beta1 at {where}: {errors[0].message}")
