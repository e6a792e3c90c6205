"""The validation play's judgement on a GPU node, run by Ansible over a recorded sysfs tree and nvidia-smi output."""

import json
import os
import subprocess
import sys
from pathlib import Path

from benchrunner import results
from test_facts_modules import fake_nvidia_smi
from unit_paths import PROJECT

BUSES = ["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"]


def gpu_node(sysfs, gpus_on_bus=8, peermem=True):
    for bus in BUSES[:gpus_on_bus]:
        sysfs.pci(f"0000:{bus}:00.0", "0x10de", "0x2330", "0x030200", driver="nvidia")
    hca = sysfs.pci("0000:1a:00.0", "0x15b3", "0x1021", "0x020700", driver="mlx5_core")
    sysfs.ib_device("mlx5_0", hca, [("4: ACTIVE", "5: LinkUp", "InfiniBand", "400 Gb/sec (4X NDR)")])
    for module in ["nvidia", "ib_core"] + (["nvidia_peermem"] if peermem else []):
        (sysfs.root / "module" / module).mkdir(parents=True)


def validate(tmp_path, sysfs):
    """playbooks/validate.yml on this machine as the only node; returns the exit code and the summary."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  children:\n    nodes:\n      hosts:\n        gpu001:\n"
                         "          ansible_connection: local\n"
                         f"          ansible_python_interpreter: {sys.executable}\n")
    out = tmp_path / "results"
    extra = {"node_validation_sysfs_root": str(sysfs.root), "node_validation_nvidia_smi": str(fake_nvidia_smi(tmp_path)),
             "node_validation_results_dir": str(out)}
    env = dict(os.environ, ANSIBLE_CONFIG=str(PROJECT / "ansible.cfg"))
    run = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory),
                          "-e", json.dumps(extra), str(PROJECT / "playbooks" / "validate.yml")],
                         cwd=PROJECT, env=env, capture_output=True, text=True, check=False)
    summary = out / "latest.json"
    return run, json.loads(summary.read_text()) if summary.is_file() else None


def test_healthy_gpu_node_passes(tmp_path, sysfs):
    gpu_node(sysfs)
    run, summary = validate(tmp_path, sysfs)
    assert run.returncode == 0, run.stdout[-3000:]
    results.validate(results.NODE_VALIDATION, summary)
    checks = summary["nodes"]["gpu001"]["checks"]
    assert checks["nvidia_smi"] == {"status": "pass", "detail": "8 GPU(s) answer, driver 550.127.08"}
    assert checks["ib_ports_active"]["status"] == "pass"
    assert checks["peermem_loaded"]["status"] == "pass"
    assert summary["cluster"]["versions_uniform"]["status"] == "pass"
    assert summary["cluster"]["versions_uniform"]["detail"]["driver"] == ["550.127.08"]
    assert summary["status"] == "pass"


def test_missing_gpu_and_peermem_fail_after_the_summary_is_written(tmp_path, sysfs):
    # Nine GPUs on the bus, eight answer; nvidia_peermem not loaded.
    gpu_node(sysfs, peermem=False)
    sysfs.pci("0000:dc:00.0", "0x10de", "0x2330", "0x030200", driver="nvidia")
    run, summary = validate(tmp_path, sysfs)
    assert run.returncode != 0
    results.validate(results.NODE_VALIDATION, summary)
    checks = summary["nodes"]["gpu001"]["checks"]
    assert checks["nvidia_smi"] == {"status": "fail", "reason": "8 of 9 GPUs answer nvidia-smi"}
    assert checks["peermem_loaded"] == {"status": "fail", "reason": "nvidia_peermem is not loaded"}
    assert summary["status"] == "fail"
    assert "Node validation failed" in run.stdout
