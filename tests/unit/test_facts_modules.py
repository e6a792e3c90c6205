"""The facts modules run by Ansible itself, against a fake sysfs and a stand-in nvidia-smi."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_gpudirect import OPEN_VERSION, PROPRIETARY_VERSION

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


# The node the module tests stand in for: an H100 PCIe beside mlx5_0 as recorded in sglang issue 24413, answering
# -q -x with a GPU of driver 535.
SMI_XML = "nvidia-smi-q-x.netdata.rtx-4090-driver-535.xml"
SMI_TOPO = "nvidia-smi-topo-m.sglang-24413.h100-pcie-x1-nic.txt"


def fake_nvidia_smi(tmp_path, topo=SMI_TOPO, topo_rc=0):
    """A stand-in nvidia-smi printing recorded output: -q -x from SMI_XML, topo -m from topo with exit status topo_rc."""
    script = tmp_path / "nvidia-smi"
    script.write_text("#!/bin/sh\n"
                      f"case \"$1\" in -q) cat {FIXTURES / SMI_XML} ;;"
                      f" topo) cat {FIXTURES / topo}; exit {topo_rc} ;; *) exit 2 ;; esac\n")
    script.chmod(0o755)
    return script


def fake_tool(tmp_path, name, fixture, rc=0):
    """A stand-in tool that prints a recorded output whatever it is asked."""
    script = tmp_path / name
    script.write_text(f"#!/bin/sh\ncat {FIXTURES / fixture}\nexit {rc}\n")
    script.chmod(0o755)
    return script


def test_gpu_facts_on_a_gpu_node(sysfs, tmp_path):
    sysfs.pci("0000:84:00.0", "0x10de", "0x2684", "0x030000", driver="nvidia")
    facts = run_module("gpu_facts", f"sysfs_root={sysfs.root} nvidia_smi={fake_nvidia_smi(tmp_path)}")["hpcml_gpu"]
    assert facts["present"] is True
    assert facts["reason"] is None
    assert facts["pci_count"] == facts["driver_count"] == 1
    assert facts["driver_version"] == "535.86.05"
    assert facts["gpus"][0]["minor_number"] == 0
    assert facts["topology"]["nics"] == {"NIC0": "mlx5_0"}
    assert facts["topology_error"] is None


def test_gpu_facts_say_why_the_topology_is_missing(sysfs, tmp_path):
    sysfs.pci("0000:84:00.0", "0x10de", "0x2684", "0x030000", driver="nvidia")
    smi = fake_nvidia_smi(tmp_path, topo="nvidia-smi-topo-m.windows.nvidia-geforce-rtx-2080-super.591.86.txt", topo_rc=255)
    facts = run_module("gpu_facts", f"sysfs_root={sysfs.root} nvidia_smi={smi}")["hpcml_gpu"]
    assert facts["topology"] is None
    assert facts["topology_error"] == ("nvidia-smi topo -m exited with 255: ERROR: Option -m is missing its value. "
                                       "Please run 'nvidia-smi -h' for help.")


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
    "driver answering with no XML": (("0000:18:00.0", "0x10de", "0x2330", "0x030200", None),
                                     lambda tmp: fake_tool(tmp, "nvidia-smi", SMI_TOPO), True,
                                     "nvidia-smi -q -x: not XML (syntax error: line 1, column 8); its output began "
                                     "'GPU0    NIC0    CPU Affinity    NUMA Affinity   GPU NUMA ID\\nGPU0     X      "
                                     "PHB     0-251   0               N/A\\nNIC0    ' ..."),
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


def mlx4_node(sysfs):
    device = sysfs.pci("0000:1a:00.0", "0x15b3", "0x1003", "0x020700", driver="mlx4_core")
    sysfs.ib_device("mlx4_1", device, [("4: ACTIVE", "5: LinkUp", "InfiniBand", "56 Gb/sec (4X FDR)")])


def test_rdma_facts_with_ibv_devinfo(sysfs, tmp_path):
    mlx4_node(sysfs)
    verbs = fake_tool(tmp_path, "ibv_devinfo", "ibv_devinfo.heioy-books.mlx4-x2-ib-4port.txt")
    facts = run_module("rdma_facts", f"sysfs_root={sysfs.root} ibv_devinfo={verbs}")["hpcml_rdma"]
    assert facts["present"] is True
    assert (facts["port_details"], facts["port_details_error"]) == ("ibv_devinfo", None)
    port = facts["devices"][0]["ports"][0]
    assert port["rate_gbps"] == 56.0
    assert (port["active_mtu"], port["lid"]) == ("4096", "22")


def test_rdma_facts_fall_back_to_ibstat(sysfs, tmp_path):
    mlx4_node(sysfs)
    ibstat = fake_tool(tmp_path, "ibstat", "ibstat.heioy-books.mlx4-x2-ib-4port.txt")
    facts = run_module("rdma_facts", f"sysfs_root={sysfs.root} ibv_devinfo={tmp_path / 'absent'} ibstat={ibstat}")
    port = facts["hpcml_rdma"]["devices"][0]["ports"][0]
    assert facts["hpcml_rdma"]["port_details"] == "ibstat"
    assert (port["lid"], port["sm_lid"], port["active_mtu"]) == ("1", "7", None)


@pytest.mark.parametrize("rc", [0, 255], ids=["exit 0", "exit 255 as recorded"])
def test_rdma_facts_report_output_they_cannot_read(rc, sysfs, tmp_path):
    mlx4_node(sysfs)
    ibstat = fake_tool(tmp_path, "ibstat", "ibstat.gpud.39.0.a100.failed.ibpanic.exit-255.0.txt", rc=rc)
    facts = run_module("rdma_facts", f"sysfs_root={sysfs.root} ibv_devinfo={tmp_path / 'absent'} ibstat={ibstat}")
    assert facts["hpcml_rdma"]["port_details"] is None
    error = facts["hpcml_rdma"]["port_details_error"]
    if rc == 0:
        assert error.startswith("ibstat: unexpected line \"ibpanic: ")
    else:
        assert error.startswith("ibstat exited with 255: CA 'mlx5_0'\n        CA type: MT4124")
        assert error.endswith(" ...") and len(error) < 250


def gpu_and_hca(sysfs, modules=("nvidia", "nvidia_peermem", "ib_core")):
    sysfs.pci("0000:84:00.0", "0x10de", "0x2331", "0x030200", driver="nvidia")
    device = sysfs.pci("0000:1a:00.0", "0x15b3", "0x101b", "0x020700", driver="mlx5_core")
    sysfs.ib_device("mlx5_0", device, [("4: ACTIVE", "5: LinkUp", "InfiniBand", "400 Gb/sec (4X NDR)")])
    for module in modules:
        (sysfs.root / "module" / module).mkdir(parents=True)
        (sysfs.root / "module" / module / "version").write_text("570.172.08\n")


def proc_tree(tmp_path, release, nvidia_version=None):
    """A /proc with the kernel release and, where the driver is loaded, its version file."""
    root = tmp_path / "proc"
    (root / "sys" / "kernel").mkdir(parents=True)
    (root / "sys" / "kernel" / "osrelease").write_text(release + "\n")
    if nvidia_version is not None:
        (root / "driver" / "nvidia").mkdir(parents=True)
        (root / "driver" / "nvidia" / "version").write_text(nvidia_version)
    return root


def test_gpudirect_facts_on_a_gpu_node_with_infiniband(sysfs, tmp_path):
    gpu_and_hca(sysfs)
    args = f"sysfs_root={sysfs.root} nvidia_smi={fake_nvidia_smi(tmp_path)} proc_root={proc_tree(tmp_path, '5.15.0-119-generic')}"
    facts = run_module("gpudirect_facts", args)["hpcml_gpudirect"]
    assert (facts["ready"], facts["route"]) == (True, "peermem")
    assert facts["nearest_nics"] == {"GPU0": {"link": "PHB", "nics": ["mlx5_0"]}}
    assert facts["gpus_far_from_nic"] == ["GPU0"]


def test_gpudirect_facts_find_the_dmabuf_route_on_the_inbox_stack(sysfs, tmp_path):
    gpu_and_hca(sysfs, modules=("nvidia", "ib_core", "mlx5_ib"))
    proc = proc_tree(tmp_path, "6.8.0-45-generic", OPEN_VERSION)
    facts = run_module("gpudirect_facts", f"sysfs_root={sysfs.root} nvidia_smi={fake_nvidia_smi(tmp_path)} proc_root={proc}")
    assert (facts["hpcml_gpudirect"]["ready"], facts["hpcml_gpudirect"]["route"]) == (True, "dmabuf")
    assert facts["hpcml_gpudirect"]["routes"]["dmabuf"]["kernel_modules"] == "open"


@pytest.mark.parametrize(("release", "version", "why"), [
    ("6.8.0-45-generic", PROPRIETARY_VERSION, "the loaded NVIDIA kernel modules are the proprietary flavour"),
    ("4.18.0-553.el8_10.x86_64", OPEN_VERSION, "kernel 4.18.0-553.el8_10.x86_64 is older than 5.12"),
    ("6.8.0-45-generic", "garbled\n", "/proc/driver/nvidia/version has no 'NVRM version"),
], ids=["proprietary modules", "RHEL 8 kernel", "unreadable version file"])
def test_gpudirect_facts_without_either_route_say_why(release, version, why, sysfs, tmp_path):
    gpu_and_hca(sysfs, modules=("nvidia", "ib_core"))
    proc = proc_tree(tmp_path, release, version)
    facts = run_module("gpudirect_facts", f"sysfs_root={sysfs.root} nvidia_smi={fake_nvidia_smi(tmp_path)} proc_root={proc}")
    assert (facts["hpcml_gpudirect"]["ready"], facts["hpcml_gpudirect"]["route"]) == (False, None)
    assert facts["hpcml_gpudirect"]["reason"].startswith("neither GPUDirect RDMA route is available: peermem: "
                                                         "nvidia_peermem is not loaded")
    assert why in facts["hpcml_gpudirect"]["reason"]


# topo -m output that cannot be judged, its exit status, and the reason the node is then not ready.
UNREADABLE_TOPOLOGY = {
    "error text, exit 0": ("nvidia-smi-topo-m.windows.nvidia-geforce-rtx-2080-super.591.86.txt", 0,
                           "the GPU/NIC topology could not be read: nvidia-smi topo -m: no header row starting with "
                           "GPU0; its output began \"ERROR: Option -m is missing its value. Please run 'nvidia-smi -h' "
                           "for help.\""),
    "failing": ("nvidia-smi-topo-m.windows.nvidia-geforce-rtx-2080-super.591.86.txt", 255,
                "the GPU/NIC topology could not be read: nvidia-smi topo -m exited with 255: ERROR: Option -m is "
                "missing its value. Please run 'nvidia-smi -h' for help."),
    "no NIC in it": ("nvidia-smi-topo-m.linux.nvidia-h100-80gb-hbm3.590.48.01.txt", 0,
                     "nvidia-smi topo -m shows no NIC although the node has RDMA devices"),
}


@pytest.mark.parametrize("case", UNREADABLE_TOPOLOGY, ids=list(UNREADABLE_TOPOLOGY))
def test_gpudirect_facts_never_pass_on_an_unreadable_topology(case, sysfs, tmp_path):
    topo, rc, reason = UNREADABLE_TOPOLOGY[case]
    gpu_and_hca(sysfs)
    args = (f"sysfs_root={sysfs.root} nvidia_smi={fake_nvidia_smi(tmp_path, topo=topo, topo_rc=rc)} "
            f"proc_root={proc_tree(tmp_path, '6.8.0-45-generic')}")
    facts = run_module("gpudirect_facts", args)["hpcml_gpudirect"]
    assert facts["ready"] is False
    assert facts["reason"] == facts["topology_problem"] == reason
    assert facts["nearest_nics"] == {}


def test_gpudirect_facts_without_hardware(sysfs):
    sysfs.pci("0000:00:03.0", "0x1af4", "0x1000", "0x020000", driver="virtio-pci")
    facts = run_module("gpudirect_facts", f"sysfs_root={sysfs.root}")["hpcml_gpudirect"]
    assert facts["ready"] is False
    assert facts["reason"] == "no NVIDIA GPU on this node"
    assert facts["modules"] == {}


def test_every_plugin_documents_itself():
    env = dict(os.environ, ANSIBLE_CONFIG=str(PROJECT / "ansible.cfg"))
    ansible_doc = str(Path(sys.executable).parent / "ansible-doc")
    modules = ["gpu_facts", "rdma_facts", "gpudirect_facts", "node_acceptance"]
    for kind, names in (("module", modules), ("filter", ["horovod_build", "threshold_problems"])):
        out = subprocess.run([ansible_doc, "-t", kind, "--json"] + [f"hpcml.cluster.{n}" for n in names],
                             cwd=PROJECT, env=env, capture_output=True, text=True, check=False)
        assert out.returncode == 0, out.stderr
        docs = json.loads(out.stdout)
        for name in names:
            assert docs[f"hpcml.cluster.{name}"]["doc"]["short_description"], name
