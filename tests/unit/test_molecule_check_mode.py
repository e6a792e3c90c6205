"""Molecule's check phase fails where a converged node's check mode predicts a change
(molecule/shared/callback_plugins/check_mode_quiet.py, enabled in .config/molecule/config.yml): a real ansible-playbook
with the callbacks molecule's phases run with, on this machine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from unit_paths import PROJECT

PLUGINS = PROJECT / "molecule" / "shared" / "callback_plugins"
PLAY = [{
    "hosts": "all", "gather_facts": False,
    "tasks": [
        {"name": "Write the file", "ansible.builtin.copy": {"content": "converged\n", "dest": "{{ dest }}", "mode": "0644"}},
        {"name": "Only read", "ansible.builtin.stat": {"path": "{{ dest }}"}},
    ],
}]


def play(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess:
    config = yaml.safe_load((PROJECT / ".config" / "molecule" / "config.yml").read_text())["provisioner"]["env"]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(PLAY))
    env = {**os.environ, "ANSIBLE_CALLBACK_PLUGINS": str(PLUGINS),
           "ANSIBLE_CALLBACKS_ENABLED": config["ANSIBLE_CALLBACKS_ENABLED"],
           "ANSIBLE_LOCAL_TEMP": str(tmp_path / "local"), "ANSIBLE_NOCOLOR": "1"}
    return subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "node,", "-c", "local",
                           "-e", f"ansible_python_interpreter={sys.executable} dest={tmp_path / 'converged.txt'}",
                           str(tmp_path / "play.yml"), *flags],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)


def test_the_check_phase_fails_on_a_predicted_change_naming_host_and_task(tmp_path):
    # Not converged yet: check mode predicts the file, and the run fails saying which task on which node.
    predicted = play(tmp_path, "--check")
    assert predicted.returncode != 0, predicted.stdout
    output = predicted.stdout + predicted.stderr
    assert "check mode on converged nodes predicted changes ({'node': 1}): node: Write the file" in output, output
    assert not (tmp_path / "converged.txt").exists()


def test_a_real_run_that_changes_passes_and_a_converged_check_passes(tmp_path):
    # Outside check mode a change is what converge is for.
    converge = play(tmp_path)
    assert converge.returncode == 0, converge.stdout + converge.stderr
    assert "changed=1" in converge.stdout
    quiet = play(tmp_path, "--check")
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    assert "changed=0" in quiet.stdout
