"""site.yml's preflight play (playbooks/preflight.yml) refuses bad settings and inventories before anything changes,
with a message naming the fix: run here, with this machine as the only node. The refusals that need the lab's own
machines (two inventory names for one of them, its GPU count) and the whole site.yml through ansible-runner are in
tests/e2e/test_preflight.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from unit_paths import PROJECT

NODE = "node001"
RECAP = re.compile(r"^(\S+)\s+:\s+ok=\d+\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.MULTILINE)


# This machine as the only node, the inventory's groups unless a test gives its own.
NODES = {"nodes": {"hosts": {NODE: {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}


def preflight(tmp_path: Path, extravars: dict | None = None, groups: dict | None = None) -> tuple[int, str, dict]:
    """The preflight play's exit code, its output on one line, and each host's changed count from its recap."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"children": NODES if groups is None else groups}}))
    env = dict(os.environ, ANSIBLE_CONFIG=str(PROJECT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_STDOUT_CALLBACK="default")
    done = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory),
                           "-e", json.dumps(extravars or {}), "playbooks/preflight.yml"],
                          cwd=PROJECT, env=env, capture_output=True, text=True, check=False)
    recap = {host: int(changed) for host, changed, _, _ in RECAP.findall(done.stdout)}
    assert recap, done.stdout[-3000:] + done.stderr[-3000:]
    return done.returncode, " ".join((done.stdout + done.stderr).split()), recap


def assert_refused(tmp_path: Path, expected: str, extravars: dict | None = None, groups: dict | None = None) -> None:
    returncode, output, changed = preflight(tmp_path, extravars, groups)
    assert returncode != 0, output[-3000:]
    assert expected in output, output[-3000:]
    assert sum(changed.values()) == 0, changed


@pytest.mark.parametrize(("extravars", "expected"), [
    ({"cluster_stack": "nonsense"}, "Unknown stack 'nonsense'. Set cluster_stack to one of: baremetal, k8s"),
    ({"python_env_tensorflow_version": "2.15.x"}, "must look like 2.15.1"),
    ({"nvidia_driver_version": "580"}, "nvidia_driver_version must be a full driver version such as 580.95.05"),
    ({"rdma_stack": "ofed5"}, "rdma_stack is 'ofed5'; supported: inbox, doca, mlnx_ofed"),
    ({"cuda_toolkit_versions": ["12.8.1"], "cuda_toolkit_default": "12.6.3"},
     "cuda_toolkit_default one of them (now '12.6.3')"),
    ({"benchrunner_gpus_per_node": 2}, f"benchrunner_gpus_per_node is 2 but {NODE} has 0 usable GPU(s)"),
    ({"benchrunner_workload": {"model": "resnet9000"}}, "The benchmark settings are not valid: model 'resnet9000' is not one of"),
    ({"benchrunner_ranks": 2}, "2 ranks at 1 per node need 2 hosts, 1 given"),
    # Rendering only, as the lab does, so no cluster to apply to is needed.
    ({"cluster_stack": "k8s", "cluster_kubernetes_apply": False, "cluster_kubernetes_version": "1.33"},
     "cluster_kubernetes_version is a release such as 1.33.5"),
    ({"benchrunner_run_id": "latest"}, "run id 'latest' is reserved for the results folder's own latest"),
    ({"mpi_ssh_user": "root", "mpi_ssh_uid": 0}, "mpi_ssh_user 'root' (uid 0, group 'hpcbench') cannot be the MPI account"),
    ({"python_env_wheelhouse_min_free_gb": 1000000},
     "on the control host; it needs 1000000. Free space there, or set HPCML_CACHE_DIR"),
    # The installed ansible-core is what it is; the floor is raised above it instead.
    ({"_preflight_min_ansible_core": "99.0.0"}, "the project needs 99.0.0 or later (PyPI's ansible 12"),
], ids=lambda value: next(iter(value)) if isinstance(value, dict) else None)
def test_a_bad_setting_is_refused_before_anything_changes(tmp_path, extravars, expected):
    assert_refused(tmp_path, expected, extravars)


def test_a_bad_slurm_version_is_refused_where_the_inventory_has_a_slurm_controller(tmp_path):
    assert_refused(tmp_path, "slurm_version must be empty (the distribution's) or look like 22.05.8 (got '22.05.x')",
                   {"slurm_version": "22.05.x"}, groups={**NODES, "slurm_controller": {"hosts": {NODE: {}}}})


def test_an_inventory_without_nodes_is_refused(tmp_path):
    assert_refused(tmp_path, "has no hosts in group 'nodes'", groups={"workers": {"hosts": {"gpu001": {}}}})


@pytest.mark.parametrize("extravars", [
    {"benchrunner_launcher": "srun"},
    {"benchrunner_launcher": "torchrun", "benchrunner_stack": "slurm", "benchrunner_framework": "pytorch-ddp"},
], ids=["srun", "torchrun-in-slurm"])
def test_a_job_submitted_to_slurm_without_a_slurm_controller_is_refused(tmp_path, extravars):
    assert_refused(tmp_path, f"benchrunner_launcher is {extravars['benchrunner_launcher']} on stack slurm, which submits "
                   "a batch job to Slurm, but the inventory has no 'slurm_controller' group", extravars)


def test_a_run_id_that_already_has_results_is_refused_and_its_results_kept(tmp_path):
    earlier = tmp_path / "results" / "earlier-run"
    earlier.mkdir(parents=True)
    (earlier / "summary.json").write_text("{}")
    assert_refused(tmp_path, f"{earlier} already holds a run: choose another benchrunner_run_id",
                   {"benchrunner_run_id": "earlier-run", "cluster_results_dir": str(tmp_path / "results")})
    assert (earlier / "summary.json").read_text() == "{}"


def test_good_settings_pass_and_change_nothing(tmp_path):
    """The refusals above are the preflight's own: on this machine, with the defaults, the same play passes."""
    returncode, output, changed = preflight(tmp_path)
    assert returncode == 0, output[-3000:]
    assert changed == {"localhost": 0, NODE: 0}, changed
