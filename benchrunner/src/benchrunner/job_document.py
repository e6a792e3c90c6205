"""The job document (`job` v1): the one thing the playbooks, a campaign or `benchrunner launch` hand to benchrunner.

A request says what is asked. `resolve` checks it and derives, once and only here, what follows from it: the rank
count, the hosts that run the ranks, where results and benchrunner are on the nodes or in the pods, and the data
directory. The resolved document is a valid `job` document too; it is kept with the run's results as the record of
what was asked, and `plan` turns it into the launcher's settings.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from benchrunner import containers, launchers, results, sweep, watchdog
from benchrunner.job_defaults import DEFAULT_DATASET, DEFAULTS
from benchrunner.workload import Workload

KIND = results.JOB
VERSION = results.SCHEMA_VERSIONS[KIND]
# Inside the pods of a launcher whose ranks run in pods: benchrunner is on the image's PATH, and results leave through
# the job's log.
POD_RESULTS_DIR = "/tmp/benchrunner"
POD_BENCHRUNNER = "benchrunner"
# What resolve adds: a document holding it was resolved, and is launched as it is.
RESOLVED = "resolved"
# A resolved job is about 2 KB; one naming 50,000 hosts by the longest names DNS allows (253 characters) is under
# 14 MB. A longer document is no job, and is refused before it is parsed.
MAX_CHARS = 16 * 1024 * 1024


@dataclass(frozen=True)
class Plan:
    """A resolved job as the launchers take it."""

    job: launchers.Job
    # The launcher's own Settings, from the document's key it names.
    settings: Any
    timeout_s: float
    document: dict[str, Any]
    stall_timeout_s: float
    startup_timeout_s: float

    @property
    def limits(self) -> watchdog.Limits:
        return watchdog.Limits(timeout_s=self.timeout_s, stall_timeout_s=self.stall_timeout_s,
                               startup_timeout_s=self.startup_timeout_s)

    @property
    def launcher(self) -> launchers.Launcher:
        return launchers.get(self.job.launcher)


def stall_timeout(document: dict[str, Any]) -> Any:
    """The job's stall timeout: its own, else the default or half its timeout_s, whichever is shorter (a job
    resolved before there was one gets it too)."""
    if "stall_timeout_s" in document:
        return document["stall_timeout_s"]
    timeout = document.get("timeout_s", DEFAULTS["timeout_s"])
    return min(DEFAULTS["stall_timeout_s"], timeout / 2) if isinstance(timeout, (int, float)) else None


def startup_timeout(document: dict[str, Any]) -> Any:
    """How long the job's start-up and first step may go without progress: its own, else its stall timeout."""
    return document["startup_timeout_s"] if "startup_timeout_s" in document else stall_timeout(document)


def _with_defaults(request: dict[str, Any]) -> dict[str, Any]:
    """The request with every key it leaves out its default; of the launchers' settings, only its own launcher's."""
    launcher = launchers.registry().get(request["launcher"])
    others = set(launchers.settings_keys()) - {launcher.settings_key if launcher else None}
    defaults = {k: v for k, v in DEFAULTS.items() if k not in others}
    document = {**{k: v for k, v in defaults.items() if k != "stall_timeout_s"}, **request}
    document["stall_timeout_s"] = stall_timeout(document)
    document["startup_timeout_s"] = startup_timeout(document)
    for key, value in defaults.items():
        if isinstance(value, dict) and value:
            document[key] = {**value, **request.get(key, {})}
    own = launcher.settings_key if launcher else None
    if own in document:
        document[own] = launchers.null_as_default(own, document[own])
    return document


def foreign_settings_problems(request: dict[str, Any]) -> list[str]:
    """Each launcher settings key of the request that its launcher does not read: refused, since nothing would read
    it (a Slurm partition given to a job no Slurm starts)."""
    launcher = launchers.registry().get(request["launcher"])
    if launcher is None:
        # Named by the job's validation.
        return []
    own = f"reads {launcher.settings_key}" if launcher.settings_key else "takes no settings"
    return [f"{key} holds the settings of {', '.join(readers)}, not of launcher {launcher.name} (which {own}): leave "
            f"{key} out, or choose one of {', '.join(readers)}"
            for key, readers in launchers.settings_keys().items() if key in request and key != launcher.settings_key]


def resolve(request: Any, source: str = "job document", complete: bool = True) -> dict[str, Any]:
    """The resolved job for a request, checked in full; ValueError names every problem found. complete=False checks a
    job whose hosts and inventory settings are added later (a campaign's run before its play): all but those."""
    if not isinstance(request, dict):
        raise ValueError(f"{source}: a job document is a JSON object, got {type(request).__name__}")
    results.validate(KIND, request, source)
    document = _with_defaults(request)
    workload_record = dict(document["workload"])
    if "framework" in workload_record:
        raise ValueError(f"{source}: workload: framework is the job's own key (framework: "
                         f"{workload_record['framework']!r} beside workload), not a workload setting")
    try:
        # Unknown keys, another framework's settings and values of the wrong type (no "32" for 32, no 1 for true)
        # are refused by name.
        asked = Workload.from_mapping({**workload_record, "framework": document["framework"]})
    except ValueError as exc:
        raise ValueError(f"{source}: workload: {exc}") from exc
    # The play makes the dataset when real data names no folder of its own; a resolved job keeps saying so.
    dataset = None
    if document["program"] == "train" and asked.data != "synthetic":
        if asked.data_dir is None:
            dataset = {**DEFAULT_DATASET, **document.get("dataset", {})}
            workload_record["data_dir"] = dataset["dir"]
        elif document.get("dataset", {}).get("dir") == asked.data_dir:
            dataset = {**DEFAULT_DATASET, **document["dataset"]}
    document.pop("dataset", None)
    slots = max(document["gpus_per_node"], 1)
    ranks = document["ranks"] or len(document["hosts"]) * slots
    if ranks < 1 and complete:
        raise ValueError(f"{source}: ranks is 0 (every host) but no hosts are given")
    problems = foreign_settings_problems(request)
    if dataset:
        parts = dataset["tfrecord_shards"] if asked.data == "tfrecord" else dataset["images"]
        if ranks > parts:
            what = "TFRecord shards" if asked.data == "tfrecord" else "images"
            problems.append(f"{ranks} ranks cannot share the dataset's {parts} {what}: each rank reads its own part "
                            f"(raise dataset {'tfrecord_shards' if asked.data == 'tfrecord' else 'images'})")
        document["dataset"] = dataset
    document.update(ranks=ranks, hosts=document["hosts"][:math.ceil(ranks / slots)], workload=workload_record)
    planned = _plan(document)
    try:
        planned.job.validate(placed=complete)
    except ValueError as exc:
        problems.append(str(exc))
    problems += _settings_problems(document, complete)
    # A launcher that is none of the registry's is named by validate above.
    if document["launcher"] in launchers.registry():
        problems += planned.launcher.settings_problems(planned.settings, planned.job, complete)
    if problems:
        raise ValueError(f"{source}: " + "; ".join(problems))
    document[RESOLVED] = True
    results.validate(KIND, document, source)
    return document


def _settings_problems(document: dict[str, Any], complete: bool) -> list[str]:
    problems = []
    bounds = sweep.allreduce_bounds_problem(document["allreduce"]["min_bytes"], document["allreduce"]["max_bytes"])
    if bounds and document["program"] == "allreduce":
        problems.append(bounds)
    timeout = document["timeout_s"]
    if not (isinstance(timeout, (int, float)) and math.isfinite(timeout)):
        problems.append(f"timeout_s must be a finite number of seconds, got {timeout!r}")
        return problems
    for key in ("stall_timeout_s", "startup_timeout_s"):
        limit = document[key]
        if not (isinstance(limit, (int, float)) and math.isfinite(limit)
                and watchdog.MIN_STALL_TIMEOUT_S <= limit < timeout):
            problems.append(f"{key} must be a number of seconds from {watchdog.MIN_STALL_TIMEOUT_S:g} "
                            f"({watchdog.MIN_BEATS} of the ranks' beats) to below timeout_s ({timeout:g}), got "
                            f"{limit!r}")
    return problems


def _container(document: dict[str, Any], run_root: str, workload: Workload) -> containers.Container | None:
    """The job's container (None: the nodes' virtualenv), showing its ranks the results folder and the dataset they
    read."""
    asked = document.get("container", containers.NONE)
    if asked == containers.NONE:
        return None
    return containers.Container(runtime=asked["runtime"], image=asked["image"], digest=asked.get("digest", ""),
                                mounts=containers.mounts(run_root, launchers.data_dir(document["program"], workload)))


def _plan(document: dict[str, Any]) -> Plan:
    # Ranks that run in pods find benchrunner on the image's PATH; others, on the nodes.
    launcher = launchers.registry().get(document["launcher"])
    pods = launcher is not None and launcher.runs_in_pods
    run_root = POD_RESULTS_DIR if pods else document["nodes"]["results_dir"].rstrip("/")
    workload = Workload.from_mapping({**document["workload"], "framework": document["framework"]})
    job = launchers.Job(
        run_id=document["run_id"], output_dir=f"{run_root}/{document['run_id']}/raw", ranks=document["ranks"],
        hosts=tuple(document["hosts"]), gpus_per_node=document["gpus_per_node"], workload=workload,
        program=document["program"], stack=document["stack"],
        launcher=document["launcher"], network=document["network"],
        benchrunner=POD_BENCHRUNNER if pods else document["nodes"]["benchrunner"],
        env=tuple(sorted(document["env"].items())), extra_args=tuple(document["launcher_args"]),
        git_commit=document["git_commit"], allreduce_min_bytes=document["allreduce"]["min_bytes"],
        allreduce_max_bytes=document["allreduce"]["max_bytes"], container=_container(document, run_root, workload))
    return Plan(job=job, settings=launcher.settings(document) if launcher else None, timeout_s=document["timeout_s"],
                document=document, stall_timeout_s=stall_timeout(document), startup_timeout_s=startup_timeout(document))


def plan(request: dict[str, Any], source: str = "job document", complete: bool = True) -> Plan:
    """The launcher's settings for a request, resolved here (where nothing resolved it before)."""
    return _plan(resolve(request, source, complete))


def launch_plan(document: Any, source: str = "job document") -> Plan:
    """The launcher's settings for a resolved job, as it was resolved: the node launches exactly the job the control
    host resolved and kept with the results. It must still hold together: resolve refuses what it would (launcher and
    stack, launcher and framework, ranks and hosts, the workload), and resolving it again must change nothing, since
    a key that no longer says what the others derive (hosts beyond the ranks' nodes, a key left out) would otherwise
    be dropped or filled in silently."""
    if not isinstance(document, dict) or document.get(RESOLVED) is not True:
        raise ValueError(f"{source}: not a resolved job (no '{RESOLVED}: true'): resolve the request first with "
                         "`benchrunner job resolve`, and launch what it prints")
    again = resolve(document, source)
    # A job resolved before a key existed is launched with the value resolve gives it now, as it would have been.
    problems = _disagreements(document, {k: v for k, v in again.items() if k in document or k not in ADDED_KEYS})
    if problems:
        raise ValueError(f"{source}: the resolved job no longer holds together: {'; '.join(problems)} (resolve the "
                         "request again, or change the keys together)")
    return _plan(document)


# Keys of a resolved job that jobs resolved by an earlier benchrunner lack.
ADDED_KEYS = ("stall_timeout_s", "startup_timeout_s")
# A key one side of a comparison lacks (None is a value a job may hold).
_ABSENT = object()


def _disagreements(document: dict[str, Any], again: dict[str, Any]) -> list[str]:
    """Where a resolved document and the same document resolved again differ: each key it states twice, named."""
    hosts, ranks, slots = document["hosts"], document["ranks"], max(document["gpus_per_node"], 1)
    problems = []
    if hosts != again["hosts"]:
        nodes = math.ceil(ranks / slots)
        problems.append(f"{len(hosts)} hosts for {ranks} ranks at {slots} per node, which run on {nodes}: "
                        f"{', '.join(hosts[nodes:])} would run nothing (a resolved job names only the hosts its ranks "
                        "run on)")
    problems += _differences({k: v for k, v in document.items() if k != "hosts"},
                             {k: v for k, v in again.items() if k != "hosts"})
    return problems


def _differences(given: Any, derived: Any, path: str = "") -> list[str]:
    if isinstance(given, dict) and isinstance(derived, dict):
        return [problem for key in sorted(set(given) | set(derived))
                for problem in _differences(given.get(key, _ABSENT), derived.get(key, _ABSENT), f"{path}{key}.")]
    if given == derived:
        return []
    # As the document writes them: JSON.
    said = "left out" if given is _ABSENT else json.dumps(given, sort_keys=True)
    made = "absent" if derived is _ABSENT else json.dumps(derived, sort_keys=True)
    return [f"{path.rstrip('.')} is {said}, but resolving the job again makes it {made}"]


def placement(request: Any, inventory_hosts: dict[str, str], source: str = "job document") -> dict[str, Any]:
    """A request resolved for the benchmark play: the job, placed on the candidates (inventory name -> the name the
    host gives itself, in order) when it names no hosts of its own; the inventory names of the hosts that run it;
    the files its launcher leaves beside raw/, which the play gathers and the report links; and the mount points of its
    container's binds, each with the kind of file the image must hold there (none without a container)."""
    if isinstance(request, dict) and "hosts" not in request:
        request = {**request, "hosts": list(inventory_hosts.values())}
    document = resolve(request, source)
    by_hostname = {hostname: name for name, hostname in inventory_hosts.items()}
    missing = [h for h in document["hosts"] if h not in by_hostname]
    if missing and launchers.get(document["launcher"]).uses_hosts:
        raise ValueError(f"{source}: hosts {', '.join(missing)} are none of the inventory's candidates "
                         f"({', '.join(f'{n}={h}' for n, h in inventory_hosts.items()) or 'none'})")
    container = _plan(document).job.container
    return {"job": document, "hosts": [by_hostname[h] for h in document["hosts"] if h in by_hostname],
            "leaves": list(launchers.on_stack(document["launcher"], document["stack"]).leaves),
            "mounts": [{"path": mount, "kind": containers.mount_point_kind(mount)}
                       for mount in (container.mounts if container else ())]}


def loads(text: str, source: str) -> Any:
    """A job document from its text: strict JSON no longer or deeper than a real job (what it holds is for resolve to
    judge). Read it with read_bounded, so a longer one is not read whole."""
    if len(text) > MAX_CHARS:
        raise ValueError(f"{source}: longer than the {MAX_CHARS} characters a job document may have (a resolved job "
                         "is about 2 KB)")
    try:
        return results.strict_loads(text)
    except results.OutOfBounds as exc:
        raise ValueError(f"{source}: {exc}") from exc
    except ValueError as exc:
        raise ValueError(f"{source}: not JSON: {exc}") from exc


def read_bounded(stream: TextIO, source: str) -> str:
    """What loads takes of a file or standard input: one character more than it may have, to see that it has more."""
    try:
        return stream.read(MAX_CHARS + 1)
    except UnicodeDecodeError as exc:
        raise ValueError(f"{source}: not JSON: {exc}") from exc


def load(path: Path) -> Any:
    """A job document from a file."""
    try:
        with open(path) as stream:
            text = read_bounded(stream, str(path))
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc.strerror}") from exc
    return loads(text, str(path))
