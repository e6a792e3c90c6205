"""Molecule's check phase fails where a converged node's check mode predicts a change
(molecule/shared/callback_plugins/check_mode_quiet.py, enabled in .config/molecule/config.yml): a real ansible-playbook
with the callbacks molecule's phases run with, on this machine."""

from __future__ import annotations

from pathlib import Path

import yaml
from playbook_run import Run, play

from unit_paths import PROJECT

PLUGINS = PROJECT / "molecule" / "shared" / "callback_plugins"
TASKS = [
    {"name": "Write the file", "ansible.builtin.copy": {"content": "converged\n", "dest": "{{ dest }}", "mode": "0644"}},
    {"name": "Only read", "ansible.builtin.stat": {"path": "{{ dest }}"}},
]


def converge(tmp_path: Path, check: bool = False) -> Run:
    """The tasks with the callbacks molecule's phases run with (.config/molecule/config.yml)."""
    config = yaml.safe_load((PROJECT / ".config" / "molecule" / "config.yml").read_text())["provisioner"]["env"]
    return play(tmp_path, TASKS, extravars={"dest": str(tmp_path / "converged.txt")}, check=check,
                env={"ANSIBLE_CALLBACK_PLUGINS": str(PLUGINS),
                     "ANSIBLE_CALLBACKS_ENABLED": config["ANSIBLE_CALLBACKS_ENABLED"]})


def test_the_check_phase_fails_on_a_predicted_change_naming_host_and_task(tmp_path):
    # Not converged yet: check mode predicts the file, and the run fails saying which task on which node.
    predicted = converge(tmp_path, check=True)
    assert predicted.returncode != 0 and predicted.changed == 1, predicted.stdout
    output = predicted.stdout + predicted.stderr
    assert "check mode on converged nodes predicted changes ({'node001': 1}): node001: Write the file" in output, output
    assert not (tmp_path / "converged.txt").exists()


def test_a_real_run_that_changes_passes_and_a_converged_check_passes(tmp_path):
    # Outside check mode a change is what converge is for.
    changed = converge(tmp_path)
    assert (changed.returncode, changed.changed) == (0, 1), changed.stdout + changed.stderr
    quiet = converge(tmp_path, check=True)
    assert (quiet.returncode, quiet.changed) == (0, 0), quiet.stdout + quiet.stderr
