"""site.yml -e cluster_stack=k8s on the lab: the host-level parts run for real, every in-cluster resource is rendered and
validated, the benchmark's MPIJob too; nothing is applied (no control plane runs in the lab's containers)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from benchrunner import kubernetes
from lab import PROJECT, lab_node_names, run_site

HEAD = "lab-head"
MANIFESTS = PROJECT / "build" / "kubernetes"
RUN_ID = "e2e-k8s"
# A fixed run id: the run before, in this checkout, left its results under it.
K8S = {"cluster_stack": "k8s", "benchrunner_run_id": RUN_ID, "benchrunner_overwrite": True}


@pytest.fixture(scope="module")
def k8s_run():
    outcome = run_site(extravars=K8S)
    assert outcome.ok, outcome.failures
    return outcome


def on(host: str, *argv: str) -> str:
    return subprocess.run(["podman", "exec", host, *argv], check=True, capture_output=True, text=True).stdout


def test_containerd_runs_on_every_kubernetes_host(k8s_run):
    for host in [HEAD, *lab_node_names()]:
        assert on(host, "systemctl", "is-active", "containerd").strip() == "active"
        loaded = on(host, "containerd", "config", "dump")
        assert "SystemdCgroup = true" in loaded and 'default_runtime_name = "runc"' in loaded
        state = json.loads(on(host, "cat", "/etc/ansible/facts.d/hpcml_containerd.fact"))
        # No GPU in the lab: the toolkit registered no nvidia runtime with the containerd role, and says why.
        assert (state["runtimes"], state["default_runtime"]) == (["runc"], "runc")
        assert "runtimes.nvidia" not in loaded
        assert on(host, "sh", "-c", "ls /etc/ansible/facts.d/hpcml_containerd_runtime_nvidia.fact 2>/dev/null || true") == ""
        if host != HEAD:
            toolkit = json.loads(on(host, "cat", "/etc/ansible/facts.d/hpcml_nvidia_container_toolkit.fact"))
            assert toolkit["steps"] == "skip" and "no NVIDIA GPU" in toolkit["reason"]
            assert on(host, "sh", "-c", "dpkg-query -W -f '${Status}' nvidia-container-toolkit 2>/dev/null || true") \
                in ("", "unknown ok not-installed")


def test_kubelet_prerequisites_are_checked_on_the_running_kernel(k8s_run):
    for host in lab_node_names():
        assert on(host, "cat", "/proc/sys/net/bridge/bridge-nf-call-iptables").strip() == "1"
        assert "net.ipv4.ip_forward = 1" in on(host, "cat", "/etc/sysctl.d/99-hpcml-kubernetes.conf")
        state = json.loads(on(host, "cat", "/etc/ansible/facts.d/hpcml_kubernetes_node.fact"))
        assert state["steps"] == "run" and "could not be loaded here (podman container)" in state["reason"]


def test_every_in_cluster_resource_is_rendered_and_valid(k8s_run):
    files = sorted(MANIFESTS.glob("[0-9]*.yaml"))
    assert [f.stem for f in files] == ["00-kubeadm", "10-flannel", "20-multus", "25-networks", "30-nvidia-runtimeclass",
                                       "31-nvidia-device-plugin", "32-rdma-shared-device-plugin",
                                       "33-nic-cluster-policy", "40-mpi-operator"]
    passed, failed = kubernetes.validate_files(files, "1.33.5")
    assert failed == [] and len(passed) == 25
    kinds = {line.split(": ", 1)[1] for line in passed}
    assert "k8s.cni.cncf.io/v1 NetworkAttachmentDefinition data" in kinds
    assert "apps/v1 Deployment mpi-operator" in kinds


def test_rendered_resources_follow_the_inventory(k8s_run):
    flannel = {d["kind"]: d for d in kubernetes.load_documents(MANIFESTS / "10-flannel.yaml")}
    assert json.loads(flannel["ConfigMap"]["data"]["net-conf.json"])["Network"] == "10.244.0.0/16"
    cluster = kubernetes.load_documents(MANIFESTS / "00-kubeadm.yaml")[1]
    assert cluster["controlPlaneEndpoint"].endswith(".10:6443")  # lab-head's address
    # No RDMA adapter in the lab: the plugin selects NVIDIA/Mellanox adapters by vendor.
    configmap = kubernetes.load_documents(MANIFESTS / "32-rdma-shared-device-plugin.yaml")[0]
    assert json.loads(configmap["data"]["config.json"])["configList"][0]["selectors"] == {"vendors": ["15b3"]}


def test_the_benchmark_mpijob_is_rendered_validated_and_kept_with_the_run(k8s_run):
    manifest = yaml.safe_load((PROJECT / "results" / RUN_ID / "mpijob.yaml").read_text())
    kubernetes.validate(manifest)
    workers = manifest["spec"]["mpiReplicaSpecs"]["Worker"]
    assert workers["replicas"] == len(lab_node_names())
    assert workers["template"]["metadata"]["annotations"] == {"k8s.v1.cni.cncf.io/networks": "default/data"}
    launcher = manifest["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert launcher["image"] == "localhost/hpcml-benchrunner:cpu"
    assert ["--stack", "k8s"] == launcher["command"][launcher["command"].index("--stack"):][:2]


def test_second_k8s_run_changes_nothing(k8s_run):
    outcome = run_site(playbook="playbooks/kubernetes.yml", extravars=K8S)
    assert outcome.ok, outcome.failures
    assert outcome.changes == []


def test_preflight_says_what_a_k8s_run_needs(tmp_path):
    outcome = run_site(extravars={**K8S, "cluster_kubernetes_apply": True, "cluster_kubernetes_mode": "existing"})
    assert not outcome.ok and outcome.changes == []
    assert any("cluster_stack=k8s needs a cluster to apply to" in f and "kube_control_plane" in f
               and "cluster_kubeconfig" in f for f in outcome.failures), outcome.failures


def test_cli_reports_the_same_through_ansible_runner():
    result = subprocess.run([sys.executable, "-m", "benchrunner", "deploy", "--stack", "k8s",
                             "-e", "cluster_kubernetes_apply=true", "-e", "cluster_kubernetes_mode=existing"], cwd=PROJECT,
                            capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode != 0
    assert "cluster_stack=k8s needs a cluster to apply to" in result.stderr and "status: failed" in result.stderr
