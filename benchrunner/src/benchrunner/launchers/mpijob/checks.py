"""The MPIJob's offline checks: its manifest against the v2beta1 API and, in its pod templates, the Kubernetes API of
a pinned release (benchrunner.kubernetes); its settings against the rules the API server and Multus apply."""

from __future__ import annotations

from typing import Any

from benchrunner import kubernetes
from benchrunner.launchers.mpijob.names import DNS1123_LABEL, LABEL_MAX, k8s_name_problems

MPIJOB_SCHEMA = "mpijob.kubeflow.org-v2beta1.json"


def validate_mpijob(manifest: dict[str, Any], kubernetes_version: str = kubernetes.DEFAULT_KUBERNETES_VERSION) -> None:
    """Raise ValueError naming the first place the MPIJob departs from the v2beta1 API or, in its pod
    templates, from the Kubernetes API."""
    kubernetes.check(MPIJOB_SCHEMA, manifest, "MPIJob (kubeflow.org/v2beta1)")
    workers = manifest["spec"]["mpiReplicaSpecs"]["Worker"].get("replicas", 1)
    problems = k8s_name_problems(manifest["metadata"]["name"], workers)
    if problems:
        raise ValueError(f"MPIJob {manifest['metadata']['name']}: " + "; ".join(problems))
    for role, replica in manifest["spec"]["mpiReplicaSpecs"].items():
        # A replica's template is a core PodTemplateSpec: checked as one, strictly.
        kubernetes.builtin({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "check"},
                            "template": replica["template"]}, kubernetes_version, f"MPIJob {role} pod template")
        kubernetes.check_resources(replica["template"]["spec"], f"MPIJob {role} pod template")


def _label(value: str) -> bool:
    return len(value) <= LABEL_MAX and bool(DNS1123_LABEL.fullmatch(value))


def network_attachment_problem(value: str) -> str | None:
    """Why Multus would not attach the pod to these networks (its k8s.v1.cni.cncf.io/networks annotation: entries
    [namespace/]name[@interface], comma-separated, each part a DNS-1123 label), or None."""
    for entry in value.split(","):
        namespace, slash, rest = entry.strip().rpartition("/")
        name, at, interface = rest.partition("@")
        parts = [name, *([namespace] if slash else []), *([interface] if at else [])]
        if not all(_label(part) for part in parts):
            return (f"kubernetes.network_attachment {value!r}: entry {entry.strip()!r} is not [namespace/]name"
                    f"[@interface] with each part a DNS-1123 label (at most {LABEL_MAX} characters of "
                    "[a-z0-9-], starting and ending with a letter or digit); separate networks with commas")
    return None


def settings_problems(settings: dict[str, Any]) -> list[str]:
    """Every value of a job's `kubernetes` settings that its MPIJob carries and the API server (or Multus, for the
    network annotation) would refuse, each naming its key and the rule: the objects' schemas only say "string"."""
    problems = []
    image = settings["image"]
    if not image or not image.isprintable() or any(c.isspace() for c in image):
        problems.append(f"kubernetes.image {image!r} must be an image reference: not empty, no whitespace "
                        "(registry/name:tag)")
    if not _label(settings["namespace"]):
        problems.append(f"kubernetes.namespace {settings['namespace']!r} is not a DNS-1123 label (at most "
                        f"{LABEL_MAX} characters of [a-z0-9-], starting and ending with a letter or digit)")
    for key, what in (("runtime_class", "a RuntimeClass name"), ("results_claim", "a PersistentVolumeClaim name")):
        if settings[key] and not kubernetes.subdomain(settings[key]):
            problems.append(f"kubernetes.{key} {settings[key]!r} is not {what}, {kubernetes.SUBDOMAIN_RULE}")
    for key in ("shm_size", "worker_cpu", "worker_memory"):
        if not kubernetes.QUANTITY.fullmatch(settings[key]):
            problems.append(f"kubernetes.{key} {settings[key]!r} is not a Kubernetes quantity of 0 or more (a number "
                            "with an optional suffix: 500m, 2, 1.5, 512Mi, 8Gi, 1G)")
    rdma = settings["rdma_resource"]
    rdma_problem = rdma and (kubernetes.resource_name_problem(rdma) if "/" in rdma else "has no domain")
    if rdma_problem:
        problems.append(f"kubernetes.rdma_resource {rdma!r} {rdma_problem}: it must be an extended resource name, "
                        "domain/name (such as rdma/rdma_shared_device_a)")
    attachment = settings["network_attachment"]
    return problems + [p for p in (attachment and network_attachment_problem(attachment),
                                   kubernetes.release_problem(settings["version"])) if p]
