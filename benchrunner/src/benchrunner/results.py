"""Result files: versioned JSON schemas, validation on write and on load, atomic writes."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, BinaryIO

import jsonschema
from referencing import Registry, Resource

RANK_RESULT = "rank-result"
SUMMARY = "summary"
ALLREDUCE_RESULT = "allreduce-result"
CAMPAIGN = "campaign"
CAMPAIGN_STATE = "campaign-state"
# Written by the node_checks role's summary (playbooks/validate.yml), checked here like every other result.
NODE_VALIDATION = "node-validation"
# What the playbooks, a campaign or `benchrunner launch` ask benchrunner to run (benchrunner.job_document).
JOB = "job"
# The raw bandwidth of the link between two nodes (iperf3), the reference for an allreduce sweep's bus bandwidth.
RAW_BANDWIDTH = "raw-bandwidth"
# What the launching node's watchdog wrote when it ended a job whose ranks stopped (benchrunner.watchdog).
STALLED = "stalled"
# Documents that carry their kind and schema_version; a campaign file is written by hand and carries neither.
KINDS = (RANK_RESULT, SUMMARY, ALLREDUCE_RESULT, CAMPAIGN_STATE, NODE_VALIDATION, JOB, RAW_BANDWIDTH, STALLED)
SCHEMA_VERSION = 2
# Kinds whose schema has a version of its own; the others (and the campaign file) are at SCHEMA_VERSION.
# Training results are at 3: throughput in samples of the workload's unit (images, tokens), not images only.
SCHEMA_VERSIONS = {JOB: 1, NODE_VALIDATION: 4, STALLED: 1, RANK_RESULT: 3, SUMMARY: 3}
# Older versions still read (validated against their own schema), for documents written before the current one.
READ_VERSIONS = {NODE_VALIDATION: (2, 3), RANK_RESULT: (2,), SUMMARY: (2,)}
# What a run's raw/ holds: one file per rank for training, one file for an allreduce sweep (beside it, the link's
# raw bandwidth where it was measured).
SWEEP_JSON = "allreduce.json"
RAW_BANDWIDTH_JSON = "raw-bandwidth.json"


class ResultError(ValueError):
    """A result file that is missing, unreadable or does not match its schema."""


RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
# Names the results folder holds besides runs: a run of one of these names would overwrite or shadow them.
RESERVED_RUN_IDS = ("latest", "campaigns", "compare", "node-validation")


def run_id_problem(run_id: str) -> str | None:
    """Why this cannot name a run (it becomes a folder, a Slurm job name and an MPIJob's name), or None."""
    if not RUN_ID.fullmatch(run_id):
        return (f"run id {run_id!r} must be 1 to 128 letters, digits, '.', '_' or '-', starting with a letter "
                "or digit")
    if run_id in RESERVED_RUN_IDS:
        return f"run id {run_id!r} is reserved for the results folder's own {run_id}"
    return None


def version_of(kind: str) -> int:
    return SCHEMA_VERSIONS.get(kind, SCHEMA_VERSION)


def readable_versions(kind: str) -> tuple[int, ...]:
    """The versions of a kind that validate and load: the current one and those READ_VERSIONS keeps."""
    return (*READ_VERSIONS.get(kind, ()), version_of(kind))


@cache
def schema(kind: str, version: int | None = None) -> dict[str, Any]:
    """A kind's schema, at its current version unless another readable one is asked for."""
    name = f"{kind}.v{version_of(kind) if version is None else version}.json"
    return json.loads(resources.files("benchrunner").joinpath("schemas", name).read_text())


@cache
def _registry() -> Registry:
    """Every schema by its $id, so one schema can refer to another's definitions. Crawled once here: an uncrawled
    registry crawls every schema again on each reference it resolves (a campaign of 400 runs took a minute to load)."""
    documents = [schema(kind, version) for kind in (*KINDS, CAMPAIGN) for version in readable_versions(kind)]
    return Registry().with_resources((doc["$id"], Resource.from_contents(doc)) for doc in documents).crawl()


@cache
def _validator(kind: str, version: int) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema(kind, version), registry=_registry())


def validate(kind: str, document: dict[str, Any], source: str = "document") -> None:
    version, supported = document.get("schema_version"), readable_versions(kind)
    if kind == CAMPAIGN:
        version = version_of(kind)
    elif version not in supported:
        said = " or ".join(filter(None, (", ".join(str(v) for v in supported[:-1]), str(supported[-1]))))
        raise ResultError(f"{source}: schema_version {version!r} is not the supported {said}")
    errors = sorted(_validator(kind, version).iter_errors(document), key=lambda e: list(e.path))
    if errors:
        where = "/".join(str(p) for p in errors[0].absolute_path) or "(top level)"
        raise ResultError(f"{source}: does not match the {kind} v{version} schema at {where}: {errors[0].message}"
                          + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""))


# Set in pods: results also go to stdout, which mpirun forwards to the launcher's log (no shared volume needed).
STDOUT_ENV = "BENCHRUNNER_RESULTS_TO_STDOUT"


@contextmanager
def atomic(path: Path, mode: int = 0o644) -> Iterator[BinaryIO]:
    """A binary file written through a temporary one in the same folder, renamed to `path` only when the block ends
    without an error, so readers never see half a file (a large one can be written in pieces)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    """Write text (UTF-8) through a temporary file in the same folder and rename it, so readers never see half a file."""
    with atomic(path, mode) as handle:
        handle.write(text.encode())


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON (RFC 8259 has no NaN or Infinity)")


# The deepest document benchrunner reads nests 5 or 6 levels (a rank's result, a node-validation document): 64 is far
# above any real one, and far below the thousand or so at which Python's json parser raises RecursionError (and
# jsonschema, which recurses too, earlier still).
MAX_DEPTH = 64
# A JSON string, escapes included, and the brackets left outside strings: how deep a text nests, before it is parsed.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKET = re.compile(r"[][{}]")


class OutOfBounds(ValueError):
    """JSON nested deeper than any real document: refused before it is parsed."""


def strict_loads(text: str) -> Any:
    """JSON as RFC 8259 has it: Python's json would otherwise accept NaN, Infinity and -Infinity. Nested deeper than
    MAX_DEPTH, it is refused (OutOfBounds) before the parser's recursion can fail."""
    depth = 0
    for bracket in _BRACKET.finditer(_JSON_STRING.sub("", text)):
        depth += 1 if bracket.group() in "[{" else -1
        if depth > MAX_DEPTH:
            raise OutOfBounds(f"arrays and objects nested more than {MAX_DEPTH} deep, far deeper than any document "
                              "benchrunner reads")
    return json.loads(text, parse_constant=_no_constant)


def dumps(document: Any) -> str:
    """The project's JSON: strict (a non-finite number raises instead of becoming NaN or Infinity), stable order."""
    return json.dumps(document, indent=2, sort_keys=True, allow_nan=False) + "\n"


def save(kind: str, document: dict[str, Any], path: Path) -> None:
    validate(kind, document, str(path))
    try:
        text = dumps(document)
    except ValueError as exc:
        raise ResultError(f"{path}: {exc}: a non-finite number cannot be written as JSON") from exc
    write_atomic(path, text)
    if os.environ.get(STDOUT_ENV):
        from benchrunner import logship  # noqa: PLC0415 - only where results travel in the log

        logship.emit(path.name, text)


# What a training result of v2 (images only) is read as: its throughput in samples of unit images.
V2_UNIT = "images"
V2_MODEL_KIND = "image"
# Why a v2 summary has no utilization or memory: what its readers say in their place.
V2_UNMEASURED = "summary v2, made before benchrunner measured it"


def _rank_result_from_v2(document: dict[str, Any]) -> dict[str, Any]:
    metrics = {key: value for key, value in document["metrics"].items() if key != "images_per_sec"}
    upgraded = {**document, "metrics": {**metrics, "samples_per_sec": document["metrics"]["images_per_sec"],
                                        "unit": V2_UNIT}}
    if "model" in document:
        upgraded["model"] = {**document["model"], "kind": V2_MODEL_KIND}
    return upgraded


def _summary_from_v2(document: dict[str, Any]) -> dict[str, Any]:
    old = document["throughput"]
    ranks = document["ranks"]
    spread = old.get("total_batch_means")
    throughput = {
        "unit": V2_UNIT, "total_per_sec": old["total"], "per_device_per_sec": old["total"] / ranks,
        "total_batch_means": spread,
        # Every figure of a description scales with its values, so the per-device spread is the total's over ranks.
        "per_device_batch_means": spread and {key: value if key == "n" else value / ranks
                                              for key, value in spread.items()},
        "per_rank": [{**{key: value for key, value in r.items() if key != "images_per_sec"},
                      "samples_per_sec": r["images_per_sec"]} for r in old["per_rank"]],
    }
    return {**document, "throughput": throughput, "utilization": None, "utilization_missing": V2_UNMEASURED,
            "memory": {"peak_bytes": None, "rank": None, "sources": [], "missing": V2_UNMEASURED}}


# How a document of an older version is read: as the current version's shape, so no reader asks which version it
# has. The view keeps the schema_version it was written with, so a reader can still tell (and it is not saved back).
_UPGRADES = {(RANK_RESULT, 2): _rank_result_from_v2, (SUMMARY, 2): _summary_from_v2}


def upgrade(kind: str, document: dict[str, Any]) -> dict[str, Any]:
    """A validated document as its kind's current version reads: older versions' fields under their current names."""
    step = _UPGRADES.get((kind, document.get("schema_version")))
    return step(document) if step else document


def load(kind: str, path: Path) -> dict[str, Any]:
    """A result file, validated against its own version's schema, in the current version's shape (upgrade)."""
    try:
        document = strict_loads(Path(path).read_text())
    except OSError as exc:
        raise ResultError(f"{path}: cannot read: {exc.strerror}") from exc
    except OutOfBounds as exc:
        raise ResultError(f"{path}: {exc}") from exc
    except ValueError as exc:
        raise ResultError(f"{path}: not JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise ResultError(f"{path}: expected a JSON object")
    validate(kind, document, str(path))
    return upgrade(kind, document)


def kind_of(document: Any) -> str:
    if not isinstance(document, dict):
        raise ResultError(f"expected a JSON object with a 'kind', got a JSON {type(document).__name__}")
    kind = document.get("kind")
    if kind not in KINDS:
        raise ResultError(f"unknown result kind {kind!r}")
    return kind
