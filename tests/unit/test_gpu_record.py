"""make gpu-record (tools/gpu_record.py): its dry run on this machine's CPU, and the loud stops on a machine that has no
nvidia-smi or no CUDA device."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from unit_paths import PROJECT

SCRIPT = PROJECT / "tools" / "gpu_record.py"
BENCHRUNNER_SRC = PROJECT / "benchrunner" / "src"


def record(out: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(out), *args], capture_output=True, text=True,
                          env=env or dict(os.environ), timeout=600, check=False)


def torch_imports() -> bool:
    return subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, check=False).returncode == 0


needs_torch = pytest.mark.skipif(not torch_imports(), reason="PyTorch does not import in this Python")


@needs_torch
def test_a_cpu_dry_run_records_everything_but_the_gpu(tmp_path):
    out = tmp_path / "record"
    done = record(out, "--cpu", "--facts-runner", "stand-in")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    commands = {c["name"]: c for c in json.loads((out / "commands.json").read_text())}
    for name in ("nvidia-smi-q-x", "nvidia-smi-q", "nvidia-smi-topo-m", "nvidia-smi-version"):
        assert commands[name]["skipped"].startswith("--cpu dry run"), name
        assert (out / f"{name}.skipped").read_text().startswith("--cpu dry run")
    # The facts modules ran on this machine, through the stand-in for AnsibleModule, and the validation play itself
    # judged the node.
    for module in ("gpu_facts", "rdma_facts", "gpudirect_facts"):
        assert commands[f"facts-{module}"]["rc"] == 0
    assert json.loads((out / "facts-gpu_facts.json").read_text())["present"] is False
    checks = json.loads((out / "validate.json").read_text())["checks"]
    assert set(checks) >= {"nvidia_smi", "peermem_loaded", "gpudirect_route", "gpu_nic_topology", "reboot_pending"}
    assert commands["validate-play"]["rc"] == 0
    assert checks["nvidia_smi"]["status"] == "skip"

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["mode"] == "cpu" and manifest["facts_runner"] == "stand-in" and manifest["problems"] == []
    assert manifest["torch"] and manifest["hostname"] and manifest["date"] and "driver_version" in manifest
    described = subprocess.run(["git", "-C", str(PROJECT), "describe", "--always", "--dirty"], capture_output=True,
                               text=True, check=False).stdout.strip()
    assert manifest["git_describe"] == (described or None)
    points = manifest["points"]
    assert [(p["model"], p["precision"], p["batch_size"]) for p in points] == [("small_cnn", "fp32", 8),
                                                                               ("small_cnn", "fp32", 16)]
    for point in points:
        assert point["status"] == "ok" and point["samples_per_sec"] > 0 and point["window"].startswith("window:")
        assert point["unit"] == "images"
        rank = json.loads((out / "runs" / point["id"] / "raw" / "rank-00000.json").read_text())
        # Started by torchrun, and recorded as such; its start is kept by stage.
        assert (rank["provenance"]["launcher"], rank["provenance"]["torch"]["launched_by"]) == ("torchrun", "torchrun")
        assert list(rank["metrics"]["startup_s"]) >= ["first_step"]
        assert (out / "runs" / point["id"] / "summary.json").is_file()
    numbers = (out / "numbers.md").read_text()
    rows = [line for line in numbers.splitlines() if line.startswith("| small_cnn |")]
    assert len(rows) == 2 and all(" | ok" in row for row in rows)
    assert "| model | precision | batch | per second | 95% CI |" in numbers
    assert all(" images | " in row for row in rows)


def test_no_nvidia_smi_stops_the_record_saying_so(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "bash").symlink_to("/bin/bash")
    done = record(tmp_path / "record", env=dict(os.environ, PATH=str(bin_dir)))
    assert done.returncode == 2
    assert "nvidia-smi is not on PATH" in done.stderr and "--cpu" in done.stderr
    assert (tmp_path / "record" / "FAILED.txt").read_text().startswith("nvidia-smi is not on PATH")


@needs_torch
def test_no_cuda_device_stops_the_record_after_keeping_what_nvidia_smi_said(tmp_path):
    """A machine whose nvidia-smi answers but whose PyTorch sees no GPU (here: a stand-in nvidia-smi, a CPU torch)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\n[ \"$1\" = topo ] && { echo 'topo: no GPU' >&2; exit 9; }\necho \"nvidia-smi $*\"\n")
    smi.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", CUDA_VISIBLE_DEVICES="")
    out = tmp_path / "record"
    done = record(out, env=env)
    assert done.returncode == 2
    assert "sees no CUDA device" in done.stderr
    commands = {c["name"]: c for c in json.loads((out / "commands.json").read_text())}
    assert commands["nvidia-smi-q"]["rc"] == 0 and (out / "nvidia-smi-q.out").read_text() == "nvidia-smi -q\n"
    # A failing command keeps its exit code and what it said.
    assert commands["nvidia-smi-topo-m"]["rc"] == 9 and (out / "nvidia-smi-topo-m.err").read_text() == "topo: no GPU\n"
    assert not (out / "manifest.json").exists()


def test_an_output_folder_in_use_is_refused(tmp_path):
    (tmp_path / "record").mkdir()
    (tmp_path / "record" / "numbers.md").write_text("an earlier record\n")
    done = record(tmp_path / "record", "--cpu")
    assert done.returncode == 2 and "is not empty" in done.stderr


@needs_torch
def test_benchrunner_that_cannot_import_its_needs_stops_the_record_naming_what_failed(tmp_path):
    """The GPU machine's Python has torch but not every package benchrunner needs (jsonschema, there)."""
    shadow = tmp_path / "shadow" / "jsonschema"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('no jsonschema in this Python')\n")
    done = record(tmp_path / "record", "--cpu", env=dict(os.environ, PYTHONPATH=str(shadow.parent)))
    assert done.returncode == 2
    assert "benchrunner does not start here (ImportError: no jsonschema in this Python)" in done.stderr
    assert "predates" not in done.stderr
