"""Running site.yml on the lab through ansible-runner, as an automation would."""

from __future__ import annotations

from pathlib import Path

from benchrunner import playbooks

PROJECT = Path(__file__).resolve().parents[2]
LAB_INVENTORY = PROJECT / "inventory" / "lab" / "hosts.yml"


def run_site(**kwargs) -> playbooks.Outcome:
    return playbooks.run(PROJECT, progress=playbooks.Progress(out=None), **kwargs)


