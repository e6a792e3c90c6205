"""The first `make demo` warns only about the user's own setup: not about the lab inventory before `make lab-up` writes
its hosts, not about task names of the hardware steps a CPU node skips, not when a task becomes the benchmark's
account."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from unit_paths import PROJECT

BIN = Path(sys.executable).parent
NOBODY = 65534
# The lab's nodes: containers with no GPU and no HCA, so every hardware step is skipped with its reason.
CPU_NODE = {"gpu_steps": "skip", "gpu_skip_reason": "no NVIDIA GPU on this node", "nvswitch_count": 0,
            "rdma_steps": "skip", "rdma_skip_reason": "no RDMA device on this node"}
OS_FACTS = {
    "debian12": {"os_family": "Debian", "distribution": "Debian", "distribution_major_version": "12",
                 "distribution_version": "12.7", "distribution_release": "bookworm", "architecture": "x86_64",
                 "kernel": "6.1.0-25-amd64"},
    "ubuntu2204": {"os_family": "Debian", "distribution": "Ubuntu", "distribution_major_version": "22",
                   "distribution_version": "22.04", "distribution_release": "jammy", "architecture": "x86_64",
                   "kernel": "5.15.0-119-generic"},
}


def ansible(tool: str, *args: str, cwd: Path = PROJECT) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_CONFIG=str(PROJECT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    return subprocess.run([str(BIN / tool), *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)


def warnings(run: subprocess.CompletedProcess) -> list[str]:
    return [line for line in (run.stdout + run.stderr).splitlines() if "[WARNING]" in line]


@pytest.fixture
def lab_inventory_before_lab_up(tmp_path):
    """inventory/lab as a fresh clone has it: no hosts.yml or credentials yet."""
    copy = tmp_path / "lab"
    shutil.copytree(PROJECT / "inventory" / "lab", copy, ignore=shutil.ignore_patterns("hosts.yml", "credentials"))
    return copy


def test_the_lab_inventory_parses_before_the_lab_exists(lab_inventory_before_lab_up):
    run = ansible("ansible-inventory", "-i", str(lab_inventory_before_lab_up), "--list")
    assert run.returncode == 0, run.stderr
    assert warnings(run) == []
    assert json.loads(run.stdout)["_meta"]["hostvars"] == {}


# make lab-up's play (on localhost), and make lint's syntax check of site.yml (whose plays name the lab's groups).
@pytest.mark.parametrize("command", [["playbooks/lab.yml", "--list-tasks"], ["site.yml", "--syntax-check"]],
                         ids=["lab-up", "syntax-check"])
def test_playbooks_warn_of_nothing_before_the_lab_exists(lab_inventory_before_lab_up, command):
    run = ansible("ansible-playbook", "-i", str(lab_inventory_before_lab_up), *command)
    assert run.returncode == 0, run.stderr
    assert warnings(run) == []


def hardware_steps() -> list[dict]:
    """Each role's task files that main.yml imports only on hardware (a *_steps condition), imported the same way."""
    tasks = []
    for main in sorted((PROJECT / "roles").glob("*/tasks/main.yml")):
        for task in yaml.safe_load(main.read_text()) or []:
            when = task.get("when")
            if "ansible.builtin.import_tasks" in task and isinstance(when, str) and re.search(r"_steps (!=|==) '", when):
                tasks.append({"name": task["name"], "when": when, "ansible.builtin.import_role": {
                    "name": main.parent.parent.name, "tasks_from": task["ansible.builtin.import_tasks"]}})
    return tasks


@pytest.mark.parametrize("os_key", sorted(OS_FACTS))
def test_the_hardware_steps_a_cpu_node_skips_warn_of_nothing(tmp_path, os_key):
    steps = hardware_steps()
    assert {s["ansible.builtin.import_role"]["name"] for s in steps} >= {"nvidia_driver", "gpudirect", "rdma"}
    play = tmp_path / "play.yml"
    play.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": steps}]))
    run = ansible("ansible-playbook", "-i", "localhost,", "-c", "local", "--check", "-e",
                  json.dumps({"ansible_python_interpreter": sys.executable, "ansible_facts": OS_FACTS[os_key],
                              "node_facts_hardware": CPU_NODE}), str(play))
    assert run.returncode == 0, run.stdout[-3000:]
    recap = re.search(r"ok=(\d+)\s+changed=(\d+).*skipped=(\d+)", run.stdout)
    assert recap and recap.group(1) == "0" and int(recap.group(3)) > 20, run.stdout[-3000:]  # nothing ran
    assert warnings(run) == [], run.stdout


needs_root = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                                reason="runs a module as nobody: needs root and setpriv")


def account_home(path: Path) -> Path:
    path.mkdir(mode=0o755)
    os.chown(path, NOBODY, NOBODY)
    return path


def module_as_account(home: Path, closed: Path) -> list[str]:
    """A module run as the account (nobody, with that HOME), started where the account cannot enter: its warnings."""
    python = home.parent / f"python-as-{home.name}"
    python.write_text(f"#!/bin/sh\nHOME={home} exec setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups "
                      f"{sys.executable} \"$@\"\n")
    python.chmod(0o755)
    run = ansible("ansible", "localhost", "-i", "localhost,", "-c", "local", "-m", "ansible.builtin.command",
                  "-a", "id -u", "-e", f"ansible_python_interpreter={python}", "-e", "ansible_pipelining=true", cwd=closed)
    assert run.returncode == 0 and run.stdout.strip().endswith(str(NOBODY)), run.stdout + run.stderr
    return warnings(run)


@pytest.fixture
def scratch():
    """A directory nobody can reach (pytest's own are root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="hpcml-account-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


@needs_root
def test_a_task_that_becomes_the_benchmark_account_warns_of_nothing(scratch):
    """The launch becomes the account from root's login, whose working directory (root's home) the account cannot
    enter, so its module works in remote_tmp as the account sees it. Stood in for by a Python that runs as nobody with
    the account's HOME, started from a directory only root may enter."""
    closed = scratch / "closed"
    closed.mkdir(mode=0o700)
    # The stand-in shows the lab's warning for a home without remote_tmp.
    fresh = module_as_account(account_home(scratch / "fresh"), closed)
    assert any("did not exist and was created with a mode of 0700" in line for line in fresh), fresh

    # The account's home as the mpi_ssh role leaves it.
    home = account_home(scratch / "home")
    play = scratch / "account.yml"
    play.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"ansible.builtin.include_role": {"name": "mpi_ssh", "tasks_from": "remote_tmp"}}]}]))
    setup = ansible("ansible-playbook", "-i", "localhost,", "-c", "local", "-e", json.dumps({
        "ansible_python_interpreter": sys.executable, "mpi_ssh_home": str(home), "mpi_ssh_user": "nobody",
        "mpi_ssh_group": "nogroup", "cluster_mpi_user": "nobody"}), str(play))
    assert setup.returncode == 0, setup.stdout[-3000:]
    made = home / ".ansible" / "tmp"
    assert (made.stat().st_uid, made.stat().st_mode & 0o777) == (NOBODY, 0o700)  # the account's alone
    assert module_as_account(home, closed) == []
