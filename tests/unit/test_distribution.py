"""Distribution details of the node-layer roles: the package names, repositories and guards each OS gets, rendered or
run by Ansible from the roles' own vars and tasks with crafted facts (no node, no package manager)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from unit_paths import PROJECT

ROLES = PROJECT / "roles"
OS_FACTS = {
    "rhel8": {"os_family": "RedHat", "distribution": "RedHat", "distribution_major_version": "8",
              "distribution_version": "8.10", "architecture": "x86_64", "kernel": "4.18.0-553.el8_10.x86_64"},
    "rhel9": {"os_family": "RedHat", "distribution": "RedHat", "distribution_major_version": "9",
              "distribution_version": "9.4", "architecture": "x86_64", "kernel": "5.14.0-427.el9.x86_64"},
    "rocky8": {"os_family": "RedHat", "distribution": "Rocky", "distribution_major_version": "8",
               "distribution_version": "8.10", "architecture": "x86_64", "kernel": "4.18.0-553.el8_10.x86_64"},
    "rocky9": {"os_family": "RedHat", "distribution": "Rocky", "distribution_major_version": "9",
               "distribution_version": "9.4", "architecture": "x86_64", "kernel": "5.14.0-427.el9.x86_64"},
    "ubuntu2204": {"os_family": "Debian", "distribution": "Ubuntu", "distribution_major_version": "22",
                   "distribution_version": "22.04", "architecture": "x86_64", "kernel": "5.15.0-119-generic"},
    "ubuntu2404": {"os_family": "Debian", "distribution": "Ubuntu", "distribution_major_version": "24",
                   "distribution_version": "24.04", "architecture": "x86_64", "kernel": "6.8.0-45-generic"},
    "debian12": {"os_family": "Debian", "distribution": "Debian", "distribution_major_version": "12",
                 "distribution_version": "12.7", "architecture": "x86_64", "kernel": "6.1.0-25-amd64"},
}
HARDWARE = {"gpu_steps": "run", "gpu_skip_reason": None, "nvswitch_count": 0, "rdma_steps": "skip"}


def playbook(tmp_path: Path, play: dict, facts: dict, extra: dict) -> subprocess.CompletedProcess:
    path = tmp_path / "play.yml"
    path.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, **play}]))
    env = dict(os.environ, ANSIBLE_CONFIG=str(PROJECT / "ansible.cfg"))
    return subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                           "-e", f"ansible_python_interpreter={sys.executable}",
                           "-e", json.dumps({"ansible_facts": facts, "node_facts_hardware": HARDWARE, **extra}), str(path)],
                          cwd=PROJECT, env=env, capture_output=True, text=True, check=False)


def role_vars(role: str, os_key: str | None = None) -> list[str]:
    """The shared values, the role's defaults and vars, and for os_key the OS's vars file the role's first_found
    picks: vars/<Distribution>-<major>.yml, vars/<Distribution>.yml or vars/<Family>.yml."""
    files = [ROLES / "cluster" / "vars" / "main.yml", ROLES / role / "defaults" / "main.yml",
             ROLES / role / "vars" / "main.yml"]
    if os_key:
        facts = OS_FACTS[os_key]
        names = [f"{facts['distribution']}-{facts['distribution_major_version']}", facts["distribution"], facts["os_family"]]
        files.append(next(ROLES / role / "vars" / f"{name}.yml" for name in names
                          if (ROLES / role / "vars" / f"{name}.yml").is_file()))
    return [str(path) for path in files if path.is_file()]


def render(tmp_path: Path, role: str, os_key: str, names: list[str], **extra) -> dict:
    """The role's variables in names as Ansible templates them for a node running os_key."""
    out = tmp_path / "values.json"
    probe = "{{ {" + ", ".join(f"'{name}': {name}" for name in names) + "} | to_json }}"
    run = playbook(tmp_path, {"vars_files": role_vars(role, os_key),
                              "tasks": [{"ansible.builtin.copy": {"dest": str(out), "content": probe, "mode": "0644"}}]},
                   OS_FACTS[os_key], extra)
    assert run.returncode == 0, run.stdout[-3000:]
    return json.loads(out.read_text())


def run_tasks(tmp_path: Path, role: str, tasks_file: str, os_key: str, **extra) -> subprocess.CompletedProcess:
    """A role's task file, run with the role's vars for a node running os_key (role_path points at the role)."""
    tasks = yaml.safe_load((ROLES / role / "tasks" / tasks_file).read_text())
    return playbook(tmp_path, {"vars_files": role_vars(role), "vars": {"role_path": str(ROLES / role)}, "tasks": tasks},
                    OS_FACTS[os_key], extra)


# --- Fabric Manager package names -------------------------------------------------------------------------------

@pytest.mark.parametrize(("os_key", "version", "packages"), [
    ("rhel9", "570.172.08", ["nvidia-fabric-manager", "libnvidia-nscq-570"]),
    ("rocky8", "550.163.01", ["nvidia-fabric-manager", "libnvidia-nscq-550"]),
    ("ubuntu2204", "570.172.08", ["nvidia-fabricmanager-570", "libnvidia-nscq-570"]),
    ("debian12", "535.247.01", ["nvidia-fabricmanager-535", "libnvidia-nscq-535"]),
    ("rhel9", "580.95.05", ["nvidia-fabricmanager", "libnvidia-nscq"]),
    ("ubuntu2404", "580.95.05", ["nvidia-fabricmanager", "libnvidia-nscq"]),
])
def test_fabric_manager_package_names(tmp_path, os_key, version, packages):
    values = render(tmp_path, "nvidia_fabricmanager", os_key, ["_nvidia_fabricmanager_packages"],
                    nvidia_fabricmanager_version=version)
    assert values["_nvidia_fabricmanager_packages"] == packages


# --- cuDNN package names ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("os_key", "packages"), [
    ("rhel8", ["libcudnn9-cuda-12", "libcudnn9-devel-cuda-12"]),
    ("rocky9", ["libcudnn9-cuda-12", "libcudnn9-devel-cuda-12"]),
    ("ubuntu2204", ["libcudnn9-cuda-12", "libcudnn9-dev-cuda-12"]),
    ("debian12", ["libcudnn9-cuda-12", "libcudnn9-dev-cuda-12"]),
])
def test_cudnn_development_package_is_devel_on_rpm(tmp_path, os_key, packages):
    assert render(tmp_path, "cuda_toolkit", os_key, ["_cuda_toolkit_cudnn_packages"])["_cuda_toolkit_cudnn_packages"] == packages


@pytest.mark.parametrize(("os_key", "packages"), [
    ("rocky8", ["libnccl", "libnccl-devel"]), ("ubuntu2404", ["libnccl2", "libnccl-dev"]),
])
def test_nccl_package_names_per_family(tmp_path, os_key, packages):
    assert render(tmp_path, "cuda_toolkit", os_key, ["_cuda_toolkit_nccl_packages"])["_cuda_toolkit_nccl_packages"] == packages


@pytest.mark.parametrize(("os_key", "packages"), [
    ("rhel9", ["gdrcopy-kmod", "gdrcopy", "gdrcopy-devel"]), ("debian12", ["gdrdrv-dkms", "libgdrapi", "gdrcopy-tests"]),
])
def test_gdrcopy_package_names_per_family(tmp_path, os_key, packages):
    assert render(tmp_path, "gpudirect", os_key, ["_gpudirect_gdrcopy_packages"])["_gpudirect_gdrcopy_packages"] == packages


@pytest.mark.parametrize(("os_key", "dist"), [("rocky9", "rhel9.4"), ("ubuntu2204", "ubuntu22.04"), ("debian12", "debian12.7")])
def test_doca_release_name_per_family(tmp_path, os_key, dist):
    assert render(tmp_path, "rdma", os_key, ["_rdma_doca_dist"])["_rdma_doca_dist"] == dist


# --- NVIDIA's repositories: release names, keys and the container toolkit's package format per family -------------

@pytest.mark.parametrize(("os_key", "cuda_key", "toolkit"), [
    ("debian12", "cuda/repos/debian12/x86_64/3bf863cc.pub", "deb/amd64/"),
    ("ubuntu2404", "cuda/repos/ubuntu2404/x86_64/3bf863cc.pub", "deb/amd64/"),
    ("rhel8", "cuda/repos/rhel8/x86_64/D42D0685.pub", "rpm/x86_64/"),
    ("rocky9", "cuda/repos/rhel9/x86_64/D42D0685.pub", "rpm/x86_64/"),
])
def test_nvidia_repository_urls_per_os(tmp_path, os_key, cuda_key, toolkit):
    values = render(tmp_path, "nvidia_repo", os_key, ["_nvidia_repo_key_url", "_nvidia_repo_ctk_url"])
    assert values == {"_nvidia_repo_key_url": "https://developer.download.nvidia.com/compute/" + cuda_key,
                      "_nvidia_repo_ctk_url": "https://nvidia.github.io/libnvidia-container/stable/" + toolkit}


def test_cudnn_8_is_refused_in_preflight(tmp_path):
    run = run_tasks(tmp_path, "cuda_toolkit", "00-preflight.yml", "rhel9", cuda_toolkit_cudnn_version="8.9.7.29")
    assert run.returncode != 0
    assert "cuda_toolkit_cudnn_version is 8.9.7.29; this role installs cuDNN 9 or later" in run.stdout
    assert run_tasks(tmp_path, "cuda_toolkit", "00-preflight.yml", "rhel9").returncode == 0


# --- Debian 12's own archive: branch 535 only --------------------------------------------------------------------

def driver_preflight(tmp_path, os_key, **extra):
    tasks = yaml.safe_load((ROLES / "nvidia_driver" / "tasks" / "00-preflight.yml").read_text())
    return playbook(tmp_path, {"vars_files": role_vars("nvidia_driver"), "vars": {"role_path": str(ROLES / "nvidia_driver")},
                               "tasks": tasks},
                    dict(OS_FACTS[os_key], hpcml_gpu={"present": True, "pci_device_ids": ["0x2330"], "gpus": []}), extra)


def test_debian_12_distro_source_refuses_a_580_pin(tmp_path):
    run = driver_preflight(tmp_path, "debian12", nvidia_repo_source="distro", nvidia_driver_kernel_modules="proprietary",
                           nvidia_driver_version="580.95.05")
    assert run.returncode != 0
    assert "Debian 12's own archive carries NVIDIA driver branch 535 only, not 580" in " ".join(run.stdout.split())


def test_debian_12_distro_source_takes_535_and_cuda_source_takes_580(tmp_path):
    ok = driver_preflight(tmp_path, "debian12", nvidia_repo_source="distro", nvidia_driver_kernel_modules="proprietary",
                          nvidia_driver_version="535.247.01")
    assert ok.returncode == 0, ok.stdout[-2000:]
    cuda = driver_preflight(tmp_path, "debian12", nvidia_repo_source="cuda", nvidia_driver_version="580.95.05")
    assert cuda.returncode == 0, cuda.stdout[-2000:]


# --- Open kernel modules need Turing or newer ---------------------------------------------------------------------

def gpu_facts(*ids, architectures=()):
    return {"present": bool(ids), "pci_device_ids": list(ids), "gpus": [{"architecture": a} for a in architectures]}


def test_open_modules_refused_for_a_volta_gpu_before_any_driver_is_installed(tmp_path):
    # Tesla V100 (GV100, 0x1db4) and an H100 (0x2330); nvidia-smi is not installed yet, so no architecture names.
    facts = dict(OS_FACTS["ubuntu2204"], hpcml_gpu=gpu_facts("0x1db4", "0x2330"))
    run = playbook(tmp_path, {"vars_files": role_vars("nvidia_driver"), "vars": {"role_path": str(ROLES / "nvidia_driver")},
                              "tasks": yaml.safe_load((ROLES / "nvidia_driver" / "tasks" / "00-preflight.yml").read_text())},
                   facts, {})
    assert run.returncode != 0
    assert "has GPUs older than Turing (PCI device 0x1db4)" in " ".join(run.stdout.split())


def test_open_modules_fail_when_the_gpu_generation_cannot_be_told(tmp_path):
    for gpu, why in [({"present": True, "gpus": []}, "(no GPU facts: run the node_facts role first)"),
                     (gpu_facts(None), "unreadable PCI device ID(s) None")]:
        facts = dict(OS_FACTS["rhel9"], hpcml_gpu=gpu)
        run = playbook(tmp_path, {"vars_files": role_vars("nvidia_driver"), "vars": {"role_path": str(ROLES / "nvidia_driver")},
                                  "tasks": yaml.safe_load((ROLES / "nvidia_driver" / "tasks" / "00-preflight.yml").read_text())},
                       facts, {})
        assert run.returncode != 0
        assert "cannot tell whether its GPUs are Turing or newer" in " ".join(run.stdout.split())
        assert why in " ".join(run.stdout.split())


def test_open_modules_pass_for_turing_and_newer_and_proprietary_passes_volta(tmp_path):
    tasks = yaml.safe_load((ROLES / "nvidia_driver" / "tasks" / "00-preflight.yml").read_text())
    play = {"vars_files": role_vars("nvidia_driver"), "vars": {"role_path": str(ROLES / "nvidia_driver")}, "tasks": tasks}
    # Tesla T4 (TU104, 0x1eb8), H100 (0x2330), B200 (0x2901); a node without GPUs has nothing to check.
    for gpu in [gpu_facts("0x1eb8", "0x2330", "0x2901"), gpu_facts()]:
        run = playbook(tmp_path, play, dict(OS_FACTS["rhel9"], hpcml_gpu=gpu), {})
        assert run.returncode == 0, run.stdout[-2000:]
    volta = playbook(tmp_path, play, dict(OS_FACTS["rhel9"], hpcml_gpu=gpu_facts("0x1db4", architectures=["Volta"])),
                     {"nvidia_driver_kernel_modules": "proprietary"})
    assert volta.returncode == 0, volta.stdout[-2000:]


# --- The initramfs is rebuilt before the reboot that needs it ------------------------------------------------------

def test_initramfs_is_rebuilt_in_the_install_step_not_in_a_handler_after_the_reboot():
    tasks = ROLES / "nvidia_driver" / "tasks"
    order = [task["ansible.builtin.import_tasks"] for task in yaml.safe_load((tasks / "main.yml").read_text())
             if "ansible.builtin.import_tasks" in task]
    assert order.index("20-install.yml") < order.index("40-load.yml")
    install = yaml.safe_load((tasks / "20-install.yml").read_text())
    names = [task["name"] for task in install]
    blacklist = next(task for task in install if task["name"] == "Keep nouveau from claiming the GPUs")
    rebuild = next(task for task in install if task["name"] == "Rebuild the initramfs so the next boot leaves nouveau out")
    assert "notify" not in blacklist
    assert names.index(rebuild["name"]) == names.index(blacklist["name"]) + 1
    assert rebuild["ansible.builtin.command"]["argv"] == "{{ _nvidia_driver_initramfs }}"
    assert f"{blacklist['register']} is changed" in rebuild["when"]
    reboot = [task for task in yaml.safe_load((tasks / "40-load.yml").read_text()) if "ansible.builtin.reboot" in task]
    assert reboot, "40-load.yml no longer reboots: revisit this test"


@pytest.mark.parametrize(("os_key", "command"), [
    ("rhel9", ["dracut", "--force"]), ("rocky8", ["dracut", "--force"]),
    ("ubuntu2404", ["update-initramfs", "-u"]), ("debian12", ["update-initramfs", "-u"]),
])
def test_initramfs_command_per_os(tmp_path, os_key, command):
    assert render(tmp_path, "nvidia_driver", os_key, ["_nvidia_driver_initramfs"])["_nvidia_driver_initramfs"] == command


# --- RHEL/Rocky 8/9: CRB and EPEL for dkms, the driver branch's module stream ---------------------------------------

@pytest.mark.parametrize(("os_key", "repo", "enable", "epel"), [
    ("rhel9", "codeready-builder-for-rhel-9-x86_64-rpms",
     ["subscription-manager", "repos", "--enable=codeready-builder-for-rhel-9-x86_64-rpms"],
     "https://dl.fedoraproject.org/pub/epel/epel-release-latest-9.noarch.rpm"),
    ("rhel8", "codeready-builder-for-rhel-8-x86_64-rpms",
     ["subscription-manager", "repos", "--enable=codeready-builder-for-rhel-8-x86_64-rpms"],
     "https://dl.fedoraproject.org/pub/epel/epel-release-latest-8.noarch.rpm"),
    ("rocky9", "crb", ["dnf", "config-manager", "--set-enabled", "crb"], "epel-release"),
    ("rocky8", "powertools", ["dnf", "config-manager", "--set-enabled", "powertools"], "epel-release"),
])
def test_crb_and_epel_per_distribution(tmp_path, os_key, repo, enable, epel):
    values = render(tmp_path, "nvidia_driver", os_key, ["_nvidia_driver_crb_repo", "_nvidia_driver_crb_enable",
                                                        "_nvidia_driver_epel"])
    assert values == {"_nvidia_driver_crb_repo": repo, "_nvidia_driver_crb_enable": enable, "_nvidia_driver_epel": epel}


@pytest.mark.parametrize(("flavour", "stream"), [("open", "580-open"), ("proprietary", "580-dkms")])
def test_module_stream_per_flavour(tmp_path, flavour, stream):
    values = render(tmp_path, "nvidia_driver", "rocky9", ["_nvidia_driver_module_stream"],
                    nvidia_driver_version="580.95.05", nvidia_driver_kernel_modules=flavour)
    assert values["_nvidia_driver_module_stream"] == stream


def redhat_repositories(tmp_path, repolist, streams):
    """setup-RedHat.yml less its dnf-module task (Debian has no python3-dnf), with dnf and
    subscription-manager stand-ins that print the given repolist / module list and log every call."""
    tools = tmp_path / "bin"
    tools.mkdir()
    log = tmp_path / "calls.log"
    (tmp_path / "repolist").write_text(repolist)
    (tmp_path / "streams").write_text(streams)
    (tools / "dnf").write_text(f"#!/bin/sh\necho \"dnf $*\" >> {log}\n"
                               f"case \"$*\" in *repolist*) cat {tmp_path / 'repolist'} ;; *'module list'*) "
                               f"cat {tmp_path / 'streams'} ;; esac\nexit 0\n")
    (tools / "subscription-manager").write_text(f"#!/bin/sh\necho \"subscription-manager $*\" >> {log}\n")
    for tool in ("dnf", "subscription-manager"):
        (tools / tool).chmod(0o755)
    tasks = [task for task in yaml.safe_load((ROLES / "nvidia_driver" / "tasks" / "setup-RedHat.yml").read_text())
             if "ansible.builtin.dnf" not in task]
    run = playbook(tmp_path, {"vars_files": role_vars("nvidia_driver", "rhel9"),
                              "environment": {"PATH": f"{tools}:{os.environ['PATH']}"}, "tasks": tasks},
                   OS_FACTS["rhel9"], {"nvidia_driver_version": "580.95.05"})
    assert run.returncode == 0, run.stdout[-3000:]
    return [line for line in log.read_text().splitlines() if "repolist" not in line and "module list" not in line]


# dnf's own layouts: `repolist` (repo id, repo name) and `module list` (Name, Stream with [e] once enabled, ...).
REPOLIST = ("repo id                              repo name\n"
            "rhel-9-for-x86_64-baseos-rpms        Red Hat Enterprise Linux 9 for x86_64 - BaseOS (RPMs)\n")
STREAMS_580_OPEN = ("cuda-rhel9-x86_64\nName           Stream            Profiles                 Summary\n"
                    "nvidia-driver  580-open [e]      default [d], fm, ks, src Nvidia driver for 580-open branch\n")


def test_redhat_repositories_enable_crb_and_switch_the_stream(tmp_path):
    calls = redhat_repositories(tmp_path, REPOLIST, STREAMS_580_OPEN.replace("580-open [e]", "570-dkms [e]"))
    assert calls == ["subscription-manager repos --enable=codeready-builder-for-rhel-9-x86_64-rpms",
                     "dnf -y module reset nvidia-driver", "dnf -y module enable nvidia-driver:580-open"]


def test_redhat_repositories_leave_what_is_already_there(tmp_path):
    repolist = REPOLIST + ("codeready-builder-for-rhel-9-x86_64-rpms     "
                           "Red Hat CodeReady Linux Builder for RHEL 9 x86_64 (RPMs)\n")
    assert redhat_repositories(tmp_path, repolist, STREAMS_580_OPEN) == []


# --- Ubuntu: the signed prebuilt modules from Ubuntu's archive instead of DKMS -------------------------------------

@pytest.mark.parametrize(("flavour", "packages", "prebuilt"), [
    ("open", ["nvidia-headless-no-dkms-580-server-open", "nvidia-utils-580-server"],
     ["linux-modules-nvidia-580-server-open-6.8.0-45-generic"]),
    ("proprietary", ["nvidia-headless-no-dkms-580-server", "nvidia-utils-580-server"],
     ["linux-modules-nvidia-580-server-6.8.0-45-generic"]),
])
def test_ubuntu_distro_source_takes_the_signed_prebuilt_modules(tmp_path, flavour, packages, prebuilt):
    tasks = yaml.safe_load((ROLES / "nvidia_driver" / "tasks" / "10-detect.yml").read_text())[:1]
    out = tmp_path / "values.json"
    probe = "{{ {'p': _nvidia_driver_packages, 'b': _nvidia_driver_prebuilt} | to_json }}"
    tasks.append({"ansible.builtin.copy": {"dest": str(out), "mode": "0644", "content": probe}})
    run = playbook(tmp_path, {"vars_files": role_vars("nvidia_driver", "ubuntu2404"), "tasks": tasks}, OS_FACTS["ubuntu2404"],
                   {"nvidia_repo_source": "distro", "nvidia_driver_version": "580.95.05",
                    "nvidia_driver_kernel_modules": flavour})
    assert run.returncode == 0, run.stdout[-3000:]
    assert json.loads(out.read_text()) == {"p": packages, "b": prebuilt}


def test_nvidia_repository_on_ubuntu_builds_with_dkms_and_has_no_prebuilt_modules(tmp_path):
    values = render(tmp_path, "nvidia_driver", "ubuntu2204", ["_nvidia_driver_prebuilt_sets"])
    assert "cuda" not in values["_nvidia_driver_prebuilt_sets"]


def test_secure_boot_passes_with_prebuilt_modules_and_stops_dkms(tmp_path):
    guard = yaml.safe_load((ROLES / "nvidia_driver" / "tasks" / "20-install.yml").read_text())[:1]
    play = {"vars_files": role_vars("nvidia_driver", "ubuntu2404"), "tasks": guard}
    common = {"_nvidia_driver_secure_boot_on": True, "nvidia_driver_version": "580.95.05"}
    prebuilt = playbook(tmp_path, play, OS_FACTS["ubuntu2404"], {**common, "_nvidia_driver_prebuilt": ["linux-modules-x"]})
    assert prebuilt.returncode == 0, prebuilt.stdout[-2000:]
    dkms = playbook(tmp_path, play, OS_FACTS["ubuntu2404"], {**common, "_nvidia_driver_prebuilt": []})
    assert dkms.returncode != 0
    assert "on Ubuntu, use its signed prebuilt modules" in " ".join(dkms.stdout.split())


# --- NVLink5 (HGX B200/B300): Fabric Manager with the NVLink Subnet Manager ------------------------------------------

def fabric_manager(tmp_path, hardware, **extra):
    names = ["_nvidia_fabricmanager_steps", "_nvidia_fabricmanager_nvlink5", "_nvidia_fabricmanager_nvswitches",
             "_nvidia_fabricmanager_reason"]
    return render(tmp_path, "nvidia_fabricmanager", "ubuntu2404", names,
                  node_facts_hardware=dict(HARDWARE, **hardware), **extra)


def test_nvlink5_baseboard_runs_fabric_manager_without_pci_nvswitches(tmp_path):
    # HGX B200: no NVSwitch is a PCI function of the host; its management ports are RDMA devices.
    values = fabric_manager(tmp_path, {"nvswitch_count": 0, "nvlink5_switch_ports": 2})
    assert values == {"_nvidia_fabricmanager_steps": "run", "_nvidia_fabricmanager_nvlink5": True,
                      "_nvidia_fabricmanager_nvswitches": 2, "_nvidia_fabricmanager_reason": None}


def test_hgx_h100_runs_fabric_manager_without_the_subnet_manager(tmp_path):
    values = fabric_manager(tmp_path, {"nvswitch_count": 4})
    assert (values["_nvidia_fabricmanager_steps"], values["_nvidia_fabricmanager_nvlink5"]) == ("run", False)
    none = fabric_manager(tmp_path, {"nvswitch_count": 0, "nvlink5_switch_ports": 0})
    assert none["_nvidia_fabricmanager_steps"] == "skip"
    assert none["_nvidia_fabricmanager_reason"] == "no NVSwitch on the PCI bus and no NVLink5 switch management port"


def test_nvlink5_tasks_install_nvlsm_and_load_ib_umad(tmp_path):
    tasks = {task["name"]: task for task in yaml.safe_load((ROLES / "nvidia_fabricmanager" / "tasks" / "main.yml").read_text())}
    install = tasks["Install the NVLink Subnet Manager an NVLink5 fabric needs"]
    assert install["ansible.builtin.package"]["name"] == "{{ _nvidia_fabricmanager_nvlink5_packages }}"
    assert "_nvidia_fabricmanager_nvlink5" in install["when"]
    values = render(tmp_path, "nvidia_fabricmanager", "rhel9", ["_nvidia_fabricmanager_nvlink5_packages",
                                                                "_nvidia_fabricmanager_nvlink5_modules"])
    assert values == {"_nvidia_fabricmanager_nvlink5_packages": ["nvlsm", "infiniband-diags"],
                      "_nvidia_fabricmanager_nvlink5_modules": ["ib_umad"]}


def test_nvlink5_refuses_a_driver_before_570(tmp_path):
    tasks = yaml.safe_load((ROLES / "nvidia_fabricmanager" / "tasks" / "00-preflight.yml").read_text())
    hardware = dict(HARDWARE, nvlink5_switch_ports=2)
    old = playbook(tmp_path, {"vars_files": role_vars("nvidia_fabricmanager"),
                                "vars": {"role_path": str(ROLES / "nvidia_fabricmanager")}, "tasks": tasks}, OS_FACTS["rhel9"],
                   {"node_facts_hardware": hardware, "nvidia_fabricmanager_version": "550.163.01"})
    assert old.returncode != 0
    assert "needs driver branch 570 or later" in " ".join(old.stdout.split())
    new = playbook(tmp_path, {"vars_files": role_vars("nvidia_fabricmanager"),
                                "vars": {"role_path": str(ROLES / "nvidia_fabricmanager")}, "tasks": tasks}, OS_FACTS["rhel9"],
                   {"node_facts_hardware": hardware, "nvidia_fabricmanager_version": "580.95.05"})
    assert new.returncode == 0, new.stdout[-2000:]


# --- Per-family work in files of its own -----------------------------------------------------------------------------

def test_no_task_or_vars_file_branches_on_the_os_family():
    branches = [str(path.relative_to(PROJECT)) for path in sorted(ROLES.glob("*/*/*.yml"))
                if path.parent.name in ("tasks", "vars", "defaults", "handlers")
                and re.search(r"os_family'\]\s*(==|!=|in\b|not in\b)", path.read_text())]
    assert branches == []


def test_every_family_has_all_of_its_files():
    families = {"Debian", "RedHat"}
    for role in sorted(path.parent.parent for path in ROLES.glob("*/vars/Debian.yml")):
        assert {f for f in families if (role / "vars" / f"{f}.yml").is_file()} == families, role.name
    source = ROLES / "package_source" / "tasks"
    for family in families:
        assert (source / f"repository-{family}.yml").is_file() and (source / f"pin-{family}.yml").is_file(), family


# --- Container runtimes (hpc_containers): what each OS can have, and the refusals before anything changes ------------
# In-process: the roles' own expressions and assert tasks, evaluated by Ansible's templating (milliseconds, no play).

def gpu_paths(gpu: bool, cli: bool) -> dict:
    """hpc_containers' stat of /dev/nvidiactl and nvidia-container-cli, as registered."""
    return {"results": [{"stat": {"exists": gpu}}, {"stat": {"exists": cli}}]}


def evaluate(role: str, os_key: str, **extra) -> Templar:
    """A templar over the shared settings and the role's variables (role_vars: its OS's vars file where it has
    per-OS files) for a node running os_key."""
    loader = DataLoader()
    variables = {}
    per_os = (ROLES / role / "vars" / "Debian.yml").is_file()
    for path in [str(ROLES / "cluster" / "defaults" / "main.yml"), *role_vars(role, os_key if per_os else None)]:
        variables.update(loader.load_from_file(path, trusted_as_template=True) or {})
    # What the role's stat task registers on a node without GPUs, unless a test says otherwise.
    variables.update(ansible_facts=OS_FACTS[os_key], inventory_hostname="node1", groups={},
                     _hpc_containers_gpu_paths=gpu_paths(gpu=False, cli=False))
    variables.update(extra)
    return Templar(loader, variables=variables)


def refusals(templar: Templar, role: str, tasks_file: str) -> dict[str, str]:
    """Each assert task of the file whose `that` fails: its name and its message, on one line."""
    failed = {}
    for task in yaml.safe_load((ROLES / role / "tasks" / tasks_file).read_text()):
        check = task.get("ansible.builtin.assert")
        if check is None or not templar.evaluate_conditional(trust_as_template(task.get("when", "true"))):
            continue
        that = check["that"] if isinstance(check["that"], list) else [check["that"]]
        if not all(templar.evaluate_conditional(trust_as_template(c)) for c in that):
            failed[task["name"]] = " ".join(str(templar.template(trust_as_template(check["fail_msg"]))).split())
    return failed


ALL_RUNTIMES = ["charliecloud", "enroot", "apptainer"]
ENROOT_RELEASE = "https://github.com/NVIDIA/enroot/releases/download/v3.5.0/"


@pytest.mark.parametrize(("os_key", "architecture", "packages", "files", "unavailable"), [
    ("debian12", "x86_64", ["charliecloud-runtime"],
     [ENROOT_RELEASE + "enroot_3.5.0-1_amd64.deb", ENROOT_RELEASE + "enroot+caps_3.5.0-1_amd64.deb",
      "https://github.com/apptainer/apptainer/releases/download/v1.3.6/apptainer_1.3.6_amd64.deb"], []),
    # Apptainer's Debian package is built for amd64 only.
    ("ubuntu2404", "aarch64", ["charliecloud-runtime"],
     [ENROOT_RELEASE + "enroot_3.5.0-1_arm64.deb", ENROOT_RELEASE + "enroot+caps_3.5.0-1_arm64.deb"], ["apptainer"]),
    ("rocky9", "x86_64", ["charliecloud", "apptainer"],
     [ENROOT_RELEASE + "enroot-3.5.0-1.el8.x86_64.rpm", ENROOT_RELEASE + "enroot+caps-3.5.0-1.el8.x86_64.rpm"], []),
    ("rhel8", "aarch64", ["charliecloud", "apptainer"],
     [ENROOT_RELEASE + "enroot-3.5.0-1.el8.aarch64.rpm", ENROOT_RELEASE + "enroot+caps-3.5.0-1.el8.aarch64.rpm"], []),
])
def test_container_runtime_sources_per_os(ansible_plugins, os_key, architecture, packages, files, unavailable):
    templar = evaluate("hpc_containers", os_key, cluster_container_runtimes=ALL_RUNTIMES)
    templar.available_variables = {**templar.available_variables,
                                   "ansible_facts": dict(OS_FACTS[os_key], architecture=architecture)}
    values = {name: templar.template(trust_as_template("{{ " + name + " }}")) for name in
              ("_hpc_containers_packages", "_hpc_containers_downloads", "_hpc_containers_unavailable")}
    assert values == {"_hpc_containers_packages": packages, "_hpc_containers_downloads": files,
                      "_hpc_containers_unavailable": unavailable}
    failed = refusals(templar, "hpc_containers", "00-preflight.yml")
    refusal = "Check the node can have each runtime asked for"
    if unavailable:
        assert failed[refusal] == ("node1 (Ubuntu 24.04, aarch64) cannot have apptainer from this role: "
                                   "cluster_container_runtimes takes charliecloud, enroot on it.")
    else:
        assert refusal not in failed


def test_a_container_runtime_download_without_its_checksum_is_refused(ansible_plugins):
    templar = evaluate("hpc_containers", "debian12", cluster_container_runtimes=["enroot"],
                       hpc_containers_sha256={"enroot_3.5.0-1_amd64.deb": "0" * 64})
    failed = refusals(templar, "hpc_containers", "00-preflight.yml")
    assert failed["Check every release file has its checksum before anything is downloaded"].startswith(
        "node1 would download enroot+caps_3.5.0-1_amd64.deb, pyxis-0.20.0.tar.gz without a checksum")
    sums = {name: "a" * 64 for name in ["enroot_3.5.0-1_amd64.deb", "enroot+caps_3.5.0-1_amd64.deb", "pyxis-0.20.0.tar.gz"]}
    templar.available_variables = {**templar.available_variables, "hpc_containers_sha256": sums}
    assert refusals(templar, "hpc_containers", "00-preflight.yml") == {}
    templar.available_variables = {**templar.available_variables,
                                   "hpc_containers_sha256": dict(sums, **{"pyxis-0.20.0.tar.gz": "A" * 64})}
    assert list(refusals(templar, "hpc_containers", "00-preflight.yml")) == ["Check the checksums are SHA-256s"]
    # Charliecloud comes from the distribution: nothing to download, nothing to check.
    templar.available_variables = {**templar.available_variables, "cluster_container_runtimes": ["charliecloud"],
                                   "hpc_containers_sha256": {}}
    assert refusals(templar, "hpc_containers", "00-preflight.yml") == {}


def test_enroot_on_a_gpu_node_needs_nvidia_container_cli(ansible_plugins):
    sums = {name: "a" * 64 for name in ["enroot_3.5.0-1_amd64.deb", "enroot+caps_3.5.0-1_amd64.deb", "pyxis-0.20.0.tar.gz"]}
    for gpu, cli, refused in [(True, False, True), (True, True, False), (False, False, False)]:
        templar = evaluate("hpc_containers", "debian12", cluster_container_runtimes=["enroot"], hpc_containers_sha256=sums,
                           _hpc_containers_gpu_paths=gpu_paths(gpu, cli))
        failed = refusals(templar, "hpc_containers", "00-preflight.yml")
        assert ("Check a GPU node has nvidia-container-cli for Enroot" in failed) == refused, failed


@pytest.mark.parametrize(("runtimes", "extra", "refusal", "message"), [
    (["charliecloud", "docker"], {}, "Check the container runtimes asked for",
     "cluster_container_runtimes lists runtimes, each once, from: charliecloud, enroot, apptainer "
     "(now [\"charliecloud\", \"docker\"]); [] installs none."),
    (["apptainer", "apptainer"], {}, "Check the container runtimes asked for", None),
    ("charliecloud", {}, "Check the container runtimes asked for", None),
    (["enroot"], {"groups": {"nodes": ["node1"]}}, "Check Enroot has the Slurm that Pyxis plugs into",
     "cluster_container_runtimes names enroot, which comes with Pyxis, a Slurm plugin (srun --container-image), but the "
     "inventory has no host in 'slurm_controller', so no Slurm is set up. Add a Slurm controller to the inventory, or "
     "take enroot out (charliecloud and apptainer also start under mpirun)."),
])
def test_preflight_refuses_container_runtimes_the_cluster_cannot_have(ansible_plugins, runtimes, extra, refusal, message):
    templar = evaluate("preflight", "debian12", cluster_container_runtimes=runtimes, **extra)
    failed = refusals(templar, "preflight", "containers.yml")
    assert list(failed) == [refusal]
    if message:
        assert failed[refusal] == message


def test_preflight_takes_each_runtime_where_it_can_run(ansible_plugins):
    with_slurm = {"groups": {"nodes": ["node1"], "slurm_controller": ["head"]}}
    # A Kubernetes run on an inventory that lists runtimes for its bare-metal stack: nothing to refuse.
    for runtimes, extra in [([], {}), (ALL_RUNTIMES, {"cluster_stack": "k8s"}), (["charliecloud", "apptainer"], {}),
                            (ALL_RUNTIMES, with_slurm)]:
        assert refusals(evaluate("preflight", "debian12", cluster_container_runtimes=runtimes, **extra),
                        "preflight", "containers.yml") == {}, runtimes


@pytest.mark.parametrize(("os_key", "slurm", "headers"), [
    ("debian12", "22.05.8-4+deb12u3", "libslurm-dev=22.05.8-4+deb12u3"),
    ("rocky9", "22.05.9", "slurm-devel-22.05.9"),
])
def test_pyxis_is_built_per_slurm_release_against_its_own_headers(ansible_plugins, os_key, slurm, headers):
    templar = evaluate("hpc_containers", os_key, cluster_container_runtimes=["enroot"], _hpc_containers_slurm_version=slurm)
    values = {name: templar.template(trust_as_template("{{ " + name + " }}")) for name in
              ("_hpc_containers_slurm_headers", "_hpc_containers_pyxis_plugin")}
    # Pyxis' Makefile (v0.20.0) installs spank_pyxis.so into $(libdir)/slurm.
    assert values == {"_hpc_containers_slurm_headers": headers,
                      "_hpc_containers_pyxis_plugin": f"/opt/hpcml/pyxis/0.20.0-slurm-{slurm}/lib/slurm/spank_pyxis.so"}
    tasks = {task["name"]: task for task in yaml.safe_load((ROLES / "hpc_containers" / "tasks" / "30-pyxis.yml").read_text())}
    register = {task["name"]: task for task in tasks["Register Pyxis with Slurm"]["block"]}
    assert register["Name this Slurm's build of Pyxis as required"]["ansible.builtin.copy"]["content"] == \
        "required {{ _hpc_containers_pyxis_plugin }}\n"
    assert register["Have Slurm read the plugin drop-ins"]["ansible.builtin.lineinfile"]["line"] == \
        "include {{ _hpc_containers_plugstack_dir }}/*.conf"
    assert all(task.get("notify") == "Restart slurmd" for task in register.values() if "ansible.builtin.file" not in task)


def test_enroot_drop_in_is_what_enroot_reads(ansible_plugins, tmp_path):
    templar = evaluate("hpc_containers", "debian12", cluster_container_runtimes=["enroot"], ansible_managed="managed")
    text = templar.template(trust_as_template((ROLES / "hpc_containers" / "templates" / "enroot.conf.j2").read_text()))
    conf = tmp_path / "hpcml.conf"
    conf.write_text(text)
    # Enroot 3.5.0 refuses a configuration file that bash -n rejects, and reads KEY VALUE lines of ENROOT_* names.
    assert subprocess.run(["bash", "-n", str(conf)], check=False).returncode == 0
    settings = dict(line.split(None, 1) for line in text.splitlines() if line and not line.startswith("#"))
    assert settings == {"ENROOT_RUNTIME_PATH": "/var/lib/enroot/runtime/user-$(id -u)",
                        "ENROOT_CACHE_PATH": "/var/lib/enroot/cache/group-$(id -g)",
                        "ENROOT_DATA_PATH": "/var/lib/enroot/data/user-$(id -u)", "ENROOT_RESTRICT_DEV": "no"}
    assert templar.template(trust_as_template("{{ _hpc_containers_enroot_conf }}")) == "/etc/enroot/enroot.conf.d/hpcml.conf"
