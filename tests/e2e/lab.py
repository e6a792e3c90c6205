"""Running site.yml on the lab through ansible-runner, as an automation would."""

from __future__ import annotations

from pathlib import Path

import yaml

from benchrunner import playbooks

PROJECT = Path(__file__).resolve().parents[2]
LAB_INVENTORY = PROJECT / "inventory" / "lab" / "hosts.yml"
# The settings the lab's inventory gives every host (benchrunner_image, where container images go on the nodes).
LAB_VARS = yaml.safe_load((PROJECT / "inventory" / "lab" / "group_vars" / "all.yml").read_text())


def run_site(**kwargs) -> playbooks.Outcome:
    """A playbook of the project (site.yml unless playbook= says otherwise), events recorded, nothing printed."""
    return playbooks.run(PROJECT, progress=playbooks.Progress(out=None), **kwargs)


def lab_node_names() -> list[str]:
    inventory = yaml.safe_load(LAB_INVENTORY.read_text())
    return sorted(inventory["all"]["children"]["nodes"]["hosts"])


