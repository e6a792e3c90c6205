"""The gpudirect role's route: chosen from the RDMA stack, refused where the driver, kernel or stack cannot carry it, and
for peermem the driver's DKMS module rebuilt against OFED when it was built before OFED. Run by Ansible with the
role's own vars and tasks, crafted facts, and stand-in modinfo and dkms that record what they are asked."""

import os
import time

import pytest
import yaml
from test_distribution import OS_FACTS, ROLES, playbook, render, role_vars

TASKS = ROLES / "gpudirect" / "tasks"
RUN = {"node_facts_hardware": {"gpu_steps": "run", "rdma_steps": "run", "gpu_skip_reason": None,
                               "rdma_skip_reason": None}}


@pytest.mark.parametrize(("chosen", "stack", "route"), [
    ("auto", "inbox", "dmabuf"), ("auto", "mlnx_ofed", "peermem"), ("dmabuf", "doca", "dmabuf"),
])
def test_auto_route_follows_the_rdma_stack(tmp_path, chosen, stack, route):
    values = render(tmp_path, "gpudirect", "ubuntu2404", ["_gpudirect_route"], gpudirect_route=chosen, rdma_stack=stack)
    assert values["_gpudirect_route"] == route


def preflight(tmp_path, os_key, **extra):
    # role_path: the file picks its OS family's vars with first_found, as in the role.
    return playbook(tmp_path, {"vars_files": role_vars("gpudirect"), "vars": {"role_path": str(TASKS.parent)},
                               "tasks": yaml.safe_load((TASKS / "00-preflight.yml").read_text())},
                    OS_FACTS[os_key], extra)


@pytest.mark.parametrize(("os_key", "extra", "message"), [
    ("ubuntu2404", {"gpudirect_route": "peermem", "rdma_stack": "inbox"},
     "means peermem here, which needs MLNX_OFED or DOCA-OFED (rdma_stack: doca or mlnx_ofed; now 'inbox')"),
    ("ubuntu2204", {"rdma_stack": "inbox", "nvidia_driver_kernel_modules": "proprietary"},
     "means dmabuf here, which needs the open kernel modules (nvidia_driver_kernel_modules: open; now 'proprietary')"),
    ("rhel8", {"rdma_stack": "inbox"}, "and Linux 5.12 or later (this node runs 4.18.0-553.el8_10.x86_64)"),
    ("ubuntu2404", {"rdma_stack": "doca", "_nvidia_driver_prebuilt": ["linux-modules-nvidia-580-server-open-6.8.0-45-generic"]},
     "and a driver built by DKMS, to rebuild it against OFED (now prebuilt: linux-modules-nvidia-580-server-open-6.8.0-45"),
], ids=["peermem on inbox", "dmabuf on proprietary modules", "dmabuf on RHEL 8's kernel", "peermem on prebuilt modules"])
def test_preflight_refuses_a_route_the_node_cannot_carry(tmp_path, os_key, extra, message):
    run = preflight(tmp_path, os_key, **extra)
    assert run.returncode != 0
    assert message in " ".join(run.stdout.split())


@pytest.mark.parametrize(("os_key", "extra"), [
    ("rhel9", {"rdma_stack": "inbox"}), ("rhel8", {"rdma_stack": "doca"}),
])
def test_preflight_takes_a_route_the_node_can_carry(tmp_path, os_key, extra):
    run = preflight(tmp_path, os_key, **extra)
    assert run.returncode == 0, run.stdout[-2000:]


class Node:
    """OFED's kernel tree, the driver's DKMS tree and nvidia-peermem.ko under tmp_path, with modinfo and dkms
    stand-ins on PATH: dkms logs its arguments and, on install, writes the module anew (unless told not to)."""

    def __init__(self, tmp_path, ofed=True, peermem_age=None, dkms_rebuilds=True):
        self.root = tmp_path
        self.ofa = tmp_path / "usr/src/ofa_kernel/default"
        self.dkms = tmp_path / "var/lib/dkms"
        (self.dkms / "nvidia-open" / "580.95.05").mkdir(parents=True)
        self.ko = tmp_path / "lib/modules/5.14.0-427.el9.x86_64/extra/nvidia-peermem.ko.xz"
        self.ko.parent.mkdir(parents=True)
        if ofed:
            self.ofa.mkdir(parents=True)
            (self.ofa / "Module.symvers").write_text("0x1 ib_register_peer_memory_client\tvmlinux\tEXPORT_SYMBOL\t\n")
        if peermem_age is not None:
            self.ko.write_bytes(b"built")
            stamp = time.time() + peermem_age
            os.utime(self.ko, (stamp, stamp))
        self.log = tmp_path / "dkms.log"
        tools = tmp_path / "bin"
        tools.mkdir()
        (tools / "modinfo").write_text(f"#!/bin/sh\n[ -e {self.ko} ] || exit 1\necho {self.ko}\n")
        rebuild = f"touch {self.ko}" if dkms_rebuilds else "true"
        (tools / "dkms").write_text(f"#!/bin/sh\necho \"$*\" >> {self.log}\n"
                                    f"[ \"$1\" = install ] && {rebuild}\nexit 0\n")
        for tool in ("modinfo", "dkms"):
            (tools / tool).chmod(0o755)
        self.path = tools

    def calls(self):
        return self.log.read_text().splitlines() if self.log.exists() else []


def rebuild_tasks():
    """10-peermem.yml up to the rebuild: what follows writes units and modprobe files on this machine."""
    tasks = yaml.safe_load((TASKS / "10-peermem.yml").read_text())
    last = next(i for i, task in enumerate(tasks) if task["name"] == "Rebuild the driver's DKMS module against OFED")
    return tasks[:last + 1]


def rebuild(tmp_path, node):
    extra = {"_gpudirect_ofa_candidates": [str(node.ofa)], "_gpudirect_dkms_tree": str(node.dkms),
             "nvidia_driver_version": "580.95.05", "rdma_stack": "doca", **RUN}
    play = {"vars_files": role_vars("gpudirect"), "environment": {"PATH": f"{node.path}:{os.environ['PATH']}"},
            "tasks": rebuild_tasks()}
    return playbook(tmp_path, play, OS_FACTS["rhel9"], extra)


def test_peermem_built_before_ofed_is_rebuilt_against_it(tmp_path):
    node = Node(tmp_path, peermem_age=-3600)
    run = rebuild(tmp_path, node)
    assert run.returncode == 0, run.stdout[-3000:]
    kernel = "5.14.0-427.el9.x86_64"
    assert node.calls() == [f"remove -m nvidia-open -v 580.95.05 -k {kernel}", f"install -m nvidia-open -v 580.95.05 -k {kernel}"]


def test_peermem_built_after_ofed_is_left_alone(tmp_path):
    node = Node(tmp_path, peermem_age=3600)
    run = rebuild(tmp_path, node)
    assert run.returncode == 0, run.stdout[-3000:]
    assert node.calls() == []


def test_peermem_without_ofed_fails_before_building_a_stub(tmp_path):
    node = Node(tmp_path, ofed=False, peermem_age=-3600)
    run = rebuild(tmp_path, node)
    assert run.returncode != 0
    assert "no OFED kernel tree" in " ".join(run.stdout.split())
    assert node.calls() == []


def test_a_rebuild_that_leaves_the_old_module_fails_loudly(tmp_path):
    node = Node(tmp_path, peermem_age=-3600, dkms_rebuilds=False)
    run = rebuild(tmp_path, node)
    assert run.returncode != 0
    assert "nvidia-peermem was not rebuilt against OFED" in " ".join(run.stdout.split())
