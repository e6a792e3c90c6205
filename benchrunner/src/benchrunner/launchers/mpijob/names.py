"""What the MPI Operator names and labels after an MPIJob, and the MPIJob's name for a run id."""

from __future__ import annotations

import hashlib
import re

# The labels the MPI Operator (v2) puts on the pods it makes (pkg/apis/kubeflow/v2beta1/constants.go).
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"

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
