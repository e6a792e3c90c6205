"""Running a benchmark as an MPIJob: create it through the Kubernetes API, wait until the MPI Operator reports it
finished, collect every rank's result from the launcher's log, and delete it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from benchrunner import logship, results

GROUP, VERSION, PLURAL = "kubeflow.org", "v2beta1", "mpijobs"
# The labels the MPI Operator (v2) puts on the pods it makes.
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
LAUNCHER_LOG = "launcher.log"


def finished(status: dict[str, Any] | None) -> str | None:
    """'Succeeded' or 'Failed' once the operator says so, else None."""
    for condition in (status or {}).get("conditions", []):
        if condition.get("type") in ("Succeeded", "Failed") and condition.get("status") == "True":
            return condition["type"]
    return None


def write_collected(log: str, run_dir: Path, raw_dir: Path) -> list[Path]:
    """Keep the launcher's log beside the results and write each rank file it carried into raw_dir."""
    results.write_atomic(run_dir / LAUNCHER_LOG, log)
    written = []
    for name, text in sorted(logship.collect(log).items()):
        path = raw_dir / name
        results.write_atomic(path, text)
        written.append(path)
    return written


def run(manifest: dict[str, Any], *, run_dir: Path, kubeconfig: str | None, timeout_s: float,
        poll_s: float = 5.0, keep: bool = False, clients: tuple[Any, Any] | None = None,
        progress: Callable[[str], None] = print) -> int:
    """0 when the job succeeded and every rank's result was collected; 1 otherwise."""
    custom, core = clients or _clients(kubeconfig)
    namespace, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, manifest)
    progress(f"MPIJob {namespace}/{name} created")
    outcome = None
    try:
        deadline = time.monotonic() + timeout_s
        while outcome is None and time.monotonic() < deadline:
            time.sleep(poll_s)
            outcome = finished(custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name).get("status"))
        progress(f"MPIJob {namespace}/{name}: {outcome or f'not finished after {timeout_s:.0f} s'}")
        pods = core.list_namespaced_pod(namespace, label_selector=f"{JOB_NAME_LABEL}={name},{JOB_ROLE_LABEL}=launcher")
        if not pods.items:
            progress("no launcher pod to read results from")
            return 1
        log = core.read_namespaced_pod_log(pods.items[0].metadata.name, namespace)
        written = write_collected(log, run_dir, run_dir / "raw")
        progress(f"collected {len(written)} result files from the launcher's log")
        return 0 if outcome == "Succeeded" and written else 1
    finally:
        if not keep:
            custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name,
                                                   body={"propagationPolicy": "Foreground"})
            progress(f"MPIJob {namespace}/{name} deleted")


def _clients(kubeconfig: str | None) -> tuple[Any, Any]:
    from kubernetes import client, config  # noqa: PLC0415 - only the control host talks to a cluster

    config.load_kube_config(config_file=kubeconfig)
    return client.CustomObjectsApi(), client.CoreV1Api()
