"""Bad input stops in preflight, with a message naming the fix, before anything changes."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from lab import LAB_INVENTORY, PROJECT, run_site


def assert_stopped_in_preflight(outcome, expected: str) -> None:
    assert not outcome.ok
    assert any(expected in failure for failure in outcome.failures), outcome.failures
    assert outcome.changes == [], outcome.changes


def test_unknown_stack():
    assert_stopped_in_preflight(run_site(extravars={"cluster_stack": "nonsense"}),
                                "Unknown stack 'nonsense'. Set cluster_stack to one of: baremetal, k8s")


def test_inventory_without_nodes_group(tmp_path):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  children:\n    workers:\n      hosts:\n        gpu001: {}\n")
    assert_stopped_in_preflight(run_site(inventory=str(inventory)), "has no hosts in group 'nodes'")


def test_bad_version_string():
    assert_stopped_in_preflight(run_site(extravars={"python_env_tensorflow_version": "2.15.x"}),
                                "must look like 2.15.1")


def test_bad_driver_version():
    assert_stopped_in_preflight(run_site(extravars={"nvidia_driver_version": "580"}),
                                "nvidia_driver_version must be a full driver version such as 580.95.05")


def test_unsupported_rdma_stack_names_the_supported_ones():
    assert_stopped_in_preflight(run_site(extravars={"rdma_stack": "ofed5"}),
                                "rdma_stack is 'ofed5'; supported: inbox, doca, mlnx_ofed")


def test_cuda_default_must_be_an_installed_toolkit():
    assert_stopped_in_preflight(run_site(extravars={"cuda_toolkit_versions": ["12.8.1"], "cuda_toolkit_default": "12.6.3"}),
                                "cuda_toolkit_default one of them (now '12.6.3')")


def test_more_gpus_asked_than_found():
    assert_stopped_in_preflight(run_site(extravars={"benchrunner_gpus_per_node": 2}),
                                "benchrunner_gpus_per_node is 2 but lab-node1 has 0 usable GPU(s)")


def test_unknown_model():
    assert_stopped_in_preflight(run_site(extravars={"benchrunner_workload": {"model": "resnet9000"}}),
                                "The benchmark settings are not valid: model 'resnet9000' is not one of")


def test_more_ranks_than_nodes():
    assert_stopped_in_preflight(run_site(extravars={"benchrunner_ranks": 3}),
                                "3 ranks at 1 per node need 3 hosts, 2 given")


def test_cli_reports_preflight_failure_through_ansible_runner():
    result = subprocess.run([sys.executable, "-m", "benchrunner", "deploy", "-e", "cluster_stack=nonsense"], cwd=PROJECT,
                            capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode != 0
    assert "Unknown stack 'nonsense'" in result.stderr
    assert "status: failed" in result.stderr


def test_passing_preflight_changes_nothing():
    outcome = run_site(tags="preflight")
    assert outcome.ok, outcome.failures
    assert outcome.changes == []


def test_bad_kubernetes_version():
    assert_stopped_in_preflight(run_site(extravars={"cluster_stack": "k8s", "cluster_kubernetes_version": "1.33"}),
                                "cluster_kubernetes_version is a release such as 1.33.5")


def test_bad_slurm_version():
    assert_stopped_in_preflight(run_site(extravars={"slurm_version": "22.05.x"}),
                                "slurm_version must be empty (the distribution's) or look like 22.05.8 (got '22.05.x')")


@pytest.mark.parametrize("extravars", [
    {"benchrunner_launcher": "srun"},
    {"benchrunner_launcher": "torchrun", "benchrunner_stack": "slurm", "benchrunner_framework": "pytorch-ddp"},
])
def test_a_job_submitted_to_slurm_without_a_slurm_controller(tmp_path, extravars):
    inventory = yaml.safe_load(LAB_INVENTORY.read_text())
    del inventory["all"]["children"]["slurm_controller"]
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(inventory))
    assert_stopped_in_preflight(run_site(inventory=str(path), extravars=extravars),
                                f"benchrunner_launcher is {extravars['benchrunner_launcher']} on stack slurm, which "
                                "submits a batch job to Slurm, but the inventory has no 'slurm_controller' group")


def test_two_inventory_names_for_one_machine(tmp_path):
    inventory = yaml.safe_load(LAB_INVENTORY.read_text())
    nodes = inventory["all"]["children"]["nodes"]["hosts"]
    first = sorted(nodes)[0]
    nodes["alias-of-node1"] = dict(nodes[first])
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(inventory))
    outcome = run_site(inventory=str(path))
    assert_stopped_in_preflight(outcome, f"alias-of-node1 and {first} are one machine (the same /etc/machine-id)")
    assert_stopped_in_preflight(outcome, f"alias-of-node1 and {first} answer to one hostname, {first}")


def test_a_reserved_run_id():
    assert_stopped_in_preflight(run_site(extravars={"benchrunner_run_id": "latest"}),
                                "run id 'latest' is reserved for the results folder's own latest")


def test_a_run_id_that_already_has_results(tmp_path):
    earlier = tmp_path / "results" / "earlier-run"
    earlier.mkdir(parents=True)
    (earlier / "summary.json").write_text("{}")
    settings = {"benchrunner_run_id": "earlier-run", "cluster_results_dir": str(tmp_path / "results")}
    assert_stopped_in_preflight(run_site(extravars=settings),
                                f"{earlier} already holds a run: choose another benchrunner_run_id")
    assert (earlier / "summary.json").read_text() == "{}"


def test_mpi_ssh_user_root_is_refused_before_any_change():
    assert_stopped_in_preflight(run_site(extravars={"mpi_ssh_user": "root", "mpi_ssh_uid": 0}),
                                "mpi_ssh_user 'root' (uid 0, group 'hpcbench') cannot be the MPI account")


def test_a_control_host_without_room_for_the_wheelhouse():
    assert_stopped_in_preflight(run_site(extravars={"python_env_wheelhouse_min_free_gb": 1000000}),
                                "on the control host; it needs 1000000. Free space there, or set HPCML_CACHE_DIR")


def test_a_control_host_with_an_older_ansible():
    # The installed ansible-core is what it is; the floor is raised above it instead.
    assert_stopped_in_preflight(run_site(extravars={"_preflight_min_ansible_core": "99.0.0"}),
                                "the project needs 99.0.0 or later (PyPI's ansible 12")
