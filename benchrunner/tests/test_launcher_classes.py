"""A launcher is one class of benchrunner.launchers: one defined here, with settings of its own, is taken end to end
by job documents, campaigns and the launch, and nothing outside the launchers asks a launcher's name."""

from __future__ import annotations

import ast
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchrunner import campaign, frameworks, job_document, launchers, results, watchdog
from benchrunner.launchers import srun

PROJECT = Path(__file__).resolve().parents[2]
PACKAGE = PROJECT / "benchrunner" / "src" / "benchrunner"
SETTINGS_KEY = "queue_pinned"


class QueuePinned(launchers.Launcher):
    """A Slurm-like launcher that submits from the launching node, with settings under a job key of its own."""

    name = "queue-pinned"
    stacks = ("slurm",)
    frameworks = frameworks.names()
    rank_variables = "slurm"
    needs = frozenset({"slurm"})
    leaves = ("queue.sh",)
    watched_in_job = True
    settings_key = SETTINGS_KEY

    @dataclass(frozen=True)
    class Settings:
        queue: str | None = None
        cpus_per_task: int = 2

    def __init__(self) -> None:
        self.started: list[tuple[launchers.Job, Any, watchdog.Limits]] = []

    def settings_problems(self, settings: Any, job: launchers.Job, complete: bool) -> list[str]:
        return [] if settings.cpus_per_task >= 1 else [f"{SETTINGS_KEY}.cpus_per_task must be at least 1, got "
                                                       f"{settings.cpus_per_task}"]

    def start(self, job: launchers.Job, settings: Any, options: launchers.Options, limits: watchdog.Limits) -> int:
        self.started.append((job, settings, limits))
        return 0


def _generator():
    spec = importlib.util.spec_from_file_location("registry_enums", PROJECT / "tools" / "registry_enums.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def queue_pinned(monkeypatch):
    """The launcher registered, the campaign schema's launcher enum as `make docs` writes it for the registry, and its
    settings key in the job schema (the one line of a job document's schema a launcher with new keys adds)."""
    launcher = QueuePinned()
    monkeypatch.setitem(launchers.registry(), launcher.name, launcher)
    generator = _generator()
    generated = json.loads(generator.rendered()[generator._schema_file(results.CAMPAIGN)])
    assert launcher.name in generated["$defs"]["launcher"]["enum"]
    # As validation reads them: each at its version.
    campaign_schema, job_schema = (results.schema(kind, results.version_of(kind)) for kind in (results.CAMPAIGN, results.JOB))
    monkeypatch.setitem(campaign_schema["$defs"]["launcher"], "enum", generated["$defs"]["launcher"]["enum"])
    monkeypatch.setitem(job_schema["properties"], SETTINGS_KEY, {
        "type": "object", "additionalProperties": False,
        "properties": {"queue": {"type": ["string", "null"]}, "cpus_per_task": {"type": "integer"}}})
    return launcher


def request(**changes):
    return {"kind": "job", "schema_version": 1, "run_id": "r1", "program": "train", "stack": "slurm",
            "launcher": "queue-pinned", "network": "tcp", "ranks": 2, "gpus_per_node": 0, "hosts": ["n1", "n2"],
            "workload": {}, **changes}


def test_a_launcher_defined_here_takes_its_settings_through_the_job_document(queue_pinned, tmp_path):
    plan = job_document.plan(request(**{SETTINGS_KEY: {"queue": "fast", "cpus_per_task": 4}}))
    assert plan.launcher is queue_pinned
    assert plan.settings == QueuePinned.Settings(queue="fast", cpus_per_task=4)
    # Left out, its own defaults; the document keeps its key only where the request gave it.
    assert job_document.plan(request()).settings == QueuePinned.Settings()
    # Its own checks refuse what it cannot use, naming the key.
    with pytest.raises(ValueError, match=f"{SETTINGS_KEY}.cpus_per_task must be at least 1, got 0"):
        job_document.resolve(request(**{SETTINGS_KEY: {"cpus_per_task": 0}}))
    # Its declared facts answer what the play and the report ask.
    placed = job_document.placement(request(), {"node1": "n1", "node2": "n2"})
    assert placed["leaves"] == ["queue.sh"] and placed["hosts"] == ["node1", "node2"]
    assert launchers.kept_files("queue-pinned", "slurm") == ("job.json", "queue.sh", watchdog.STALLED_JSON)
    # Launched, it is started with its settings and handed the limits, as one watched inside its job.
    record = results.dumps(plan.document)
    assert launchers.execute(plan.job, plan.settings, launchers.Options(dry_run=True), plan.limits, record) == 0
    assert queue_pinned.started == [(plan.job, plan.settings, plan.limits)]


def test_a_campaign_runs_a_launcher_defined_here(queue_pinned, tmp_path):
    path = tmp_path / "study.yml"
    path.write_text(yaml.safe_dump({"name": "pinned", "repeats": 1, "gpus": [2], "stacks": ["slurm"],
                                    "launchers": {"slurm": ["srun", "queue-pinned"]},
                                    "workloads": {"model": ["small_cnn"]}}))
    document = campaign.load(path)
    runs = campaign.plan(document)
    assert sorted({r.point["launcher"] for r in runs}) == ["queue-pinned", "srun"]
    run_ = next(r for r in runs if r.point["launcher"] == "queue-pinned")
    plan = job_document.plan({**campaign.full_request(run_, document), "hosts": ["n1", "n2"]})
    assert plan.launcher is queue_pinned and plan.settings == QueuePinned.Settings()
    # It submits no object: the campaign's manifests are those of launchers that do.
    assert campaign.manifests(document, {}) == {}


def test_a_launcher_module_defines_exactly_one_named_launcher():
    assert sorted(type(launcher).__module__ for launcher in launchers.registry().values()) == sorted(
        f"benchrunner.launchers.{name}" for name in ("horovodrun", "mpijob", "mpirun", "srun", "torchrun"))
    # srun's shared base (SlurmBatch) names no launcher, so it is no second one of its module.
    assert "name" not in vars(srun.SlurmBatch) and type(launchers.get("torchrun")).__mro__[1] is srun.SlurmBatch


def _name_comparisons(path: Path, root: Path, names: set[str]) -> list[str]:
    """Where a module compares with a launcher's name, written out: ==, !=, in, not in, or a match case."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, (ast.Compare, ast.match_case)):
            literals = [sub.value for sub in ast.walk(node) if isinstance(sub, ast.Constant) and sub.value in names]
            if literals:
                line = node.lineno if isinstance(node, ast.Compare) else node.pattern.lineno
                found.append(f"{path.relative_to(root)}:{line} compares with {', '.join(literals)}")
    return found


def test_nothing_outside_the_launchers_compares_with_a_launchers_name():
    names = set(launchers.names())
    modules = [path for path in sorted(PACKAGE.rglob("*.py")) if PACKAGE / "launchers" not in path.parents]
    assert len(modules) > 20 and PACKAGE / "cli.py" in modules
    assert [line for path in modules for line in _name_comparisons(path, PACKAGE, names)] == []


def test_the_name_check_finds_each_way_of_comparing(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('if launcher == "mpijob":\n    pass\nok = job.launcher in ("srun", "torchrun")\n'
                      'match launcher:\n    case "mpirun":\n        pass\nnot_one = launcher != "cluster"\n')
    assert sorted(_name_comparisons(sample, tmp_path, set(launchers.names()))) == [
        "sample.py:1 compares with mpijob", "sample.py:3 compares with srun, torchrun",
        "sample.py:5 compares with mpirun"]
