"""The project's Kubernetes path against a real API server: kube-apiserver 1.20.2 (Debian's source, built by
tools/apiserver/build.sh) on loopback with Debian's etcd 3.4 (tools/apiserver/cluster.sh). playbooks/kubernetes.yml
applies the kubernetes_resources role's resources to it as to an existing cluster, and benchrunner submits, watches and deletes
an MPIJob. No scheduler, controllers or kubelets run: the real server validates, defaults, prunes and stores every
object, and nothing starts. `make apiserver-check` builds the server and runs this with APISERVER_REQUIRED=1, where a
missing server fails instead of skipping."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

PROJECT = Path(__file__).resolve().parents[2]
TOOLS = PROJECT / "tools" / "apiserver"
REQUIRED = os.environ.get("APISERVER_REQUIRED") == "1"
CACHE = Path(os.environ.get("HPCML_CACHE_DIR") or Path.home() / ".cache" / "hpcml")
DEFAULTS = yaml.safe_load((PROJECT / "roles" / "kubernetes_resources" / "defaults" / "main.yml").read_text())
NODE = "apinode-0"
NAMESPACE = "default"
# The lab's secondary network with reference IPAM (whereabouts is not installed by the role; preflight refuses it).
NETWORK = {"name": "data", "type": "macvlan", "master": "eth0", "ipam": {"type": "host-local", "subnet": "192.168.210.0/24"}}
# The manifests the role applies with its defaults plus one secondary network (roles/kubernetes_resources/vars/main.yml).
APPLIED = ["10-flannel", "20-multus", "25-networks", "30-nvidia-runtimeclass", "31-nvidia-device-plugin",
           "32-rdma-shared-device-plugin", "40-mpi-operator"]
FIELD_MANAGER = "hpcml-kubernetes"


def unavailable(reason: str) -> None:
    if REQUIRED:
        pytest.fail(reason)
    pytest.skip(f"{reason} (make apiserver-check builds it and runs these)")


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory):
    cached = subprocess.run([str(TOOLS / "build.sh"), "--cached"], capture_output=True, text=True, check=False)
    if cached.returncode != 0:
        unavailable(f"no cached kube-apiserver: {cached.stderr.strip()}")
    if not shutil.which("etcd"):
        unavailable("etcd is not installed (make apiserver installs etcd-server)")
    state = tmp_path_factory.mktemp("apiserver") / "cluster"
    started = subprocess.run([str(TOOLS / "cluster.sh"), "start", str(state)], capture_output=True, text=True,
                             timeout=180, check=False)
    try:
        assert started.returncode == 0, started.stderr
        yield started.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run([str(TOOLS / "cluster.sh"), "stop", str(state)], check=True, timeout=60)


@pytest.fixture(scope="module")
def api(kubeconfig):
    from kubernetes import config, dynamic  # noqa: PLC0415 - the control host's extra, as in benchrunner.launchers.mpijob.submit

    return dynamic.DynamicClient(config.new_client_from_config(config_file=kubeconfig))


def mpijob_crd() -> Path | None:
    """The MPI Operator's CRD at the role's pinned version, where this host keeps a copy (it may have no route to
    GitHub, where the role downloads it from); None lets the role download it."""
    version = DEFAULTS["kubernetes_resources_mpi_operator_version"]
    path = Path(os.environ.get("APISERVER_MPIJOB_CRD")
                or CACHE / f"mpi-operator-{version}" / "kubeflow.org_mpijobs.yaml")
    if not path.is_file():
        return None
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert digest == DEFAULTS["kubernetes_resources_mpi_operator_crd_sha256"], f"{path}: sha256 {digest} is not the role's pin"
    return path


class Play:
    def __init__(self, completed: subprocess.CompletedProcess):
        self.output = completed.stdout + completed.stderr
        recap = re.search(r"localhost\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", completed.stdout)
        assert recap, self.output[-5000:]
        self.ok, self.changed, _, self.failed = (int(n) for n in recap.groups())
        self.returncode = completed.returncode


def kubernetes_play(tmp_path: Path, kubeconfig: str, manifests: Path) -> Play:
    # One worker, named as the Node the API server knows: the role labels it. Only the control host's play runs
    # (--limit matches no implicit localhost, so the inventory names it).
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {
        "hosts": {"localhost": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}},
        "children": {"nodes": {"hosts": {NODE: {}}}}}}))
    extravars = {"cluster_kubernetes_mode": "existing", "cluster_kubeconfig": kubeconfig, "cluster_kubernetes_apply": True,
                 "kubernetes_resources_apply_wait": False, "kubernetes_resources_manifest_dir": str(manifests),
                 "kubernetes_resources_secondary_networks": [NETWORK]}
    env = dict(os.environ, ANSIBLE_CONFIG=str(PROJECT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_STDOUT_CALLBACK="default")
    completed = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory),
                                "--limit", "localhost", "-e", json.dumps(extravars), "playbooks/kubernetes.yml"],
                               cwd=PROJECT, env=env, capture_output=True, text=True, timeout=600, check=False)
    return Play(completed)


@pytest.fixture(scope="module")
def applied(kubeconfig, api, tmp_path_factory):
    """The role's apply step, run once; returns its play and the manifests it rendered."""
    api.resources.get(api_version="v1", kind="Node").create(body={"metadata": {"name": NODE}})
    tmp_path = tmp_path_factory.mktemp("role")
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    crd = mpijob_crd()
    if crd:
        # get_url skips the download when the file is there with the pinned checksum.
        shutil.copy(crd, manifests / "39-mpijob-crd.yaml")
    return kubernetes_play(tmp_path, kubeconfig, manifests), manifests


def documents(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_the_role_applies_every_resource_server_side(applied, api):
    play, manifests = applied
    assert play.returncode == 0 and play.failed == 0, play.output[-5000:]
    objects = [d for name in ["39-mpijob-crd", *APPLIED] for d in documents(manifests / f"{name}.yaml")]
    assert len(objects) >= 20, [f"{d['kind']} {d['metadata']['name']}" for d in objects]
    not_ours = {}
    for document in objects:
        meta = document["metadata"]
        stored = api.resources.get(api_version=document["apiVersion"], kind=document["kind"]).get(
            name=meta["name"], namespace=meta.get("namespace"))
        # An object that sets nothing beyond its name (the ServiceAccounts) owns no field, and server-side apply
        # drops a manager whose field set is empty: it exists, with no managedFields.
        if set(document) <= {"apiVersion", "kind", "metadata"} and set(meta) <= {"name", "namespace"}:
            continue
        managers = {(m.manager, m.operation) for m in stored.metadata.managedFields or []}
        if (FIELD_MANAGER, "Apply") not in managers:
            not_ours[f"{document['kind']} {meta['name']}"] = sorted(managers)
    assert not_ours == {}
    node = api.resources.get(api_version="v1", kind="Node").get(name=NODE)
    assert node.metadata.labels["nvidia.com/gpu.present"] == "false"


def test_server_side_apply_refuses_a_field_the_server_does_not_know(api):
    """Why the role's apply checks every field of the built-in kinds against 1.20: under server-side apply, 1.20
    answers a field missing from its schema with an error (a plain create drops it silently)."""
    from kubernetes.dynamic.exceptions import ApiException  # noqa: PLC0415 - with the client above

    daemonset = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "probe", "namespace": NAMESPACE},
                 "spec": {"selector": {"matchLabels": {"app": "probe"}}, "template": {
                     "metadata": {"labels": {"app": "probe"}},
                     # hostUsers: Kubernetes 1.25 and later.
                     "spec": {"hostUsers": False, "containers": [{"name": "probe", "image": "probe"}]}}}}
    with pytest.raises(ApiException, match=r"spec\.template\.spec\.hostUsers: field not declared in schema"):
        api.resources.get(api_version="apps/v1", kind="DaemonSet").server_side_apply(
            body=daemonset, name="probe", namespace=NAMESPACE, field_manager=FIELD_MANAGER)


def test_the_crds_are_established(applied, api):
    crds = api.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    for name in ("mpijobs.kubeflow.org", "network-attachment-definitions.k8s.cni.cncf.io"):
        conditions = {c.type: c.status for c in crds.get(name=name).status.conditions}
        assert conditions.get("Established") == "True", (name, conditions)


def test_a_second_apply_changes_nothing(applied, kubeconfig, tmp_path):
    play, manifests = applied
    assert play.failed == 0, play.output[-5000:]
    again = kubernetes_play(tmp_path, kubeconfig, manifests)
    assert again.returncode == 0 and again.failed == 0, again.output[-5000:]
    assert again.changed == 0, again.output[-5000:]


def launch(run_id: str, kubeconfig: str, tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess, float]:
    argv = [sys.executable, "-m", "benchrunner", "launch", "--launcher", "mpijob", "--stack", "k8s", "--ranks", "2",
            "--run-id", run_id, "--network-attachment", f"{NAMESPACE}/data",
            "--runtime-class", "nvidia", "--kubeconfig", kubeconfig, "--collect-dir", str(tmp_path / run_id),
            "--manifest-out", str(tmp_path / f"{run_id}.yaml"), "--timeout", "120", *extra]
    start = time.monotonic()
    completed = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    return completed, time.monotonic() - start


def missing_or_different(sent, stored, path="spec") -> list[str]:
    """Where the stored object lacks or changed what was sent (the CRD's schema prunes fields it does not know)."""
    if isinstance(sent, dict):
        if not isinstance(stored, dict):
            return [path]
        return [p for key, value in sent.items() for p in missing_or_different(value, stored.get(key), f"{path}.{key}")]
    if isinstance(sent, list):
        if not isinstance(stored, list) or len(stored) != len(sent):
            return [path]
        return [p for i, (a, b) in enumerate(zip(sent, stored)) for p in missing_or_different(a, b, f"{path}[{i}]")]
    return [] if sent == stored else [path]


def test_an_operator_refusal_ends_the_watch_and_the_job_is_stored_as_sent(applied, api, kubeconfig, tmp_path):
    """The warning the operator would record (reason ValidationError) is found through the real server's event field
    selectors; --keep leaves the MPIJob to compare with the manifest benchrunner sent."""
    run_id = "apicheck-refused"
    api.resources.get(api_version="v1", kind="Event").create(namespace=NAMESPACE, body={
        "metadata": {"name": f"{run_id}.refused"}, "type": "Warning", "reason": "ValidationError",
        "message": "stand-in for the operator's refusal",
        "involvedObject": {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "name": run_id,
                           "namespace": NAMESPACE}})
    completed, took = launch(run_id, kubeconfig, tmp_path, "--keep")
    output = completed.stdout + completed.stderr
    assert completed.returncode == 1, output
    assert (f"MPIJob {NAMESPACE}/{run_id}: refused by the MPI Operator: MPIJob {run_id}: ValidationError: "
            "stand-in for the operator's refusal") in output
    assert took < 30, took
    mpijobs = api.resources.get(api_version="kubeflow.org/v2beta1", kind="MPIJob")
    stored = mpijobs.get(name=run_id, namespace=NAMESPACE).to_dict()
    sent = yaml.safe_load((tmp_path / f"{run_id}.yaml").read_text())
    assert missing_or_different(sent["spec"], stored["spec"]) == []
    mpijobs.delete(name=run_id, namespace=NAMESPACE)


def test_a_job_no_operator_acknowledges_is_reported_and_deleted(applied, api, kubeconfig, tmp_path):
    run_id = "apicheck-silent"
    completed, took = launch(run_id, kubeconfig, tmp_path)
    output = completed.stdout + completed.stderr
    assert completed.returncode == 1, output
    lines = [f"MPIJob {NAMESPACE}/{run_id} created",
             f"MPIJob {NAMESPACE}/{run_id}: not acknowledged by the MPI Operator after 60 s (no Created condition)",
             "no launcher pod to read results from",
             f"MPIJob {NAMESPACE}/{run_id} deleted"]
    positions = [output.find(line) for line in lines]
    assert -1 not in positions and positions == sorted(positions), output
    # benchrunner.launchers.mpijob.submit.ACKNOWLEDGE_S, not the 120 s --timeout.
    assert 60 <= took < 90, took
    # Foreground deletion: the server marks the MPIJob and leaves it to the garbage collector (kube-controller-manager,
    # not running here) to remove once its dependents are gone; it has none, so the collector would drop the finalizer.
    mpijobs = api.resources.get(api_version="kubeflow.org/v2beta1", kind="MPIJob")
    stored = mpijobs.get(name=run_id, namespace=NAMESPACE)
    assert stored.metadata.deletionTimestamp and stored.metadata.finalizers == ["foregroundDeletion"]
    mpijobs.patch(name=run_id, namespace=NAMESPACE, body={"metadata": {"finalizers": None}},
                  content_type="application/merge-patch+json")
    assert [j.metadata.name for j in mpijobs.get(namespace=NAMESPACE).items] == []
