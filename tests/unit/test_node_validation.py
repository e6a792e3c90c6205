"""The validation play's judgement on a GPU node, run by Ansible over a recorded sysfs tree and nvidia-smi output."""

import json
import os
import subprocess
import sys
from pathlib import Path

from test_facts_modules import fake_nvidia_smi

from benchrunner import results
from unit_paths import PROJECT

BUSES = ["84", "85"]


def gpu_node(sysfs, gpus_on_bus=1, peermem=True):
    for bus in BUSES[:gpus_on_bus]:
        sysfs.pci(f"0000:{bus}:00.0", "0x10de", "0x2684", "0x030000", driver="nvidia")
    hca = sysfs.pci("0000:1a:00.0", "0x15b3", "0x1021", "0x020700", driver="mlx5_core")
    sysfs.ib_device("mlx5_0", hca, [("4: ACTIVE", "5: LinkUp", "InfiniBand", "400 Gb/sec (4X NDR)")])
    for module in ["nvidia", "ib_core"] + (["nvidia_peermem"] if peermem else []):
        (sysfs.root / "module" / module).mkdir(parents=True)


def validate(tmp_path, sysfs, **smi):
    """playbooks/validate.yml on this machine as the only node, nvidia-smi answering with recorded output (smi: the
    topo -m fixture and its exit status); returns the exit code and the summary."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  children:\n    nodes:\n      hosts:\n        gpu001:\n"
                         "          ansible_connection: local\n"
                         f"          ansible_python_interpreter: {sys.executable}\n")
    out = tmp_path / "results"
    extra = {"node_validation_sysfs_root": str(sysfs.root), "node_validation_nvidia_smi": str(fake_nvidia_smi(tmp_path, **smi)),
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
    assert checks["nvidia_smi"] == {"status": "pass", "detail": "1 GPU(s) answer, driver 535.86.05"}
    assert checks["ib_ports_active"]["status"] == "pass"
    assert checks["peermem_loaded"]["status"] == "pass"
    assert checks["gpu_nic_topology"] == {"status": "pass", "detail": {
        "nearest_nics": {"GPU0": {"link": "PHB", "nics": ["mlx5_0"]}}, "gpus_far_from_nic": ["GPU0"]}}
    assert summary["cluster"]["versions_uniform"]["status"] == "pass"
    assert summary["cluster"]["versions_uniform"]["detail"]["driver"] == ["535.86.05"]
    assert summary["status"] == "pass"


def test_missing_gpu_and_peermem_fail_after_the_summary_is_written(tmp_path, sysfs):
    # Two GPUs on the bus, one answers; nvidia_peermem not loaded.
    gpu_node(sysfs, gpus_on_bus=2, peermem=False)
    run, summary = validate(tmp_path, sysfs)
    assert run.returncode != 0
    results.validate(results.NODE_VALIDATION, summary)
    checks = summary["nodes"]["gpu001"]["checks"]
    assert checks["nvidia_smi"] == {"status": "fail", "reason": "1 of 2 GPUs answer nvidia-smi"}
    assert checks["peermem_loaded"] == {"status": "fail", "reason": "nvidia_peermem is not loaded"}
    assert summary["status"] == "fail"
    assert "Node validation failed" in run.stdout


def test_unreadable_topology_fails_its_own_check(tmp_path, sysfs):
    # A recorded failure of `nvidia-smi topo -m` (Windows driver 591.86) with exit status 0: before, it read as no NIC
    # far from any GPU.
    gpu_node(sysfs)
    run, summary = validate(tmp_path, sysfs, topo="nvidia-smi-topo-m.windows.nvidia-geforce-rtx-2080-super.591.86.txt")
    assert run.returncode != 0
    results.validate(results.NODE_VALIDATION, summary)
    checks = summary["nodes"]["gpu001"]["checks"]
    assert checks["gpu_nic_topology"]["status"] == "fail"
    assert checks["gpu_nic_topology"]["reason"].startswith("the GPU/NIC topology could not be read: nvidia-smi topo -m: "
                                                           "no header row starting with GPU0")
    assert checks["peermem_loaded"]["status"] == "pass"
    assert summary["status"] == "fail"
