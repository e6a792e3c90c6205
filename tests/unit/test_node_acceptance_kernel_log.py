"""node_acceptance's read of the kernel log (tasks/11-counters.yml), run here with stand-ins for journalctl and dmesg,
and what the acceptance judge makes of it: a healthy node's log passes, a log that gave nothing does not."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from test_acceptance import FALLEN

from ansible_collections.hpcml.cluster.plugins.module_utils import acceptance, gpu_errors, parsing
from unit_paths import PROJECT

TASKS = PROJECT / "roles" / "node_acceptance" / "tasks" / "11-counters.yml"
BOOT = "kernel: Linux version 6.1.0-27-amd64\nkernel: nvidia-nvlink: Nvlink Core is being initialized\n"


def read_command() -> str:
    [task] = [t for t in yaml.safe_load(TASKS.read_text()) if t["name"].startswith("Read the kernel log")]
    return task["ansible.builtin.shell"]["cmd"]


def read(tmp_path: Path, journalctl: str | None, dmesg: str | None) -> subprocess.CompletedProcess:
    """The role's command with journalctl and dmesg printing the given text (None: the tool fails)."""
    tools = tmp_path / "tools"
    tools.mkdir()
    for name, text in (("journalctl", journalctl), ("dmesg", dmesg)):
        body = "exit 1\n" if text is None else f"cat <<'LOG'\n{text}LOG\n"
        (tools / name).write_text("#!/bin/sh\n" + body)
        (tools / name).chmod(0o755)
    return subprocess.run(["/bin/bash", "-c", read_command()], capture_output=True, text=True, check=False,
                          env={"PATH": f"{tools}:/usr/bin:/bin"})


def test_a_healthy_nodes_log_reads_as_read_and_passes(tmp_path):
    done = read(tmp_path, BOOT, None)
    assert (done.returncode, done.stdout) == (0, "(2 kernel log lines read, NVRM lines kept)\n")
    assert acceptance.judge_xid(gpu_errors.parse_xid(done.stdout))["status"] == "pass"


def test_the_driver_lines_are_kept_whole_so_a_gpu_lost_without_an_xid_fails(tmp_path):
    xid = "kernel: NVRM: Xid (PCI:0000:84:00): 79, GPU has fallen off the bus.\n"
    done = read(tmp_path, None, BOOT + xid + FALLEN)
    assert done.returncode == 0
    # FALLEN: a driver 570+ losing a GPU without an Xid line, as published (test_acceptance.py), every line NVRM's.
    assert done.stdout == xid + FALLEN + "(7 kernel log lines read, NVRM lines kept)\n"
    events = gpu_errors.parse_xid(done.stdout)["events"]
    assert [(e["pci"], e["xid"]) for e in events] == [("0000:84:00", 79), ("0000:b3:00.0", 79)]
    assert acceptance.judge_xid(gpu_errors.parse_xid(done.stdout))["status"] == "fail"


def test_a_log_neither_tool_could_read_fails_the_read(tmp_path):
    assert read(tmp_path, None, None).returncode != 0


@pytest.mark.parametrize(("journalctl", "dmesg"), [("", None), (None, "")])
def test_a_log_read_empty_is_refused_as_unreadable_never_taken_for_a_healthy_node(tmp_path, journalctl, dmesg):
    done = read(tmp_path, journalctl, dmesg)
    assert (done.returncode, done.stdout) == (0, "")
    with pytest.raises(parsing.ParseError, match="printed nothing"):
        gpu_errors.parse_xid(done.stdout)
