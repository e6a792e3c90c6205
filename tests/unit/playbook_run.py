"""Runs a play on this machine as the only node, the way ansible-playbook runs it for the nodes, and reads its recap."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from unit_paths import PROJECT


class Run:
    def __init__(self, completed: subprocess.CompletedProcess):
        self.returncode = completed.returncode
        self.stdout = completed.stdout
        self.stderr = completed.stderr
        recap = re.search(r"node001\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", self.stdout)
        assert recap, self.stdout[-3000:] + self.stderr[-3000:]
        self.ok, self.changed, self.unreachable, self.failed = (int(n) for n in recap.groups())

    def refused(self, message: str) -> bool:
        """Failed with this message and changed nothing."""
        text = " ".join(self.stdout.split())
        return self.returncode != 0 and self.failed > 0 and self.changed == 0 and message in text


def play(tmp_path: Path, tasks: list, extravars: dict | None = None, gather_facts: bool = False,
         hostvars: dict | None = None, verbosity: int = 0, check: bool = False, env: dict | None = None) -> Run:
    """The tasks as a play on node001; check: in check mode; env: further Ansible settings (callbacks, plugin paths)."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"children": {"nodes": {"hosts": {"node001": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable, **(hostvars or {})}}}}}}))
    playbook = tmp_path / "play.yml"
    playbook.write_text(json.dumps([{"hosts": "nodes", "gather_facts": gather_facts, "tasks": tasks}]))
    # Plain text whatever the caller's settings (the Makefile forces colour outside CI): the recap is parsed.
    settings = dict(os.environ, ANSIBLE_CONFIG=str(PROJECT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
                    ANSIBLE_STDOUT_CALLBACK="default",
                    ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    settings.update(env or {})
    flags = (["-" + "v" * verbosity] if verbosity else []) + (["--check"] if check else [])
    completed = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory),
                                "-e", json.dumps(extravars or {}), str(playbook), *flags],
                               cwd=PROJECT, env=settings, capture_output=True, text=True, check=False)
    return Run(completed)


def role_tasks(role: str, tasks_from: str = "main") -> list:
    return [{"name": f"{role} {tasks_from}", "ansible.builtin.include_role": {"name": role, "tasks_from": tasks_from}}]
