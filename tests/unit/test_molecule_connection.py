"""Molecule's connection to its podman nodes (molecule/shared/connection_plugins/podman_exec.py, named in
.config/molecule/config.yml): a real ansible-playbook against a stand-in podman that records its arguments and runs
what `podman exec` would run here, so what each task costs in podman calls is counted, not assumed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from unit_paths import PROJECT

PLUGINS = PROJECT / "molecule" / "shared" / "connection_plugins"

# podman exec [-i] NAME CMD..., podman cp SRC NAME:DST, podman mount NAME; the node's filesystem is this machine's.
STAND_IN = """#!/bin/sh
echo "$*" >> "$PODMAN_CALLS"
case "$1" in
  exec) shift; if [ "$1" = "-i" ]; then shift; fi; shift; exec "$@" ;;
  mount) echo / ;;
  cp) cp "$2" "${3#*:}" ;;
  *) exit 125 ;;
esac
"""

PLAY = [{
    "hosts": "all", "gather_facts": False,
    "tasks": [
        {"name": "A module", "ansible.builtin.command": "true", "changed_when": False},
        {"name": "Another", "ansible.builtin.stat": {"path": "/"}},
        {"name": "A file copied", "ansible.builtin.copy": {"src": "{{ source }}", "dest": "{{ dest }}", "mode": "0600"}},
    ],
}]


def test_each_module_is_one_pipelined_podman_exec_and_a_copy_mounts_the_node(tmp_path):
    podman = tmp_path / "podman"
    podman.write_text(STAND_IN)
    podman.chmod(0o755)
    calls = tmp_path / "calls.log"
    (tmp_path / "play.yml").write_text(yaml.safe_dump(PLAY))
    (tmp_path / "source.txt").write_text("copied\n")
    config = yaml.safe_load((PROJECT / ".config" / "molecule" / "config.yml").read_text())["provisioner"]
    env = {**os.environ, "PODMAN_CALLS": str(calls), "ANSIBLE_CONNECTION_PLUGINS": str(PLUGINS),
           "ANSIBLE_PIPELINING": config["env"]["ANSIBLE_PIPELINING"], "ANSIBLE_LOCAL_TEMP": str(tmp_path / "local"),
           "ANSIBLE_REMOTE_TEMP": str(tmp_path / "remote")}
    inventory = (f"node ansible_connection={config['connection_options']['ansible_connection']} "
                 f"ansible_podman_executable={podman} ansible_python_interpreter={sys.executable}\n")
    (tmp_path / "hosts").write_text(inventory)
    done = subprocess.run([shutil.which("ansible-playbook", path=str(Path(sys.executable).parent)) or "ansible-playbook",
                           "-i", str(tmp_path / "hosts"), str(tmp_path / "play.yml"),
                           "-e", f"source={tmp_path / 'source.txt'} dest={tmp_path / 'dest.txt'}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "dest.txt").read_text() == "copied\n"
    recorded = calls.read_text().splitlines()
    # The two modules: one `podman exec -i` each, the module on stdin; no mount, no temporary folder.
    assert [call.split()[:3] for call in recorded[:2]] == [["exec", "-i", "node"]] * 2, recorded
    # The copy: the node mounted once and the file put through the mount (no `podman cp`, which pauses the node).
    copy_calls = [call.split()[0] for call in recorded[2:]]
    assert copy_calls.count("mount") == 1 and "cp" not in copy_calls, recorded
    # No module anywhere runs from a file uploaded first: each goes over stdin.
    assert not [call for call in recorded if call.startswith("exec node") and sys.executable in call], recorded
