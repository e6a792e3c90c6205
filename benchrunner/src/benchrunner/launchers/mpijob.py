"""A Kubernetes MPIJob (kubeflow.org/v2beta1, MPI Operator v0.8.1), submitted and followed from the control host."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from benchrunner import frameworks, results
from benchrunner.job_defaults import DEFAULTS
from benchrunner.launchers import Job
from benchrunner.provenance import NODE_NAME_ENV
from benchrunner.rank_env import LAUNCHED_AT_ENV

NAME = "mpijob"
STACKS = ("k8s",)
DEFAULT_FOR = ("k8s",)
FRAMEWORKS = frameworks.names()
RANK_VARIABLES = "openmpi"
NEEDS = frozenset({"kubeconfig"})
USES_HOSTS = False
MANIFEST = "mpijob.yaml"
LEAVES = (MANIFEST,)
# The ranks' output goes to the launcher pod's log, which the control host reads only once the job ended.
BEATS = False
WATCHED_IN_JOB = False
# Submitted from the control host (benchrunner.mpijob), not started on a node.
start = None


def first_host(job: Job) -> str | None:
    """Worker 0's name as the operator's hostfile gives it (<pod>.<job>.<namespace>.svc); the namespace is the
    manifest's, so the name without it resolves through the pod's search path."""
    name = k8s_name(job.run_id, job.nodes)
    return f"{name}-worker-0.{name}"


# Kubernetes names (k8s.io/apimachinery/pkg/util/validation): a Service name is a DNS-1035 label (a letter first),
# a pod hostname a DNS-1123 label; both at most 63 characters.
DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_MAX = 63
_NAME_PREFIX = "run-"
_HASH_LEN = 8


def k8s_object_names(name: str, workers: int) -> dict[str, str]:
    """What the MPI Operator (v0.8.1, pkg/controller/mpi_job_controller.go) names after an MPIJob, with the rule each
    name must meet: the headless Service (the job's name), the launcher (Job and pod hostname `<name>-launcher`)
    and the workers (pods and hostnames `<name>-worker-<i>`, checked as DNS-1035 labels by
    pkg/apis/kubeflow/validation/validation.go for the last index). The -ssh Secret and -config ConfigMap are
    shorter than these."""
    return {"Service": name, "launcher": f"{name}-launcher", "last worker": f"{name}-worker-{max(workers, 1) - 1}"}


def k8s_name_problems(name: str, workers: int) -> list[str]:
    problems = []
    for what, value in k8s_object_names(name, workers).items():
        label, rule = (DNS1123_LABEL, "DNS-1123") if what == "launcher" else (DNS1035_LABEL, "DNS-1035")
        if len(value) > LABEL_MAX or not label.match(value):
            problems.append(f"the {what} name {value!r} is not a {rule} label ({LABEL_MAX} characters at most, "
                            f"[a-z0-9-]{', starting with a letter' if rule == 'DNS-1035' else ''})")
    return problems


def k8s_name(run_id: str, workers: int) -> str:
    """The MPIJob name for a run id: every name the operator derives from it (k8s_object_names) valid. A run id
    that is one already is kept; any other is lower-cased, runs of other characters become '-', 'run-' goes before
    a leading digit, and a hash of the run id is appended (cut to fit), so distinct run ids keep distinct names.
    Raises ValueError for a run id with no letter or digit, or a worker count no name leaves room for."""
    if not k8s_name_problems(run_id, workers):
        return run_id
    base = re.sub(r"[^a-z0-9]+", "-", run_id.lower()).strip("-")
    if not base:
        raise ValueError(f"run id {run_id!r} has no letter or digit to name its MPIJob after")
    if not base[0].isalpha():
        base = _NAME_PREFIX + base
    suffix = "-" + hashlib.sha256(run_id.encode()).hexdigest()[:_HASH_LEN]
    room = LABEL_MAX - max(len(v) for v in k8s_object_names("", workers).values()) - len(suffix)
    if room < 1:
        raise ValueError(f"{workers} workers leave no room for an MPIJob name within {LABEL_MAX} characters")
    name = base[:room].rstrip("-") + suffix
    problems = k8s_name_problems(name, workers)
    if problems:
        raise ValueError(f"run id {run_id!r} maps to MPIJob name {name!r}, but " + "; ".join(problems))
    return name


_POD_DEFAULTS = DEFAULTS["kubernetes"]


@dataclass(frozen=True)
class PodSettings:
    """What the MPIJob's pods get from the cluster's settings (the benchrunner role passes them on); unset, the job's
    defaults. rdma_resource is the RDMA shared device plugin's resource as its config names it (rdma/<resourceName>)."""
    shm_size: str = _POD_DEFAULTS["shm_size"]
    worker_cpu: str = _POD_DEFAULTS["worker_cpu"]
    worker_memory: str = _POD_DEFAULTS["worker_memory"]
    rdma_resource: str | None = _POD_DEFAULTS["rdma_resource"]


# The labels the MPI Operator (v2) puts on the pods it makes (pkg/apis/kubeflow/v2beta1/constants.go).
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
# Multus names a pod's first secondary interface net1; IPoIB traffic leaves through it.
SECONDARY_IFNAME = "net1"
# Where the MPI Operator mounts the SSH keys it makes; sshd in the worker reads them there.
SSH_AUTH_MOUNT = "/root/.ssh"


def mpijob_manifest(job: Job, *, image: str, namespace: str = "default", network_attachment: str | None = None,
                    pods: PodSettings = PodSettings(), results_claim: str | None = None,
                    runtime_class: str | None = None) -> dict[str, Any]:
    """A kubeflow.org/v2beta1 MPIJob: one launcher pod running mpirun over SSH, one worker pod (sshd) per node,
    each worker with the node's GPUs (slots = GPUs per node), and for RDMA the HCA resource and locked memory."""
    if job.network == "rdma" and not pods.rdma_resource:
        raise ValueError("an RDMA MPIJob needs the RDMA device plugin's resource name (--rdma-resource, e.g. "
                         "rdma/rdma_shared_device_a: the cluster role's cluster_kubernetes_rdma_resource_name)")
    name = k8s_name(job.run_id, job.nodes)
    labels = {"app.kubernetes.io/name": "benchrunner", "app.kubernetes.io/instance": name}
    environment = job.environment()
    if network_attachment and job.network == "ipoib":
        environment["NCCL_SOCKET_IFNAME"] = SECONDARY_IFNAME
    volumes: list[dict[str, Any]] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": pods.shm_size}}]
    mounts: list[dict[str, Any]] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    if results_claim:
        # Ranks write where the launcher and the collector can read: a shared (ReadWriteMany) claim.
        volumes.append({"name": "results", "persistentVolumeClaim": {"claimName": results_claim}})
        mounts.append({"name": "results", "mountPath": job.output_dir})
    else:
        # No shared volume: every rank's result also travels in the launcher's log (benchrunner.logship).
        environment[results.STDOUT_ENV] = "1"
    env = [{"name": n, "value": v} for n, v in sorted(environment.items())]
    # Containers run as root, which mpirun refuses unless told.
    # Ranks started over SSH get sshd's PATH, not the image's: PATH travels with them.
    # --tag-output marks every piece of forwarded output with its rank, so logship can rejoin cut lines.
    launch = ["mpirun", "--allow-run-as-root", "--tag-output", "-np", str(job.ranks), "--map-by", "slot",
              "--bind-to", "none",
              "-x", LAUNCHED_AT_ENV, "-x", "PATH"]
    for item in env:
        launch += ["-x", item["name"]]
    launch += [*job.extra_args, *job.rank_argv()]
    launcher_container = {
        "name": "launcher", "image": image, "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/sh", "-c", f'export {LAUNCHED_AT_ENV}=$(date +%s.%N); exec "$@"', "launch", *launch],
        "env": env,
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
        "volumeMounts": mounts,
    }
    limits: dict[str, Any] = {}
    if job.gpus_per_node:
        limits["nvidia.com/gpu"] = job.gpus_per_node
    worker_container: dict[str, Any] = {
        "name": "worker", "image": image, "imagePullPolicy": "IfNotPresent",
        # The launcher's mpirun reaches the workers over SSH, with the keys the operator mounts; each pod gets its
        # own host keys (images often ship none).
        # The pod's node (the downward API gives spec.nodeName only as an environment variable) reaches the ranks
        # through sshd's SetEnv: they are started over SSH and see sshd's session environment, not the pod's, and
        # orted passes its own on to them.
        "command": ["/bin/sh", "-c", "ssh-keygen -A >/dev/null && exec /usr/sbin/sshd -De "
                    f'-o "SetEnv={NODE_NAME_ENV}=${NODE_NAME_ENV}"'],
        "env": [*env, {"name": NODE_NAME_ENV, "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
        "volumeMounts": mounts,
        "resources": {"requests": {"cpu": pods.worker_cpu, "memory": pods.worker_memory}, "limits": limits},
    }
    worker_meta: dict[str, Any] = {"labels": dict(labels)}
    if job.network == "rdma":
        limits[pods.rdma_resource] = 1
        # Registering memory with the HCA needs locked pages.
        worker_container["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
    if network_attachment:
        worker_meta["annotations"] = {"k8s.v1.cni.cncf.io/networks": network_attachment}
    # One worker per node (Job.nodes counts them): the scheduler never puts two on one node, which nothing else
    # prevents on CPU runs. The labels are the ones the operator puts on worker pods.
    worker_spec: dict[str, Any] = {"containers": [worker_container], "volumes": volumes, "affinity": {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {JOB_NAME_LABEL: name, JOB_ROLE_LABEL: "worker"}},
            "topologyKey": "kubernetes.io/hostname"}]}}}
    if runtime_class:
        worker_spec["runtimeClassName"] = runtime_class
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "slotsPerWorker": job.slots_per_node,
            "mpiImplementation": "OpenMPI",
            "sshAuthMountPath": SSH_AUTH_MOUNT,
            "launcherCreationPolicy": "WaitForWorkersReady",
            "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 0},
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "restartPolicy": "Never", "template": {
                    "metadata": {"labels": dict(labels)},
                    "spec": {"containers": [launcher_container], "volumes": volumes}}},
                "Worker": {"replicas": job.nodes, "restartPolicy": "Never", "template": {
                    "metadata": worker_meta, "spec": worker_spec}},
            },
        },
    }
