"""Running a benchmark as an MPIJob: create it through the Kubernetes API, wait until the MPI Operator reports it
finished, collect every rank's result from the launcher's log, and delete it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from benchrunner import logship, results
from benchrunner.launchers.mpijob.names import JOB_NAME_LABEL, JOB_ROLE_LABEL

GROUP, VERSION, PLURAL = "kubeflow.org", "v2beta1", "mpijobs"
LAUNCHER_LOG = "launcher.log"
# Warnings after which the MPI Operator (v0.8.1, pkg/controller/mpi_job_controller.go) will not start the job by
# itself: the MPIJob failed its validation (not retried), a Service, pod, Secret or ConfigMap of that name belongs to
# something else, or the API server refused a worker or the launcher.
FATAL_EVENT_REASONS = ("ValidationError", "ErrResourceExists", "MPIJobFailed")
# The launcher's Job (named <job>-launcher by the operator) reports pods the API server refused as FailedCreate.
LAUNCHER_SUFFIX = "-launcher"
LAUNCHER_EVENT_REASONS = ("FailedCreate",)
# The operator sets the Created condition on its first sync; none by then: it is not running or not watching.
ACKNOWLEDGE_S = 60.0


def finished(status: dict[str, Any] | None) -> str | None:
    """'Succeeded' or 'Failed' once the operator says so, else None."""
    for condition in (status or {}).get("conditions", []):
        if condition.get("type") in ("Succeeded", "Failed") and condition.get("status") == "True":
            return condition["type"]
    return None


def acknowledged(status: dict[str, Any] | None) -> bool:
    return any(c.get("type") == "Created" and c.get("status") == "True" for c in (status or {}).get("conditions", []))


def refusal(core: Any, namespace: str, name: str) -> str | None:
    """The message of a warning after which the job cannot start (the operator's about the MPIJob, or the Job
    controller's about the launcher pod), else None."""
    for kind, involved, reasons in (("MPIJob", name, FATAL_EVENT_REASONS),
                                    ("Job", name + LAUNCHER_SUFFIX, LAUNCHER_EVENT_REASONS)):
        events = core.list_namespaced_event(namespace,
                                            field_selector=f"involvedObject.kind={kind},involvedObject.name={involved}")
        for event in events.items:
            if event.type == "Warning" and event.reason in reasons:
                return f"{kind} {involved}: {event.reason}: {event.message}"
    return None


def wait(custom: Any, core: Any, namespace: str, name: str, *, timeout_s: float, poll_s: float,
         acknowledge_s: float) -> str:
    """'Succeeded' or 'Failed' as the operator reports it, or why there is no outcome to wait for: the operator's
    refusal as soon as it reports one, its silence after acknowledge_s, or the timeout."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        time.sleep(poll_s)
        status = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name).get("status")
        outcome = finished(status)
        if outcome:
            return outcome
        refused = refusal(core, namespace, name)
        if refused:
            return f"refused by the MPI Operator: {refused}"
        if not acknowledged(status) and time.monotonic() - start >= acknowledge_s:
            return (f"not acknowledged by the MPI Operator after {acknowledge_s:.0f} s (no Created condition): "
                    "is its controller running (kubectl -n mpi-operator get pods)?")
    return f"not finished after {timeout_s:.0f} s"


def expected_results(program: str, ranks: int) -> list[str]:
    """The result files a run's ranks write: one per rank for training, rank 0's sweep for allreduce."""
    if program == "allreduce":
        return [results.SWEEP_JSON]
    return [f"rank-{rank:05d}.json" for rank in range(ranks)]


def write_collected(log: str, run_dir: Path, raw_dir: Path, expected: list[str]) -> tuple[list[Path], list[str]]:
    """Keep the launcher's log beside the results and write each verified file it carried into raw_dir;
    returns what was written and, one line each, what is missing and why."""
    results.write_atomic(run_dir / LAUNCHER_LOG, log)
    collected = logship.collect(log)
    written = []
    for name, text in sorted(collected.files.items()):
        path = raw_dir / name
        results.write_atomic(path, text)
        written.append(path)
    missing = [f"{name}: {collected.incomplete.get(name, 'not in the log')}"
               for name in expected if name not in collected.files]
    if missing and collected.damaged:
        missing.append(f"({collected.damaged} records in the log were cut or mixed beyond repair)")
    return written, missing


def run(manifest: dict[str, Any], *, expected: list[str], run_dir: Path, kubeconfig: str | None, timeout_s: float,
        poll_s: float = 5.0, acknowledge_s: float = ACKNOWLEDGE_S, keep: bool = False,
        clients: tuple[Any, Any] | None = None, progress: Callable[[str], None] = print) -> int:
    """0 when the job succeeded and every expected result file was collected intact; 1 otherwise."""
    custom, core = clients or _clients(kubeconfig)
    namespace, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, manifest)
    progress(f"MPIJob {namespace}/{name} created")
    try:
        outcome = wait(custom, core, namespace, name, timeout_s=timeout_s, poll_s=poll_s, acknowledge_s=acknowledge_s)
        progress(f"MPIJob {namespace}/{name}: {outcome}")
        pods = core.list_namespaced_pod(namespace, label_selector=f"{JOB_NAME_LABEL}={name},{JOB_ROLE_LABEL}=launcher")
        if not pods.items:
            progress("no launcher pod to read results from")
            return 1
        log = core.read_namespaced_pod_log(pods.items[0].metadata.name, namespace)
        written, missing = write_collected(log, run_dir, run_dir / "raw", expected)
        progress(f"collected {len(written)} result files from the launcher's log")
        for line in missing:
            progress(f"missing {line}")
        return 0 if outcome == "Succeeded" and not missing else 1
    finally:
        if not keep:
            custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name,
                                                   body={"propagationPolicy": "Foreground"})
            progress(f"MPIJob {namespace}/{name} deleted")


def _clients(kubeconfig: str | None) -> tuple[Any, Any]:
    from kubernetes import client, config  # noqa: PLC0415 - only the control host talks to a cluster

    config.load_kube_config(config_file=kubeconfig)
    return client.CustomObjectsApi(), client.CoreV1Api()
