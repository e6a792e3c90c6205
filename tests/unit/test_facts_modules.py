"""The facts modules run by Ansible itself, against a fake sysfs and a stand-in nvidia-smi."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from unit_paths import FIXTURES, PROJECT


def run_module(module, args):
    env = dict(os.environ, ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json",
               ANSIBLE_CONFIG=str(PROJECT / "ansible.cfg"))
    out = subprocess.run([str(Path(sys.executable).parent / "ansible"), "localhost", "-c", "local", "--check",
                          "-m", f"hpcml.cluster.{module}", "-a", args],
                         cwd=PROJECT, env=env, capture_output=True, text=True, check=False)
    result = json.loads(out.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]
    assert not result.get("failed"), result
    assert result["changed"] is False
    return result["ansible_facts"]


def fake_nvidia_smi(tmp_path):
    script = tmp_path / "nvidia-smi"
    script.write_text("#!/bin/sh\n"
                      f"case \"$1\" in -q) cat {FIXTURES / 'nvidia-smi-q-x.h100x8.xml'} ;;"
                      f" topo) cat {FIXTURES / 'nvidia-smi-topo-m.h100x8.txt'} ;; *) exit 2 ;; esac\n")
    script.chmod(0o755)
    return script


def test_gpu_facts_on_a_gpu_node(sysfs, tmp_path):
    for i, bus in enumerate(["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"]):
        sysfs.pci(f"0000:{bus}:00.0", "0x10de", "0x2330", "0x030200", driver="nvidia", numa=str(i // 4))
    facts = run_module("gpu_facts", f"sysfs_root={sysfs.root} nvidia_smi={fake_nvidia_smi(tmp_path)}")["hpcml_gpu"]
    assert facts["present"] is True
    assert facts["reason"] is None
    assert facts["pci_count"] == facts["driver_count"] == 8
    assert facts["driver_version"] == "550.127.08"
    assert facts["topology"]["nvlink"] is True


def broken_nvidia_smi(tmp_path):
    script = tmp_path / "nvidia-smi"
    script.write_text("#!/bin/sh\n"
                      "echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.' >&2\nexit 9\n")
    script.chmod(0o755)
    return script


# (PCI function present, nvidia-smi to use, whether GPUs are present, the reason reported)
UNUSABLE = {
    "no GPU": (("0000:00:03.0", "0x1af4", "0x1000", "0x020000", "virtio-pci"), None, False,
               "no NVIDIA GPU found on the PCI bus (vendor 0x10de)"),
    "no driver tools": (("0000:18:00.0", "0x10de", "0x2330", "0x030200", None), lambda tmp: tmp / "absent", True,
                        "1 NVIDIA GPU(s) on the PCI bus but nvidia-smi is not installed"),
    "driver not answering": (("0000:18:00.0", "0x10de", "0x2330", "0x030200", None), broken_nvidia_smi, True,
                             "nvidia-smi failed (driver not loaded?): NVIDIA-SMI has failed because it could not "
                             "communicate with the NVIDIA driver."),
}


@pytest.mark.parametrize("case", UNUSABLE, ids=list(UNUSABLE))
def test_gpu_facts_say_why_no_gpu_is_usable(case, sysfs, tmp_path):
    (address, vendor, device, klass, driver), smi, present, reason = UNUSABLE[case]
    sysfs.pci(address, vendor, device, klass, driver=driver)
    args = f"sysfs_root={sysfs.root}" + (f" nvidia_smi={smi(tmp_path)}" if smi else "")
    facts = run_module("gpu_facts", args)["hpcml_gpu"]
    assert facts["present"] is present
    assert facts["driver_count"] == 0
    assert facts["reason"] == reason


def test_rdma_facts(sysfs, tmp_path):
    device = sysfs.pci("0000:1a:00.0", "0x15b3", "0x101b", "0x020700", driver="mlx5_core")
    sysfs.ib_device("mlx5_0", device, [("4: ACTIVE", "5: LinkUp", "InfiniBand", "400 Gb/sec (4X NDR)")])
    facts = run_module("rdma_facts", f"sysfs_root={sysfs.root} ibv_devinfo={fake_ibv_devinfo(tmp_path)}")["hpcml_rdma"]
    assert facts["present"] is True
    assert facts["ibv_devinfo"] is True
    port = facts["devices"][0]["ports"][0]
    assert port["rate_gbps"] == 400.0
    assert port["active_mtu"] == "4096"


def fake_ibv_devinfo(tmp_path):
    script = tmp_path / "ibv_devinfo"
    script.write_text(f"#!/bin/sh\ncat {FIXTURES / 'ibv_devinfo.cx7-ib-roce.txt'}\n")
    script.chmod(0o755)
    return script


def test_gpudirect_facts_on_a_gpu_node_with_infiniband(sysfs, tmp_path):
    sysfs.pci("0000:18:00.0", "0x10de", "0x2330", "0x030200", driver="nvidia")
    device = sysfs.pci("0000:1a:00.0", "0x15b3", "0x101b", "0x020700", driver="mlx5_core")
    sysfs.ib_device("mlx5_0", device, [("4: ACTIVE", "5: LinkUp", "InfiniBand", "400 Gb/sec (4X NDR)")])
    for module in ("nvidia", "nvidia_peermem", "ib_core"):
        (sysfs.root / "module" / module).mkdir(parents=True)
    args = f"sysfs_root={sysfs.root} nvidia_smi={fake_nvidia_smi(tmp_path)}"
    facts = run_module("gpudirect_facts", args)["hpcml_gpudirect"]
    assert facts["ready"] is True
    assert facts["nearest_nics"]["GPU4"] == {"link": "PXB", "nics": ["NIC1"]}


def test_gpudirect_facts_without_hardware(sysfs):
    sysfs.pci("0000:00:03.0", "0x1af4", "0x1000", "0x020000", driver="virtio-pci")
    facts = run_module("gpudirect_facts", f"sysfs_root={sysfs.root}")["hpcml_gpudirect"]
    assert facts["ready"] is False
    assert facts["reason"] == "no NVIDIA GPU on this node"
    assert facts["modules"] == {}


def test_every_plugin_documents_itself():
    env = dict(os.environ, ANSIBLE_CONFIG=str(PROJECT / "ansible.cfg"))
    ansible_doc = str(Path(sys.executable).parent / "ansible-doc")
    for kind, names in (("module", ["gpu_facts", "rdma_facts", "gpudirect_facts"]), ("filter", ["horovod_build"])):
        out = subprocess.run([ansible_doc, "-t", kind, "--json"] + [f"hpcml.cluster.{n}" for n in names],
                             cwd=PROJECT, env=env, capture_output=True, text=True, check=False)
        assert out.returncode == 0, out.stderr
        docs = json.loads(out.stdout)
        for name in names:
            assert docs[f"hpcml.cluster.{name}"]["doc"]["short_description"], name
