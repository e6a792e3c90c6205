"""No rescue under run_once in the roles' and playbooks' tasks: a run-once task's failure is every host's, and a
rescue then keeps only the host that ran it, taking the others out of the play counted neither failed nor unreachable
(ansible-core 2.19; python_env's CPU wheel fetch on a fresh wheelhouse dropped lab-node2 so, and Slurm's play
failed two plays later for want of it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from unit_paths import PROJECT

BLOCK_KEYS = ("block", "rescue", "always")


def rescued_under_run_once(tasks: Any, inherited: bool = False, where: str = "") -> list[str]:
    found = []
    for task in tasks or []:
        if not isinstance(task, dict):
            continue
        once = inherited or bool(task.get("run_once"))
        if "block" in task:
            name = task.get("name", "(unnamed block)")
            if once and task.get("rescue"):
                found.append(f"{where}: {name}")
            for key in BLOCK_KEYS:
                found += rescued_under_run_once(task.get(key), once, where)
    return found


def task_files() -> list[Path]:
    return sorted([*PROJECT.glob("roles/*/tasks/*.yml"), *PROJECT.glob("roles/*/handlers/*.yml")])


def test_task_files_are_found():
    assert len(task_files()) > 50


def test_no_block_run_once_has_a_rescue():
    found = []
    for path in task_files():
        found += rescued_under_run_once(yaml.safe_load(path.read_text()), where=str(path.relative_to(PROJECT)))
    for path in sorted([PROJECT / "site.yml", *PROJECT.glob("playbooks/*.yml")]):
        for play in yaml.safe_load(path.read_text()) or []:
            for section in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                found += rescued_under_run_once(play.get(section), bool(play.get("run_once")),
                                                str(path.relative_to(PROJECT)))
    assert found == []


def test_the_rule_finds_a_rescue_inherited_from_an_outer_run_once_block():
    tasks = [{"name": "outer", "run_once": True, "block": [{"name": "inner", "block": [{"ansible.builtin.ping": None}],
                                                             "rescue": [{"ansible.builtin.debug": None}]}]}]
    assert rescued_under_run_once(tasks, where="x.yml") == ["x.yml: inner"]
    assert rescued_under_run_once([{**tasks[0], "run_once": False}], where="x.yml") == []
