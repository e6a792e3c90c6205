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

# podman exec [-i] NAME CMD..., podman cp SRC NAME:DST, podman mount NAME, podman inspect --format F NAME (answered
# from $PODMAN_INSPECT: the container's ID and runtime, or nothing for a podman without the container); the node's
# filesystem is this machine's.
STAND_IN = """#!/bin/sh
echo "$*" >> "$PODMAN_CALLS"
case "$1" in
  exec) shift; if [ "$1" = "-i" ]; then shift; fi; shift; exec "$@" ;;
  mount) echo / ;;
  cp) cp "$2" "${3#*:}" ;;
  inspect) [ -n "$PODMAN_INSPECT" ] && echo "$PODMAN_INSPECT" || exit 125 ;;
  *) exit 125 ;;
esac
"""
# runc --root ROOT exec ID CMD...: recorded in the same log, run here.
RUNC = """#!/bin/sh
echo "runc $*" >> "$PODMAN_CALLS"
[ "$1" = --root ] && [ "$3" = exec ] || exit 1
shift 4
exec "$@"
"""
CONTAINER_ID = "4f1c" * 16

PLAY = [{
    "hosts": "all", "gather_facts": False,
    "tasks": [
        {"name": "A module", "ansible.builtin.command": "true", "changed_when": False},
        {"name": "Another", "ansible.builtin.stat": {"path": "/"}},
        {"name": "A file copied", "ansible.builtin.copy": {"src": "{{ source }}", "dest": "{{ dest }}", "mode": "0600"}},
    ],
}]


def run_play(tmp_path: Path, inspect: str, runc_root: Path) -> list[str]:
    """The play through the connection against the stand-ins; the podman and runc calls it made."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("podman", STAND_IN), ("runc", RUNC)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    calls = tmp_path / "calls.log"
    (tmp_path / "play.yml").write_text(yaml.safe_dump(PLAY))
    (tmp_path / "source.txt").write_text("copied\n")
    config = yaml.safe_load((PROJECT / ".config" / "molecule" / "config.yml").read_text())["provisioner"]
    env = {**os.environ, "PODMAN_CALLS": str(calls), "PODMAN_INSPECT": inspect, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "ANSIBLE_CONNECTION_PLUGINS": str(PLUGINS), "ANSIBLE_PIPELINING": config["env"]["ANSIBLE_PIPELINING"],
           "ANSIBLE_LOCAL_TEMP": str(tmp_path / "local"), "ANSIBLE_REMOTE_TEMP": str(tmp_path / "remote")}
    inventory = (f"node ansible_connection={config['connection_options']['ansible_connection']} "
                 f"ansible_podman_executable={bin_dir / 'podman'} ansible_podman_runc_root={runc_root} "
                 f"ansible_python_interpreter={sys.executable}\n")
    (tmp_path / "hosts").write_text(inventory)
    done = subprocess.run([shutil.which("ansible-playbook", path=str(Path(sys.executable).parent)) or "ansible-playbook",
                           "-i", str(tmp_path / "hosts"), str(tmp_path / "play.yml"),
                           "-e", f"source={tmp_path / 'source.txt'} dest={tmp_path / 'dest.txt'}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "dest.txt").read_text() == "copied\n"
    return calls.read_text().splitlines()


def test_each_module_is_one_pipelined_podman_exec_and_a_copy_mounts_the_node(tmp_path):
    # A podman that does not say the container runs with runc (here: inspect fails): every command through podman.
    recorded = [call for call in run_play(tmp_path, "", tmp_path / "runc") if not call.startswith("inspect ")]
    # The two modules: one `podman exec -i` each, the module on stdin; no mount, no temporary folder.
    assert [call.split()[:3] for call in recorded[:2]] == [["exec", "-i", "node"]] * 2, recorded
    # The copy: the node mounted once and the file put through the mount (no `podman cp`, which pauses the node).
    copy_calls = [call.split()[0] for call in recorded[2:]]
    assert copy_calls.count("mount") == 1 and "cp" not in copy_calls, recorded
    # No module anywhere runs from a file uploaded first: each goes over stdin.
    assert not [call for call in recorded if call.startswith("exec node") and sys.executable in call], recorded


def test_a_container_podman_runs_with_runc_takes_each_command_through_runc_exec(tmp_path):
    runc_root = tmp_path / "runc"
    (runc_root / CONTAINER_ID).mkdir(parents=True)
    (runc_root / CONTAINER_ID / "state.json").write_text("{}")
    recorded = run_play(tmp_path, f"{CONTAINER_ID} runc", runc_root)
    # podman is asked once for the play, then every command goes to runc exec; the copy still mounts the node.
    assert [call for call in recorded if call.startswith("inspect ")] == ["inspect --format {{.Id}} {{.OCIRuntime}} node"]
    execs = [call for call in recorded if call.startswith("runc ")]
    assert execs and all(call.startswith(f"runc --root {runc_root} exec {CONTAINER_ID} ") for call in execs), recorded
    assert not [call for call in recorded if call.startswith("exec ")], recorded
    assert [call.split()[0] for call in recorded].count("mount") == 1, recorded


def test_a_container_runc_has_no_state_for_goes_through_podman_exec(tmp_path):
    # runc keeps no state for the ID podman gave (not its root, or the container is gone): podman exec, as before.
    recorded = run_play(tmp_path, f"{CONTAINER_ID} runc", tmp_path / "runc")
    assert not [call for call in recorded if call.startswith("runc ")], recorded
    assert [call.split()[:3] for call in recorded if call.startswith("exec ")][:2] == [["exec", "-i", "node"]] * 2
