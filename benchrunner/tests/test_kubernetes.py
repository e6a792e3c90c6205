"""The Kubernetes side of benchrunner, offline: MPIJobs per network mode against golden files and the APIs,
the manifest validator on what the API server would refuse, and running an MPIJob against a fake API."""

import os
import random
import re
import string
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from benchrunner import cli, kubernetes, launchers, logship, provenance, results
from benchrunner.launchers import mpijob as k8s_launcher
from benchrunner.launchers.mpijob import submit
from benchrunner.workload import Workload

GOLDEN = Path(__file__).parent / "golden"
# One per network mode, as a user would ask for it: RDMA and IPoIB through a Multus network, TCP and the
# overlay on the pod network.
MODES = {
    "rdma": {"network_attachment": "default/rdma-net"},
    "ipoib": {"network_attachment": "default/ipoib-net"},
    "tcp": {},
    "overlay": {"runtime_class": "nvidia"},
}


def golden_job(network: str) -> launchers.Job:
    return launchers.Job(run_id="dell2019.densenet121.8gpu.r1", output_dir="/tmp/benchrunner/r1/raw", ranks=8,
                         hosts=("gpu1", "gpu2"), gpus_per_node=4, network=network, stack="k8s", launcher="mpijob",
                         workload=Workload(model="densenet121", image_size=224, batch_size=32),
                         env=(("NCCL_DEBUG", "INFO"),), git_commit="0" * 40)


Settings = k8s_launcher.MPIJob.Settings
PODS = {"shm_size": "8Gi", "worker_cpu": "16", "worker_memory": "64Gi", "rdma_resource": "rdma/rdma_shared_device_a"}


def render(network: str) -> dict:
    return k8s_launcher.mpijob_manifest(golden_job(network), Settings(
        image="registry.example.com/hpcml/benchrunner:0.2.0-cuda", **PODS, **MODES[network]))


@pytest.mark.parametrize("network", sorted(MODES))
def test_mpijob_matches_its_golden_file(network):
    expected = yaml.safe_load((GOLDEN / f"mpijob-{network}.yaml").read_text())
    assert render(network) == expected, (
        f"the MPIJob for {network} changed; if on purpose, regenerate with "
        f"`python benchrunner/tests/test_kubernetes.py` and review the diff")


@pytest.mark.parametrize("network", sorted(MODES))
def test_golden_mpijobs_are_valid_kubernetes(network):
    assert kubernetes.validate(render(network), "1.33.5") == f"kubeflow.org/v2beta1 MPIJob {render(network)['metadata']['name']}"



@pytest.mark.parametrize("release", ["1.20.0", "1.99.0", "latest"])
def test_a_release_the_validator_does_not_know_is_named_not_a_traceback(release):
    # kubernetes-validate compares releases as strings, and indexes an empty list for one older than it knows.
    with pytest.raises(ValueError, match=re.escape(f"Kubernetes {release}: the offline validator knows 1.25.0 to")):
        kubernetes.validate(render("tcp"), release)

def worker(manifest: dict) -> dict:
    return manifest["spec"]["mpiReplicaSpecs"]["Worker"]["template"]


def test_rdma_workers_get_the_hca_locked_memory_and_the_network():
    template = worker(render("rdma"))
    container = template["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 4, "rdma/rdma_shared_device_a": 1}
    assert container["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
    assert template["metadata"]["annotations"] == {"k8s.v1.cni.cncf.io/networks": "default/rdma-net"}


def test_an_rdma_job_takes_the_resource_name_from_the_settings_only():
    manifest = k8s_launcher.mpijob_manifest(golden_job("rdma"), Settings(image="i", rdma_resource="rdma/hca_b"))
    assert worker(manifest)["spec"]["containers"][0]["resources"]["limits"]["rdma/hca_b"] == 1
    with pytest.raises(ValueError, match="--rdma-resource"):
        k8s_launcher.mpijob_manifest(golden_job("rdma"), Settings(image="i"))


@pytest.mark.parametrize("gpus", [0, 4])
def test_pods_get_memory_backed_shm_and_workers_requests_and_a_node_each(gpus):
    job = launchers.Job(run_id="r1", output_dir="/o", ranks=4, gpus_per_node=gpus, stack="k8s", launcher="mpijob")
    manifest = k8s_launcher.mpijob_manifest(job, Settings(image="i", **PODS))
    replicas = manifest["spec"]["mpiReplicaSpecs"]
    for role in ("Launcher", "Worker"):
        spec = replicas[role]["template"]["spec"]
        assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}} in spec["volumes"]
        assert {"name": "dshm", "mountPath": "/dev/shm"} in spec["containers"][0]["volumeMounts"]
    worker = replicas["Worker"]["template"]["spec"]
    assert worker["containers"][0]["resources"]["requests"] == {"cpu": "16", "memory": "64Gi"}
    (term,) = worker["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    # The labels the operator gives worker pods (training.kubeflow.org/*), this job's only, one per hostname.
    assert term == {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {
        "training.kubeflow.org/job-name": manifest["metadata"]["name"], "training.kubeflow.org/job-role": "worker"}}}
    kubernetes.validate(manifest)


def test_ipoib_over_multus_talks_on_the_secondary_interface():
    env = {e["name"]: e.get("value") for e in worker(render("ipoib"))["spec"]["containers"][0]["env"]}
    assert env["NCCL_SOCKET_IFNAME"] == "net1" and env["NCCL_IB_DISABLE"] == "1"


def test_workers_write_down_their_node_for_the_ranks_ssh_starts():
    container = worker(render("tcp"))["spec"]["containers"][0]
    assert {"name": provenance.NODE_NAME_ENV, "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} \
        in container["env"]
    assert container["command"][2].endswith(f'exec /usr/sbin/sshd -De -o "SetEnv={provenance.NODE_NAME_ENV}='
                                            f'${provenance.NODE_NAME_ENV}"')
    # Only the worker's own: mpirun's -x would hand the launcher's value to every rank.
    launcher = render("tcp")["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert provenance.NODE_NAME_ENV not in {e["name"] for e in launcher["env"]}


def test_slots_are_the_gpus_of_a_node_and_workers_the_nodes():
    spec = render("tcp")["spec"]
    assert spec["slotsPerWorker"] == 4 and spec["mpiReplicaSpecs"]["Worker"]["replicas"] == 2


def test_results_travel_in_the_log_unless_a_shared_claim_is_given():
    launcher = render("tcp")["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert {"name": results.STDOUT_ENV, "value": "1"} in launcher["env"]
    with_claim = k8s_launcher.mpijob_manifest(golden_job("tcp"), Settings(image="i", results_claim="bench-results"))
    env = with_claim["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["env"]
    assert results.STDOUT_ENV not in {e["name"] for e in env}


@pytest.mark.parametrize(("change", "message"), [
    (lambda m: worker(m)["spec"]["containers"][0].update(ports=[{"containerPort": "ssh"}]), "containerPort"),
    (lambda m: worker(m)["spec"]["containers"][0].update(resourcez={}), "resourcez"),
    (lambda m: worker(m)["spec"].update(runtimeClassName=7), "runtimeClassName"),
    (lambda m: m["spec"]["runPolicy"].update(cleanPodPolicy="Sometimes"), "cleanPodPolicy"),
    (lambda m: m["spec"].update(mpiImplementation="LAM"), "mpiImplementation"),
    # mpi-operator v0.8.1's own validation (pkg/apis/kubeflow/validation/validation.go), stricter than its CRD.
    (lambda m: m["spec"]["mpiReplicaSpecs"]["Worker"].update(restartPolicy="Always"), "restartPolicy"),
    (lambda m: m["spec"]["mpiReplicaSpecs"]["Launcher"].update(restartPolicy="ExitCode"), "restartPolicy"),
    (lambda m: m["spec"]["mpiReplicaSpecs"]["Worker"].update(replicas=0), "replicas"),
    (lambda m: m["spec"]["mpiReplicaSpecs"]["Launcher"].update(replicas=2), "replicas"),
    (lambda m: m["spec"]["mpiReplicaSpecs"]["Worker"].pop("replicas"), "replicas"),
    # Resource names and extended resources as the API server checks them.
    (lambda m: worker(m)["spec"]["containers"][0]["resources"]["limits"].update(rdma_shared_device_a=1),
     "'rdma_shared_device_a' is neither a standard resource"),
    (lambda m: worker(m)["spec"]["containers"][0]["resources"]["limits"].update({"Nvidia.com/gpu": 1}),
     "is not a qualified name"),
    (lambda m: worker(m)["spec"]["containers"][0]["resources"]["limits"].update({"rdma/": 1}),
     "is not a qualified name"),
    (lambda m: worker(m)["spec"]["containers"][0]["resources"]["requests"].update({"rdma/other": 1}),
     "without a limit"),
    (lambda m: worker(m)["spec"]["containers"][0]["resources"]["limits"].update({"nvidia.com/gpu": "0.5"}),
     "whole number"),
])
def test_validation_refuses_what_the_api_server_would(change, message):
    manifest = render("rdma")
    change(manifest)
    with pytest.raises(ValueError, match=message):
        kubernetes.validate(manifest, "1.33.5")


def nad(config: str) -> dict:
    return {"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": "rdma-net", "namespace": "default"}, "spec": {"config": config}}


# The rules as the API server and the MPI Operator v0.8.1 apply them (apimachinery's IsDNS1035Label/IsDNS1123Label;
# the operator's validateMPIJobName), written out here independently of k8s_launcher.k8s_name_problems.
DNS1035 = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
DNS1123 = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def run_ids() -> list[str]:
    rng = random.Random(19)
    alphabet = string.ascii_letters + string.digits + "._-: /"
    made = ["20261123T101500Z-k8s", "20261123T101500Z-k8s.campaign.resnet50.64gpu.r3", "x" * 300, "9" * 70,
            "Lab.Train_small_cnn.R1", "lab-train-small-cnn-r1", "a", "A", "0", "-a-", "a" * 63, "a" * 54, "é-run"]
    made += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 120))) for _ in range(400)]
    return made


@pytest.mark.parametrize("workers", [1, 2, 10, 11, 100, 1001])
def test_every_run_id_names_an_mpijob_whose_derived_names_are_all_valid(workers):
    names: dict[str, str] = {}
    for run_id in run_ids():
        if not re.search(r"[A-Za-z0-9]", run_id):
            with pytest.raises(ValueError, match="no letter or digit"):
                k8s_launcher.k8s_name(run_id, workers)
            continue
        name = k8s_launcher.k8s_name(run_id, workers)
        assert DNS1035.fullmatch(name), (run_id, name)
        assert DNS1123.fullmatch(f"{name}-launcher"), (run_id, name)
        assert DNS1035.fullmatch(f"{name}-worker-{workers - 1}"), (run_id, name)
        assert names.setdefault(name, run_id) == run_id, f"{run_id!r} and {names[name]!r} both name {name}"


def test_a_date_run_id_gives_an_mpijob_the_api_server_and_the_operator_accept():
    job = launchers.Job(run_id="20261123T101500Z-k8s", output_dir="/o", ranks=4, stack="k8s", launcher="mpijob")
    manifest = k8s_launcher.mpijob_manifest(job, Settings(image="i:1"))
    assert kubernetes.validate(manifest).startswith("kubeflow.org/v2beta1 MPIJob run-20261123t101500z-k8s-")
    # What the old mapping gave: a Service name starting with a digit, which the API server refuses.
    manifest["metadata"]["name"] = "20261123t101500z-k8s"
    with pytest.raises(ValueError, match="DNS-1035"):
        kubernetes.validate(manifest)


def test_a_run_id_without_a_name_is_refused_before_anything_is_submitted(capsys):
    assert cli.main(["launch", "--launcher", "mpijob", "--stack", "k8s", "--run-id", "...", "--results-dir", "/o",
                     "--ranks", "2", "--image", "i:1", "--collect-dir", "/nonexistent"]) == 2
    assert "run id '...' must be 1 to 128 letters" in capsys.readouterr().err


def test_network_attachments_are_checked_down_to_their_cni_config():
    good = '{"cniVersion": "0.3.1", "name": "rdma-net", "type": "macvlan", "master": "ens1f0", "mode": "bridge",' \
           ' "ipam": {"type": "whereabouts", "range": "192.168.100.0/24"}}'
    assert kubernetes.validate(nad(good)) == "k8s.cni.cncf.io/v1 NetworkAttachmentDefinition rdma-net"
    with pytest.raises(ValueError, match="required property"):
        kubernetes.validate(nad(good.replace('"master": "ens1f0", ', '')))
    with pytest.raises(ValueError, match="not JSON"):
        kubernetes.validate(nad("{type: macvlan"))


def test_the_rdma_plugin_config_is_checked():
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "rdma-devices", "namespace": "kube-system"},
                 "data": {"config.json": '{"configList": [{"resourceName": "rdma_shared_device_a", "rdmaHcaMax": 63,'
                                         ' "selectors": {}}]}'}}
    with pytest.raises(ValueError, match="selectors"):
        kubernetes.validate(configmap)


def test_resource_names_of_built_in_workloads_are_checked_too():
    daemonset = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d"}, "spec": {
        "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {
            "containers": [{"name": "c", "image": "i", "resources": {"limits": {"rdma/hca_a": 1}}}]}}}}
    assert kubernetes.validate(daemonset) == "apps/v1 DaemonSet d"
    daemonset["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] = {"hca_a": 1}
    with pytest.raises(ValueError, match="'hca_a' is neither"):
        kubernetes.validate(daemonset)


def test_strict_mode_refuses_unknown_fields_of_built_in_kinds():
    runtime_class = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"},
                     "handler": "nvidia"}
    assert kubernetes.validate(runtime_class) == "node.k8s.io/v1 RuntimeClass nvidia"
    with pytest.raises(ValueError, match="handlr"):
        kubernetes.validate({**runtime_class, "handlr": "nvidia"})


def test_an_unknown_custom_resource_is_not_waved_through():
    with pytest.raises(ValueError, match="no schema of this project covers it"):
        kubernetes.validate({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}})


def test_validate_manifests_command_reports_each_object(tmp_path, capsys):
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(yaml.safe_dump_all([render("tcp"), nad('{"cniVersion": "0.3.1", "name": "n", "type": "host-device",'
                                                           ' "device": "ib0", "ipam": {"type": "static"}}')]))
    bad.write_text(yaml.safe_dump({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "x"},
                                   "spec": {"selector": {}, "template": {}, "replicas": 2}}))
    assert cli.main(["validate-manifests", str(good)]) == 0
    assert "2 objects valid" in capsys.readouterr().out
    assert cli.main(["validate-manifests", str(good), str(bad)]) == 1
    captured = capsys.readouterr()
    assert "bad.yaml[0]: DaemonSet x" in captured.err and "replicas" in captured.err


def rank_files(ranks: int) -> dict[str, str]:
    return {f"rank-{i:05d}.json": f'{{"rank": {i}, "pad": "{"x" * (1500 + 997 * i)}"}}\n' for i in range(ranks)}


def forwarded(files: dict[str, str], seed: int, read: int = 4096) -> str:
    """The launcher's log as mpirun --tag-output writes it: each rank's output read in pieces of up to `read` bytes
    (cut anywhere), each piece tagged as Open MPI 4.1 does (at its start and after each newline inside it), the
    ranks' pieces interleaved; launcher lines of its own fall between pieces that end a line."""
    rng = random.Random(seed)
    queues = []
    for rank, (name, text) in enumerate(files.items()):
        out = "".join(logship.records(name, text)) + f"rank {rank}: 100.0 images/s\n"
        cuts, pos = [], 0
        while pos < len(out):
            size = rng.randint(1, read)
            cuts.append(out[pos:pos + size])
            pos += size
        tag = f"[1,{rank}]<stdout>:"
        queues.append([tag + piece[:-1].replace("\n", "\n" + tag) + piece[-1] for piece in cuts])
    log = ""
    while any(queues):
        queue = rng.choice([q for q in queues if q])
        log += queue.pop(0)
        if log.endswith("\n") and rng.random() < 0.2:
            log += "Warning: Permanently added 'w-1' (ED25519) to the list of known hosts.\n"
        if rng.random() < 0.2:
            # The same rank's stderr, tagged apart, may come between two pieces of its stdout.
            log += f"[1,{rng.randrange(len(files))}]<stderr>:2026-01-01 W tensorflow: a warning\n"
    return log


@pytest.mark.parametrize("seed", range(20))
def test_results_are_reassembled_from_cut_and_interleaved_output(seed):
    files = rank_files(4)
    log = forwarded(files, seed)
    # The cuts did split records: read line by line, fewer records are whole than were sent.
    sent = sum(len(logship.records(name, text)) for name, text in files.items())
    whole = sum(bool(re.fullmatch(r"\[1,\d\]<stdout>:" + logship.MARKER + r":[^\[]*:[0-9a-f]{8}", line))
                for line in log.splitlines())
    assert whole < sent
    collected = logship.collect(log)
    assert collected.files == files and collected.incomplete == {} and collected.damaged == 0


def test_a_log_cut_by_rotation_reports_the_missing_ranks_and_parses_nothing_wrong(tmp_path):
    files = rank_files(4)
    log = forwarded(files, seed=3)
    # kubelet rotated the log: the API serves what came after some point in the middle.
    tail = log[len(log) // 2:]
    written, missing = submit.write_collected(tail, tmp_path, tmp_path / "raw", submit.expected_results("train", 4))
    assert missing and all(line.startswith("rank-") or "beyond repair" in line for line in missing)
    for path in written:
        assert path.read_text() == files[path.name]
    assert len(written) + sum(line.startswith("rank-") for line in missing) == 4


def test_a_record_that_was_changed_is_refused_not_parsed():
    files = rank_files(1)
    lines = logship.records("rank-00000.json", files["rank-00000.json"])
    # One base64 character changed in transit: the record's CRC no longer matches.
    lines[1] = lines[1].replace("eHh4", "eHh5", 1)
    collected = logship.collect("".join(lines))
    assert collected.files == {} and collected.damaged == 1
    assert collected.incomplete == {"rank-00000.json": f"parts [2] of {len(lines)} are not in the log"}


class FakeCluster:
    """The two Kubernetes APIs submit.run uses, answering as the MPI Operator would: outcome None is a job still
    running (or, not acknowledged, one the operator never saw); events are (kind, name, type, reason, message)."""

    def __init__(self, outcome: str | None, log: str, events: tuple = (), acknowledged: bool = True):
        self.outcome, self.log, self.events, self.acknowledged, self.calls = outcome, log, events, acknowledged, []

    def create_namespaced_custom_object(self, group, version, namespace, plural, body):
        self.calls.append(("create", group, version, plural, body["metadata"]["name"]))

    def get_namespaced_custom_object(self, group, version, namespace, plural, name):
        conditions = [{"type": "Created", "status": "True"}] if self.acknowledged else []
        if self.outcome:
            conditions.append({"type": self.outcome, "status": "True"})
        return {"status": {"conditions": conditions}}

    def list_namespaced_event(self, namespace, field_selector):
        return SimpleNamespace(items=[
            SimpleNamespace(type=type_, reason=reason, message=message) for kind, name, type_, reason, message
            in self.events if field_selector == f"involvedObject.kind={kind},involvedObject.name={name}"])

    def list_namespaced_pod(self, namespace, label_selector):
        self.calls.append(("pods", label_selector))
        return SimpleNamespace(items=[SimpleNamespace(metadata=SimpleNamespace(name="job-launcher-x"))])

    def read_namespaced_pod_log(self, name, namespace):
        return self.log

    def delete_namespaced_custom_object(self, group, version, namespace, plural, name, body):
        self.calls.append(("delete", name, body["propagationPolicy"]))


def shipped_log(capsys) -> str:
    logship.emit("rank-00000.json", '{"rank": 0}\n')
    return "Warning: Permanently added 'w-0' (ED25519)\n" + capsys.readouterr().out


EXPECTED = ["rank-00000.json"]


def test_a_finished_mpijob_is_collected_then_deleted(tmp_path, capsys):
    cluster = FakeCluster("Succeeded", shipped_log(capsys))
    manifest = render("tcp")
    assert submit.run(manifest, expected=EXPECTED, run_dir=tmp_path, kubeconfig=None, timeout_s=5, poll_s=0,
                      clients=(cluster, cluster), progress=lambda _: None) == 0
    assert (tmp_path / "raw" / "rank-00000.json").read_text() == '{"rank": 0}\n'
    assert "Permanently added" in (tmp_path / submit.LAUNCHER_LOG).read_text()
    name = manifest["metadata"]["name"]
    assert cluster.calls[0] == ("create", "kubeflow.org", "v2beta1", "mpijobs", name)
    assert ("pods", f"training.kubeflow.org/job-name={name},training.kubeflow.org/job-role=launcher") in cluster.calls
    assert cluster.calls[-1] == ("delete", name, "Foreground")


def test_a_failed_mpijob_keeps_what_ranks_wrote_and_fails(tmp_path, capsys):
    cluster = FakeCluster("Failed", shipped_log(capsys))
    assert submit.run(render("tcp"), expected=EXPECTED, run_dir=tmp_path, kubeconfig=None, timeout_s=5, poll_s=0,
                      clients=(cluster, cluster), progress=lambda _: None) == 1
    assert (tmp_path / "raw" / "rank-00000.json").exists()
    assert cluster.calls[-1][0] == "delete"


def run_briefly(cluster: FakeCluster, tmp_path: Path, **options) -> tuple[int, list[str], float]:
    said: list[str] = []
    start = time.monotonic()
    code = submit.run(render("tcp"), expected=EXPECTED, run_dir=tmp_path, kubeconfig=None, timeout_s=60, poll_s=0.01,
                      clients=(cluster, cluster), progress=said.append, **options)
    return code, said, time.monotonic() - start


@pytest.mark.parametrize(("kind", "reason", "message"), [
    ("MPIJob", "ValidationError", 'Found validation errors: metadata.name: Invalid value: "9x": will not able to '
                                  'create pod and service with invalid DNS label "9x-worker-1"'),
    ("MPIJob", "MPIJobFailed", "worker pod created failed: pods is forbidden: exceeded quota"),
    ("Job", "FailedCreate", "Error creating: pods is forbidden: unable to validate against any security policy"),
])
def test_a_job_the_operator_will_not_run_fails_at_once_with_its_message(tmp_path, kind, reason, message):
    name = render("tcp")["metadata"]["name"]
    involved = name if kind == "MPIJob" else f"{name}-launcher"
    cluster = FakeCluster(None, "", events=(("MPIJob", name, "Normal", "MPIJobCreated", "created"),
                                            (kind, involved, "Warning", reason, message)))
    code, said, elapsed = run_briefly(cluster, tmp_path)
    assert code == 1 and elapsed < 5
    assert any(reason in line and message in line for line in said), said
    assert cluster.calls[-1][0] == "delete"


def test_an_mpijob_the_operator_never_acknowledges_fails_after_the_grace(tmp_path):
    code, said, elapsed = run_briefly(FakeCluster(None, "", acknowledged=False), tmp_path, acknowledge_s=0.2)
    assert code == 1 and elapsed < 5
    assert any("not acknowledged by the MPI Operator" in line for line in said), said


def test_launch_writes_the_validated_mpijob(tmp_path, capsys):
    out = tmp_path / "mpijob.yaml"
    assert cli.main(["launch", "--launcher", "mpijob", "--stack", "k8s", "--network", "rdma", "--run-id", "r1",
                     "--results-dir", "/tmp/benchrunner", "--ranks", "16", "--gpus-per-node", "8",
                     "--image", "registry.example.com/b:1", "--network-attachment", "default/rdma-net",
                     "--rdma-resource", "rdma/hca_b", "--shm-size", "2Gi", "--worker-cpu", "8",
                     "--worker-memory", "32Gi", "--manifest-out", str(out), "--dry-run"]) == 0
    manifest = yaml.safe_load(out.read_text())
    assert manifest == yaml.safe_load(capsys.readouterr().out)
    assert manifest["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 2
    container = manifest["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert container["resources"] == {"requests": {"cpu": "8", "memory": "32Gi"},
                                      "limits": {"nvidia.com/gpu": 8, "rdma/hca_b": 1}}


def test_running_an_mpijob_needs_a_folder_to_collect_into(capsys):
    assert cli.main(["launch", "--launcher", "mpijob", "--stack", "k8s", "--run-id", "r1", "--results-dir", "/o",
                     "--ranks", "2", "--image", "i:1"]) == 2
    assert "--collect-dir" in capsys.readouterr().err


def test_the_image_sshd_accepts_keys_from_the_operators_secret_mount():
    # The operator mounts its key Secret at sshAuthMountPath, a kubelet volume directory that sshd's StrictModes
    # refuses; the image turns the check off in a drop-in that sshd_config's Include reads first.
    containerfile = (Path(__file__).parents[1] / "Containerfile").read_text()
    assert "printf 'StrictModes no\\n' > /etc/ssh/sshd_config.d/" in containerfile


class _Indented(yaml.SafeDumper):
    """Block sequences indented under their key, as yamllint wants them."""

    def increase_indent(self, flow=False, indentless=False):
        return super().increase_indent(flow, False)


if __name__ == "__main__":
    # Regenerates the golden files from the current code; review the diff before committing.
    for mode in MODES:
        (GOLDEN / f"mpijob-{mode}.yaml").write_text(
            f"---\n# Golden MPIJob for network mode {mode}: test_kubernetes.py compares what benchrunner renders with it.\n"
            + yaml.dump(render(mode), Dumper=_Indented, sort_keys=False, width=120))
    print(f"wrote {len(MODES)} golden files to {os.path.relpath(GOLDEN)}")
