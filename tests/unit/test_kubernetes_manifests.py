"""The Kubernetes stack's files for a real cluster, rendered by Ansible from the roles' own templates with the example
inventory's settings and RDMA facts as rdma_facts reports them, then validated as kubernetes_resources validates them."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
import yaml

from benchrunner import kubernetes
from unit_paths import PROJECT

RESOURCES = PROJECT / "roles" / "kubernetes_resources"
CONTROL_PLANE = PROJECT / "roles" / "kubernetes_control_plane"
PREFLIGHT = PROJECT / "roles" / "preflight"
CONTAINERD = PROJECT / "roles" / "containerd"
SHARED = PROJECT / "roles" / "cluster"
EXAMPLE = yaml.safe_load((PROJECT / "inventory" / "example" / "group_vars" / "all.yml").read_text())
MANIFESTS = ["10-flannel", "20-multus", "25-networks", "30-nvidia-runtimeclass", "31-nvidia-device-plugin",
             "32-rdma-shared-device-plugin", "33-nic-cluster-policy", "40-mpi-operator"]


def render(tmp_path: Path, roles: tuple[Path, ...], templates: dict[Path, str], extra: dict) -> dict[str, str]:
    """Renders each template (a path) to the output named beside it, with the variables of the roles given."""
    playbook = tmp_path / "render.yml"
    playbook.write_text(json.dumps([{
        "hosts": "localhost", "gather_facts": False,
        # As a play sees them: the shared values (the cluster role), then the roles' own.
        "vars_files": [str(path) for r in (SHARED, *roles) for d in ("defaults", "vars")
                       if (path := r / d / "main.yml").is_file()],
        "tasks": [{"ansible.builtin.template": {"src": str(src), "dest": str(tmp_path / out),
                                                "mode": "0644"}} for src, out in templates.items()],
    }]))
    env = dict(os.environ, ANSIBLE_CONFIG=str(PROJECT / "ansible.cfg"))
    run = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                          "-e", f"ansible_python_interpreter={sys.executable}", "-e", json.dumps(extra), str(playbook)],
                         cwd=PROJECT, env=env, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout[-3000:]
    return {out: (tmp_path / out).read_text() for out in templates.values()}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    settings = {k: v for k, v in EXAMPLE.items() if k.startswith(("kubernetes_", "cluster_"))}
    # What rdma_facts found on the nodes, and the first control plane's address.
    extra = {**settings, "_kubernetes_resources_rdma_netdevs": ["ibp12s0", "ibp75s0"],
             "_kubernetes_control_plane_api_endpoint": "10.0.0.10:6443"}
    # The resources and, as kubernetes_resources renders it beside them, kubeadm's configuration.
    templates = {RESOURCES / "templates" / f"{m}.yaml.j2": f"{m}.yaml" for m in MANIFESTS}
    templates[CONTROL_PLANE / "templates" / "kubeadm.yaml.j2"] = "00-kubeadm.yaml"
    return render(tmp_path_factory.mktemp("k8s"), (RESOURCES, CONTROL_PLANE), templates, extra)


def docs(cluster, name):
    return kubernetes.load_documents_from(cluster[f"{name}.yaml"])


def test_every_resource_for_the_example_cluster_is_valid(cluster, tmp_path):
    paths = []
    for name, text in cluster.items():
        (tmp_path / name).write_text(text)
        paths.append(tmp_path / name)
    passed, failed = kubernetes.validate_files(sorted(paths), EXAMPLE["cluster_kubernetes_version"])
    assert failed == [] and len(passed) == 25


def test_the_rdma_plugin_exposes_the_netdevs_the_nodes_reported(cluster):
    configmap = docs(cluster, "32-rdma-shared-device-plugin")[0]
    entry = json.loads(configmap["data"]["config.json"])["configList"][0]
    assert entry == {"resourceName": "rdma_shared_device_a", "rdmaHcaMax": 63,
                     "selectors": {"ifNames": ["ibp12s0", "ibp75s0"]}}
    policy = docs(cluster, "33-nic-cluster-policy")[0]["spec"]["rdmaSharedDevicePlugin"]
    assert json.loads(policy["config"])["configList"][0]["selectors"] == entry["selectors"]
    assert (policy["repository"], policy["image"], policy["version"]) == ("ghcr.io/mellanox", "k8s-rdma-shared-dev-plugin",
                                                                         "v1.5.3")


def test_the_secondary_network_is_an_ipoib_attachment_with_its_ipam(cluster):
    nad = docs(cluster, "25-networks")[0]
    assert (nad["metadata"]["name"], nad["metadata"]["namespace"]) == ("rdma-net", "default")
    assert json.loads(nad["spec"]["config"]) == {"cniVersion": "0.3.1", "name": "rdma-net", "type": "ipoib",
                                                 "master": "ib0",
                                                 "ipam": {"type": "whereabouts", "range": "192.168.100.0/24"}}


def test_kubeadm_gets_the_version_the_networks_and_the_systemd_driver(cluster):
    init, config, kubelet = docs(cluster, "00-kubeadm")
    assert init["nodeRegistration"]["criSocket"] == "unix:///run/containerd/containerd.sock"
    assert (config["kubernetesVersion"], config["controlPlaneEndpoint"]) == ("v1.33.5", "10.0.0.10:6443")
    assert config["networking"] == {"podSubnet": "10.244.0.0/16", "serviceSubnet": "10.96.0.0/12"}
    assert (kubelet["cgroupDriver"], kubelet["failSwapOn"]) == ("systemd", True)


def containerd_config(tmp_path, version: str, nvidia: bool, default: bool = True) -> dict:
    # What the container toolkit's registration (the containerd role's runtime entry point) leaves in ansible_local.
    registered = {"hpcml_containerd_runtime_nvidia": {"binary": "/usr/bin/nvidia-container-runtime", "default": default}}
    out = render(tmp_path, (CONTAINERD,), {CONTAINERD / "templates" / "config.toml.j2": "config.toml"}, {
        "_containerd_version_out": {"stdout": f"containerd containerd.io {version} abc"},
        "ansible_local": registered if nvidia else {}, "containerd_sandbox_image": "registry.local/pause:3.10"})
    return tomllib.loads(out["config.toml"])


@pytest.mark.parametrize(("version", "schema", "runtime_plugin", "sandbox"), [
    ("1.7.27", 2, 'io.containerd.grpc.v1.cri', ("io.containerd.grpc.v1.cri", "sandbox_image")),
    ("v2.1.4", 3, "io.containerd.cri.v1.runtime", ("io.containerd.cri.v1.images", "pinned_images", "sandbox")),
])
def test_containerd_config_for_each_major_version(tmp_path, version, schema, runtime_plugin, sandbox):
    config = containerd_config(tmp_path, version, nvidia=True)
    assert config["version"] == schema
    plugins = config["plugins"]
    value = plugins
    for key in sandbox:
        value = value[key]
    assert value == "registry.local/pause:3.10"
    runtimes = plugins[runtime_plugin]["containerd"]
    assert runtimes["default_runtime_name"] == "nvidia"
    assert runtimes["runtimes"]["nvidia"]["options"] == {"BinaryName": "/usr/bin/nvidia-container-runtime",
                                                         "SystemdCgroup": True}
    assert runtimes["runtimes"]["runc"]["options"] == {"SystemdCgroup": True}


def test_containerd_without_the_toolkit_or_as_a_runtime_class(tmp_path):
    plain = containerd_config(tmp_path, "1.6.20", nvidia=False)["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]
    assert plain["default_runtime_name"] == "runc" and "nvidia" not in plain["runtimes"]
    classed = containerd_config(tmp_path, "1.6.20", nvidia=True, default=False)
    runtimes = classed["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]
    assert runtimes["default_runtime_name"] == "runc" and "nvidia" in runtimes["runtimes"]


def k8s_tasks(tasks: list) -> list[dict]:
    """Every kubernetes.core.k8s task, blocks included."""
    found = []
    for task in tasks or []:
        for key in ("block", "rescue", "always"):
            found += k8s_tasks(task.get(key, []))
        found += [task[m] for m in ("kubernetes.core.k8s", "k8s") if m in task]
    return found


def test_every_apply_is_server_side_with_one_field_manager():
    # Client-side apply copies each object into the last-applied-configuration annotation, which may hold at most
    # 262,144 bytes (apimachinery's TotalAnnotationSizeLimitB); the MPIJob CRD alone is over it. The rule: no
    # apply task of the project is client-side.
    applies = [args for path in sorted(PROJECT.glob("roles/*/tasks/*.yml"))
               for args in k8s_tasks(yaml.safe_load(path.read_text()))
               if args.get("state", "present") == "present"]
    assert len(applies) >= 2
    for args in applies:
        assert args.get("apply") is True, args
        assert args.get("server_side_apply") == "{{ _kubernetes_resources_server_side_apply }}", args
    settings = yaml.safe_load((RESOURCES / "vars" / "main.yml").read_text())["_kubernetes_resources_server_side_apply"]
    assert settings["field_manager"] and settings["force_conflicts"] is True


def test_the_mpi_operator_controller_and_crd_are_one_release(tmp_path, cluster):
    release = yaml.safe_load((RESOURCES / "defaults" / "main.yml").read_text())["kubernetes_resources_mpi_operator_version"]
    assert release == "v0.8.1"
    (tmp_path / "pins.j2").write_text(
        "{{ kubernetes_resources_mpi_operator_crd_url }}\n{{ kubernetes_resources_mpi_operator_image }}\n")
    url, image = render(tmp_path, (RESOURCES,), {tmp_path / "pins.j2": "pins"}, {})["pins"].split()
    assert url == ("https://raw.githubusercontent.com/kubeflow/mpi-operator/v0.8.1/manifests/base/"
                   "kubeflow.org_mpijobs.yaml")
    assert image == "mpioperator/mpi-operator:0.8.1"
    deployment = next(d for d in docs(cluster, "40-mpi-operator") if d["kind"] == "Deployment")
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == image


def test_node_feature_discovery_is_deployed_once(tmp_path):
    charts = ("gpu-operator", "network-operator")
    values = render(tmp_path, (RESOURCES,), {RESOURCES / "templates" / f"{c}-values.yaml.j2": f"{c}.yaml" for c in charts}, {})
    # Both charts deploy NFD unless told not to: each must say so explicitly, and exactly one may.
    enabled = {c: yaml.safe_load(values[f"{c}.yaml"])["nfd"]["enabled"] for c in charts}
    assert enabled == {"gpu-operator": True, "network-operator": False}


def test_mpijobs_ask_for_the_rdma_resource_the_device_plugin_advertises(tmp_path):
    # The benchrunner role's job, with the shared values as site.yml has them.
    settings = {"cluster_kubernetes_rdma_resource_name": "hca_x", "cluster_kubernetes_version": "1.33.5",
                "cluster_stack": "k8s", "benchrunner_network": "rdma", "_benchrunner_run": "r1",
                "_benchrunner_git_commit": "", "cluster_nodes_group": "all", "benchrunner_shm_size": "2Gi",
                "benchrunner_namespace": "bench",
                # Any setting of the launcher's, over the variables' own.
                "benchrunner_launcher_settings": {"worker_cpu": "4", "namespace": "bench2"}}
    (tmp_path / "job.j2").write_text("{{ _benchrunner_job_request | to_json }}")
    role = PROJECT / "roles" / "benchrunner"
    job = json.loads(render(tmp_path, (role,), {tmp_path / "job.j2": "job.json"}, settings)["job.json"])
    assert job["kubernetes"]["rdma_resource"] == "rdma/hca_x"
    assert job["kubernetes"]["version"] == settings["cluster_kubernetes_version"] and job["launcher"] == "mpijob"
    # The pods' sizes are benchrunner's defaults (job_defaults) unless the inventory sets one: only that one is asked.
    assert job["kubernetes"]["shm_size"] == "2Gi" and "worker_memory" not in job["kubernetes"]
    assert (job["kubernetes"]["worker_cpu"], job["kubernetes"]["namespace"]) == ("4", "bench2")


def preflight(tmp_path: Path, role: Path, tasks: str, extra: dict) -> subprocess.CompletedProcess:
    """Runs one of a role's preflight task files on localhost with the shared values and the role's own."""
    # Rendering only (as the lab) unless the test says otherwise: localhost has no control plane to apply to.
    extra = {"cluster_kubernetes_apply": False, **extra}
    playbook = tmp_path / "preflight.yml"
    playbook.write_text(json.dumps([{
        "hosts": "localhost", "gather_facts": False,
        "vars_files": [str(path) for r in (SHARED, role) for d in ("defaults", "vars")
                       if yaml.safe_load((path := r / d / "main.yml").read_text())],
        "tasks": [{"ansible.builtin.import_tasks": str(role / "tasks" / tasks)}],
    }]))
    env = dict(os.environ, ANSIBLE_CONFIG=str(PROJECT / "ansible.cfg"))
    return subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                           "-e", f"ansible_python_interpreter={sys.executable}", "-e", json.dumps(extra),
                           str(playbook)], cwd=PROJECT, env=env, capture_output=True, text=True, check=False)


@pytest.mark.parametrize(("network", "refused"), [
    ({"type": "ipoib", "master": "ib0", "ipam": {"type": "host-local", "subnet": "192.168.100.0/24"}}, "ipoib"),
    ({"type": "macvlan", "master": "ens1f0", "ipam": {"type": "whereabouts", "range": "192.168.100.0/24"}},
     "whereabouts"),
    ({"type": "ipvlan", "master": "ib0", "ipam": {"type": "host-local", "subnet": "192.168.100.0/24"}}, None),
])
def test_preflight_refuses_networks_whose_plugins_the_role_does_not_install(tmp_path, network, refused):
    networks = {"kubernetes_resources_secondary_networks": [{"name": "rdma-net", **network}]}
    run = preflight(tmp_path, RESOURCES, "00-preflight.yml", networks)
    if refused is None:
        assert run.returncode == 0, run.stdout[-2000:]
        return
    assert run.returncode != 0 and f"uses {refused}, which this role does not install" in run.stdout, run.stdout[-2000:]
    # Said installed, the same network passes.
    assert preflight(tmp_path, RESOURCES, "00-preflight.yml",
                     {**networks, "kubernetes_resources_cni_plugins_installed": [refused]}).returncode == 0


def test_preflight_says_what_a_cluster_to_apply_to_needs(tmp_path):
    run = preflight(tmp_path, PREFLIGHT, "kubernetes.yml", {"cluster_kubernetes_apply": True})
    text = " ".join(run.stdout.split())
    assert run.returncode != 0 and "cluster_stack=k8s needs a cluster to apply to" in text, run.stdout[-2000:]
    assert "inventory group 'kube_control_plane'" in text
    existing = tmp_path / "kubeconfig"
    existing.write_text("apiVersion: v1\nkind: Config\n")
    existing_cluster = {"cluster_kubernetes_apply": True, "cluster_kubernetes_mode": "existing",
                        "cluster_kubeconfig": str(existing)}
    assert preflight(tmp_path, PREFLIGHT, "kubernetes.yml", existing_cluster).returncode == 0
