"""A Kubernetes MPIJob (kubeflow.org/v2beta1, MPI Operator v0.8.1), submitted and followed from the control host:
its manifest here, its offline checks in .checks, its submission in .submit."""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from benchrunner import frameworks, kubernetes, results, watchdog
from benchrunner.launchers import JOB_JSON, NULL_IS_DEFAULT, SCHEMA, Job, Launcher, Options
from benchrunner.launchers.mpijob import checks, submit
from benchrunner.launchers.mpijob.names import JOB_NAME_LABEL, JOB_ROLE_LABEL, k8s_name
from benchrunner.provenance import NODE_NAME_ENV
from benchrunner.rank_env import LAUNCHED_AT_ENV

MANIFEST = "mpijob.yaml"
API_VERSION, KIND = "kubeflow.org/v2beta1", "MPIJob"


class MPIJob(Launcher):
    name = "mpijob"
    stacks = ("k8s",)
    default_for = ("k8s",)
    frameworks = frameworks.names()
    rank_variables = "openmpi"
    needs = frozenset({"kubeconfig"})
    uses_hosts = False
    leaves = (MANIFEST,)
    # The ranks' output goes to the launcher pod's log, which the control host reads only once the job ended.
    beats = False
    runs_in_pods = True
    submits = True
    manifest_kind = (API_VERSION, KIND)
    settings_key = "kubernetes"

    @dataclass(frozen=True)
    class Settings:
        """What the MPIJob is given (the job document's kubernetes; the benchrunner role passes on the cluster's):
        its image and namespace, the Kubernetes release it is checked against, its workers' network, runtime class
        and resources, and where results go. rdma_resource is the RDMA shared device plugin's resource as its config
        names it (rdma/<resourceName>); results_claim a ReadWriteMany claim the ranks write to (None: the launcher's
        log)."""

        image: str = "benchrunner:latest"
        namespace: str = "default"
        # A play that provisions no Kubernetes has no release to name: null is the one benchrunner validates against.
        version: str = field(default=kubernetes.DEFAULT_KUBERNETES_VERSION, metadata={NULL_IS_DEFAULT: True, SCHEMA: {
            "description": "the Kubernetes release the MPIJob's pod templates are validated against (null: benchrunner's "
                           "default)"}})
        network_attachment: str | None = None
        runtime_class: str | None = None
        results_claim: str | None = None
        # The pods' /dev/shm is memory-backed: the container runtime's default is 64 MiB, too little for NCCL and
        # TensorFlow's shared-memory transports.
        shm_size: str = "1Gi"
        worker_cpu: str = "1"
        worker_memory: str = "2Gi"
        # None by default: a wrong name leaves workers Pending.
        rdma_resource: str | None = None

    def settings_problems(self, settings: Any, job: Job, complete: bool) -> list[str]:
        # Here, not only when the MPIJob is rendered at launch: preflight resolves the job before the play writes
        # anything, and only what resolve refuses stops it there.
        problems = checks.settings_problems(asdict(settings))
        if complete and job.network == "rdma" and not settings.rdma_resource:
            problems.insert(0, "an RDMA MPIJob needs kubernetes.rdma_resource, the RDMA device plugin's resource "
                               "(e.g. rdma/rdma_shared_device_a: rdma/ and the inventory's "
                               "cluster_kubernetes_rdma_resource_name)")
        return problems

    def job_problems(self, job: Job) -> list[str]:
        try:
            k8s_name(job.run_id, job.nodes)
        except ValueError as exc:
            return [str(exc)]
        return []

    def first_host(self, job: Job) -> str | None:
        """Worker 0's name as the operator's hostfile gives it (<pod>.<job>.<namespace>.svc); the namespace is the
        manifest's, so the name without it resolves through the pod's search path."""
        name = k8s_name(job.run_id, job.nodes)
        return f"{name}-worker-0.{name}"

    def manifest(self, job: Job, settings: Any) -> dict[str, Any]:
        manifest = mpijob_manifest(job, settings)
        checks.validate_mpijob(manifest, settings.version)
        return manifest

    def check_manifest(self, manifest: dict[str, Any], kubernetes_version: str) -> None:
        checks.validate_mpijob(manifest, kubernetes_version)

    def submit(self, job: Job, settings: Any, options: Options, limits: watchdog.Limits, record: str | None) -> int:
        """Render and validate the MPIJob; then print it (a dry run) or run it and collect its results."""
        manifest = self.manifest(job, settings)
        text = yaml.safe_dump(manifest, sort_keys=False)
        if options.manifest_out:
            results.write_atomic(Path(options.manifest_out), text)
        if options.dry_run:
            sys.stdout.write(text)
            return 0
        if not options.collect_dir:
            raise ValueError("running an MPIJob needs --collect-dir, the run's folder on this host")
        if record is not None:
            results.write_atomic(Path(options.collect_dir) / JOB_JSON, record)
        return submit.run(manifest, expected=submit.expected_results(job.program, job.ranks),
                          run_dir=Path(options.collect_dir), kubeconfig=options.kubeconfig, timeout_s=limits.timeout_s,
                          keep=options.keep)


# Multus names a pod's first secondary interface net1; IPoIB traffic leaves through it.
SECONDARY_IFNAME = "net1"
# Where the MPI Operator mounts the SSH keys it makes; sshd in the worker reads them there.
SSH_AUTH_MOUNT = "/root/.ssh"


def mpijob_manifest(job: Job, settings: MPIJob.Settings) -> dict[str, Any]:
    """A kubeflow.org/v2beta1 MPIJob: one launcher pod running mpirun over SSH, one worker pod (sshd) per node,
    each worker with the node's GPUs (slots = GPUs per node), and for RDMA the HCA resource and locked memory."""
    if job.network == "rdma" and not settings.rdma_resource:
        raise ValueError("an RDMA MPIJob needs the RDMA device plugin's resource name (--rdma-resource, e.g. "
                         "rdma/rdma_shared_device_a: the cluster role's cluster_kubernetes_rdma_resource_name)")
    name = k8s_name(job.run_id, job.nodes)
    labels = {"app.kubernetes.io/name": "benchrunner", "app.kubernetes.io/instance": name}
    environment = job.environment()
    if settings.network_attachment and job.network == "ipoib":
        environment["NCCL_SOCKET_IFNAME"] = SECONDARY_IFNAME
    volumes: list[dict[str, Any]] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": settings.shm_size}}]
    mounts: list[dict[str, Any]] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    if settings.results_claim:
        # Ranks write where the launcher and the collector can read: a shared (ReadWriteMany) claim.
        volumes.append({"name": "results", "persistentVolumeClaim": {"claimName": settings.results_claim}})
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
        "name": "launcher", "image": settings.image, "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/sh", "-c", f'export {LAUNCHED_AT_ENV}=$(date +%s.%N); exec "$@"', "launch", *launch],
        "env": env,
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
        "volumeMounts": mounts,
    }
    limits: dict[str, Any] = {}
    if job.gpus_per_node:
        limits["nvidia.com/gpu"] = job.gpus_per_node
    worker_container: dict[str, Any] = {
        "name": "worker", "image": settings.image, "imagePullPolicy": "IfNotPresent",
        # The launcher's mpirun reaches the workers over SSH, with the keys the operator mounts; each pod gets its
        # own host keys (images often ship none).
        # The pod's node (the downward API gives spec.nodeName only as an environment variable) reaches the ranks
        # through sshd's SetEnv: they are started over SSH and see sshd's session environment, not the pod's, and
        # orted passes its own on to them.
        "command": ["/bin/sh", "-c", "ssh-keygen -A >/dev/null && exec /usr/sbin/sshd -De "
                    f'-o "SetEnv={NODE_NAME_ENV}=${NODE_NAME_ENV}"'],
        "env": [*env, {"name": NODE_NAME_ENV, "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
        "volumeMounts": mounts,
        "resources": {"requests": {"cpu": settings.worker_cpu, "memory": settings.worker_memory}, "limits": limits},
    }
    worker_meta: dict[str, Any] = {"labels": dict(labels)}
    if job.network == "rdma":
        limits[settings.rdma_resource] = 1
        # Registering memory with the HCA needs locked pages.
        worker_container["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
    if settings.network_attachment:
        worker_meta["annotations"] = {"k8s.v1.cni.cncf.io/networks": settings.network_attachment}
    # One worker per node (Job.nodes counts them): the scheduler never puts two on one node, which nothing else
    # prevents on CPU runs. The labels are the ones the operator puts on worker settings.
    worker_spec: dict[str, Any] = {"containers": [worker_container], "volumes": volumes, "affinity": {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {JOB_NAME_LABEL: name, JOB_ROLE_LABEL: "worker"}},
            "topologyKey": "kubernetes.io/hostname"}]}}}
    if settings.runtime_class:
        worker_spec["runtimeClassName"] = settings.runtime_class
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name, "namespace": settings.namespace, "labels": dict(labels)},
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
