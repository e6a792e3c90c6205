"""Campaigns: a matrix of points (workload x GPU count x stack x container), each repeated, run one by one and
resumable.

Every run's outcome is written to the campaign's state file as soon as it is known, so a crash, a dead
node or Ctrl-C loses at most the run in flight; running the campaign again does only what is missing.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import json
import random
import secrets
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from benchrunner import containers, frameworks, job_document, launchers, models, results, summary
from benchrunner.workload import KIND_SETTINGS, Workload

STATE_JSON = "state.json"
# The nodes' facts, kept across the campaign's runs (Ansible's jsonfile fact cache).
FACTS_DIR = "facts"
CAMPAIGNS_DIR = "campaigns"


@dataclass(frozen=True)
class Run:
    """One execution of one point."""

    run_id: str
    point: dict[str, Any]
    repeat: int


@dataclass(frozen=True)
class Attempt:
    ok: bool
    reason: str | None = None


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def load(path: Path) -> dict[str, Any]:
    try:
        document = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise results.ResultError(f"{path}: cannot read: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise results.ResultError(f"{path}: not YAML: {exc}") from exc
    if not isinstance(document, dict):
        raise results.ResultError(f"{path}: a campaign is a mapping (name, gpus, workloads, ...)")
    results.validate(results.CAMPAIGN, document, str(path))
    for stack, chosen in document.get("launchers", {}).items():
        for launcher in _listed(chosen):
            if stack not in launchers.stacks_of(launcher):
                raise results.ResultError(f"{path}: launcher {launcher} does not run on stack {stack} (it runs on "
                                          f"{', '.join(launchers.stacks_of(launcher))})")
    for stack in document.get("stacks", ["baremetal"]):
        for framework in document.get("frameworks", [frameworks.DEFAULT]):
            if not _launchers_for(document, stack, framework):
                raise results.ResultError(
                    f"{path}: no launcher of stack {stack} ({', '.join(_launchers_of(document, stack))}) starts "
                    f"{framework} ranks: add one that does to launchers.{stack}")
    _check_containers(document, path)
    # Every run's job must be valid before the first run starts, not when its turn comes.
    for run_ in plan(document):
        try:
            job_document.resolve(full_request(run_, document), f"point {point_label(run_.point)}", complete=False)
        except ValueError as exc:
            raise results.ResultError(f"{path}: {exc}") from exc
    return document


def _containers(campaign: dict[str, Any]) -> list[str]:
    return campaign.get("containers", [containers.NONE])


def _takes(launcher: str, container: str) -> bool:
    """The launcher starts ranks in this container (every launcher starts them in the virtualenv)."""
    return container == containers.NONE or container in launchers.get(launcher).containers


def _check_containers(campaign: dict[str, Any], path: Path) -> None:
    """Every container named is a runtime benchrunner knows, and some launcher of the campaign starts each
    framework's ranks in it: a container axis with no point of its own would compare nothing, silently."""
    supported = containers.choices()
    for runtime in _containers(campaign):
        if runtime not in supported:
            raise results.ResultError(f"{path}: containers: {runtime!r} is not a container runtime benchrunner "
                                      f"knows: {', '.join(supported)}")
        stacks = campaign.get("stacks", ["baremetal"])
        for framework in campaign.get("frameworks", [frameworks.DEFAULT]):
            candidates = [name for stack in stacks for name in _launchers_for(campaign, stack, framework)]
            if not any(_takes(name, runtime) for name in candidates):
                raise results.ResultError(
                    f"{path}: containers: no launcher of the campaign ({', '.join(candidates)}) starts {framework} "
                    f"ranks in {runtime}: add one that does (those that do: "
                    f"{', '.join(n for n in launchers.names() if _takes(n, runtime)) or 'none yet'})")


def container(point: dict[str, Any]) -> str:
    """The container a point's ranks run in: a runtime, or none (the virtualenv) for a point that names none."""
    return point.get("container", containers.NONE)


def framework(point: dict[str, Any]) -> str:
    """The framework a point trains with: the default one for a point that names none (see points())."""
    return point.get("framework", frameworks.DEFAULT)


def _listed(chosen: str | list[str]) -> list[str]:
    return [chosen] if isinstance(chosen, str) else list(chosen)


def _launchers_of(campaign: dict[str, Any], stack: str) -> list[str]:
    """The stack's launchers: the campaign's (one, or a list to compare), else the stack's default."""
    return _listed(campaign.get("launchers", {}).get(stack, launchers.default_for(stack)))


def _launchers_for(campaign: dict[str, Any], stack: str, framework: str) -> list[str]:
    """Those of the stack's launchers that start this framework's ranks (torchrun: PyTorch's only)."""
    return [name for name in _launchers_of(campaign, stack) if framework in launchers.get(name).frameworks]


def points(campaign: dict[str, Any]) -> list[dict[str, Any]]:
    """The campaign's points in run order: allreduce sweeps first, then training, small GPU counts first. Stacks,
    frameworks, each stack's launchers and containers are axes, a container only on the launchers that start ranks
    in it; a point of the default framework, or in no container, does not name it, so the run ids of campaigns from
    before there were two (or containers) stay what they were and such a campaign resumes with its runs."""
    stacks = campaign.get("stacks", ["baremetal"])
    placements = [(stack, framework, launcher, container_) for stack in stacks
                  for framework in campaign.get("frameworks", [frameworks.DEFAULT])
                  for launcher in _launchers_for(campaign, stack, framework)
                  for container_ in _containers(campaign) if _takes(launcher, container_)]
    axes = campaign["workloads"]
    names = sorted(axes)
    out: list[dict[str, Any]] = []
    common = {"network": campaign.get("network", "tcp"), "gpus_per_node": campaign.get("gpus_per_node", 0)}

    def point(program: str, stack: str, framework: str, launcher: str, container_: str, gpus: int,
              **rest: Any) -> dict[str, Any]:
        named = {} if framework == frameworks.DEFAULT else {"framework": framework}
        if container_ != containers.NONE:
            named["container"] = container_
        return {"program": program, "stack": stack, "launcher": launcher, **named, "gpus": gpus, **rest, **common}

    if "allreduce" in campaign:
        for (stack, framework, launcher, container_), gpus in itertools.product(placements, sorted(campaign["gpus"])):
            out.append(point("allreduce", stack, framework, launcher, container_, gpus, workload={},
                             allreduce=campaign["allreduce"]))
    for gpus, values, (stack, framework, launcher, container_) in itertools.product(
            sorted(campaign["gpus"]), itertools.product(*(axes[n] for n in names)), placements):
        # Real data without a data_dir of its own is the dataset the benchmark play makes on the nodes.
        workload = _for_kind({**campaign.get("fixed", {}), **dict(zip(names, values))})
        # Models of a kind the framework does not build (a transformer under TensorFlow) are no point of it; an
        # unknown model is refused by name when its point's job is resolved.
        model = workload.get("model", Workload.model)
        if model in models.names() and framework not in models.frameworks_for(model):
            continue
        train = point("train", stack, framework, launcher, container_, gpus, workload=workload)
        # Crossing a text setting with an image model (or the reverse) gives the same point again: once is enough.
        if train not in out:
            out.append(train)
    return out


def _for_kind(workload: dict[str, Any]) -> dict[str, Any]:
    """A point's workload without the input settings of the other kind of model than its own: a campaign's fixed
    settings and axes apply to every point they can shape (image_size to image models, sequence_length to text)."""
    model = workload.get("model", Workload.model)
    if model not in models.names():
        return workload
    kind = models.get(model).kind
    others = {key for other, keys in KIND_SETTINGS.items() if other != kind for key in keys}
    return {key: value for key, value in workload.items() if key not in others}


def point_label(point: dict[str, Any]) -> str:
    """A readable, unique name: the settings that usually vary, then a digest of everything."""
    w = point["workload"]
    parts = [point["program"]]
    if point["program"] == "train":
        parts += [w.get("model", "small_cnn"), w.get("data", "synthetic"), f"b{w.get('batch_size', 32)}"]
        if "sequence_length" in w:
            parts.append(f"s{w['sequence_length']}")
    parts += [f"g{point['gpus']}", point["stack"]]
    if "framework" in point:
        parts += [point["framework"], point["launcher"]]
    if "container" in point:
        parts.append(point["container"])
    digest = hashlib.sha256(json.dumps(point, sort_keys=True).encode()).hexdigest()[:8]
    return "-".join(str(p) for p in parts) + "-" + digest


def plan(campaign: dict[str, Any]) -> list[Run]:
    repeats = campaign.get("repeats", 3)
    return [Run(run_id=f"{campaign['name']}.{point_label(point)}.r{repeat}", point=point, repeat=repeat)
            for point in points(campaign) for repeat in range(1, repeats + 1)]


def schedule(campaign: dict[str, Any], seed: int) -> list[Run]:
    """The order runs are done in: repeat rounds one after another, every point once in each, shuffled.

    Drift on a shared cluster (other jobs, thermals, a noisy neighbour) then falls on every stack and point alike
    instead of on whichever ran last.
    """
    shuffle = random.Random(seed).shuffle
    runs = plan(campaign)
    out: list[Run] = []
    for repeat in sorted({r.repeat for r in runs}):
        round_ = [r for r in runs if r.repeat == repeat]
        shuffle(round_)
        out += round_
    return out


class State:
    """The campaign's state file: every run's status, reason and attempts."""

    def __init__(self, path: Path, campaign: dict[str, Any], campaign_file: Path):
        self.path = path
        if path.exists():
            self.document = results.load(results.CAMPAIGN_STATE, path)
        else:
            self.document = {"kind": results.CAMPAIGN_STATE, "schema_version": results.SCHEMA_VERSION,
                             "campaign": campaign["name"], "campaign_file": str(campaign_file),
                             "updated_at": _now(), "runs": {}}
        if "order" not in self.document:
            seed = campaign.get("seed", secrets.randbelow(2**31))
            self.document["order"] = {"seed": seed, "run_ids": [r.run_id for r in schedule(campaign, seed)]}

    @property
    def order(self) -> list[str]:
        return self.document["order"]["run_ids"]

    @property
    def runs(self) -> dict[str, dict[str, Any]]:
        return self.document["runs"]

    def status(self, run_id: str) -> str | None:
        entry = self.runs.get(run_id)
        return entry["status"] if entry else None

    def record(self, run: Run, attempt: Attempt, elapsed_s: float) -> None:
        previous = self.runs.get(run.run_id, {})
        self.runs[run.run_id] = {
            "point": run.point, "repeat": run.repeat, "status": "done" if attempt.ok else "failed",
            "reason": attempt.reason, "attempts": previous.get("attempts", 0) + 1, "elapsed_s": elapsed_s,
            "updated_at": _now(),
        }
        self.document["updated_at"] = _now()
        results.save(results.CAMPAIGN_STATE, self.document, self.path)


Executor = Callable[[Run], Attempt]
Progress = Callable[[str], None]


def directory(results_dir: Path, name: str) -> Path:
    return results_dir / CAMPAIGNS_DIR / name


def run(campaign: dict[str, Any], campaign_file: Path, results_dir: Path, execute: Executor,
        progress: Progress = print) -> State:
    """Run every run not yet done; failures are recorded with their reason and the campaign goes on."""
    state = State(directory(results_dir, campaign["name"]) / STATE_JSON, campaign, campaign_file)
    # The recorded order; runs a changed campaign file added since go last.
    position = {run_id: number for number, run_id in enumerate(state.order)}
    planned = plan(campaign)
    todo = sorted((r for r in planned if state.status(r.run_id) != "done"),
                  key=lambda r: position.get(r.run_id, len(position)))
    total = len(planned)
    progress(f"campaign {campaign['name']}: {total - len(todo)} of {total} runs already done, {len(todo)} to run"
             f" (order randomized, seed {state.document['order']['seed']})")
    for number, run_ in enumerate(todo, start=1):
        progress(f"[{number}/{len(todo)}] {run_.run_id}")
        started = time.monotonic()
        try:
            attempt = execute(run_)
        except KeyboardInterrupt:
            state.record(run_, Attempt(False, "interrupted"), time.monotonic() - started)
            raise
        state.record(run_, attempt, time.monotonic() - started)
        progress(f"    {'done' if attempt.ok else 'FAILED: ' + (attempt.reason or 'no reason given')}"
                 f" ({time.monotonic() - started:.0f} s)")
    return state


def counts(state: State, planned: Iterable[Run]) -> dict[str, int]:
    out = {"done": 0, "failed": 0, "pending": 0}
    for run_ in planned:
        out[state.status(run_.run_id) or "pending"] += 1
    return out


def job_request(run_: Run, campaign: dict[str, Any]) -> dict[str, Any]:
    """What a run asks of its job document; the benchmark play adds the inventory's part (hosts, paths on the nodes,
    environment, launcher and Kubernetes settings) to these keys."""
    point = run_.point
    request = {"run_id": run_.run_id, "program": point["program"], "stack": point["stack"],
               "launcher": point["launcher"], "framework": framework(point),
               "network": point["network"], "ranks": point["gpus"],
               "gpus_per_node": point["gpus_per_node"], "workload": point["workload"],
               "dataset": {**job_document.DEFAULT_DATASET, **campaign.get("dataset", {})}}
    if point["program"] == "allreduce":
        request["allreduce"] = point["allreduce"]
    return request


def full_request(run_: Run, campaign: dict[str, Any]) -> dict[str, Any]:
    """A run's job as a whole document without its hosts, for checking it before the campaign starts (the play
    resolves it, once, with the inventory's part)."""
    return {"kind": job_document.KIND, "schema_version": job_document.VERSION, "hosts": [],
            **job_request(run_, campaign)}


def extravars(run_: Run, campaign: dict[str, Any]) -> dict[str, Any]:
    """The benchmark play's variables for one run: the campaign's own, the run's job, and the container its ranks
    run in (the play makes the job's container from it, with the image it prepared)."""
    return {**campaign.get("extra_vars", {}), "cluster_stack": "k8s" if run_.point["stack"] == "k8s" else "baremetal",
            "benchrunner_job": job_request(run_, campaign), "benchrunner_container": container(run_.point)}


def manifests(campaign: dict[str, Any], settings: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The object of every run of the campaign whose launcher submits one (an MPIJob), checked offline, by run id;
    `settings` are job document keys (such as kubernetes) the runs' requests take."""
    out = {}
    for run_ in plan(campaign):
        if launchers.get(run_.point["launcher"]).manifest_kind is None:
            continue
        plan_ = job_document.plan({**full_request(run_, campaign), **settings}, run_.run_id)
        out[run_.run_id] = plan_.launcher.manifest(plan_.job, plan_.settings)
    return out


def run_outcome(results_dir: Path, run_id: str) -> Attempt:
    """Judge a run by what reached the control host: a summary that passed its sanity checks, unless the watchdog
    ended its job as stalled (its reason names the rank and host)."""
    run_dir = results_dir / run_id
    stalled = summary.stalled_path(run_dir)
    if stalled:
        return Attempt(False, results.load(results.STALLED, stalled)["reason"])
    sweep = summary.sweep_path(run_dir)
    if sweep:
        results.load(results.ALLREDUCE_RESULT, sweep)
        return Attempt(True)
    try:
        document = results.load(results.SUMMARY, run_dir / "summary.json")
    except results.ResultError as exc:
        return Attempt(False, f"no valid summary: {exc}")
    failed = [c["detail"] for c in document["sanity"]["checks"] if not c["passed"]]
    return Attempt(not failed, "sanity checks failed: " + "; ".join(failed) if failed else None)


def playbook_executor(project: Path, results_dir: Path, campaign: dict[str, Any], *, inventory: str | None = None,
                      limit: str | None = None) -> Executor:
    """Each run is the benchmark play alone (playbooks/benchmark.yml), driven through ansible-runner: the cluster was
    provisioned and checked before the campaign, so a run pays for its job's checks, not the whole site.yml."""
    from benchrunner import playbooks  # noqa: PLC0415 - needs the control extra

    # The nodes' facts are gathered once for the campaign and kept beside its state: a node's setup facts (its name,
    # OS) do not change between runs, and those a run judges the node by (its GPUs, RDMA ports) the play gathers
    # afresh every run, which also tells a node lost since the last run.
    fact_cache = directory(results_dir, campaign["name"]) / FACTS_DIR

    def execute(run_: Run) -> Attempt:
        # What an earlier, failed attempt left must not pass for this attempt's result.
        shutil.rmtree(results_dir / run_.run_id, ignore_errors=True)
        # Every run's plot is drawn at the campaign's end, in one process, rather than matplotlib imported per run.
        variables = {**extravars(run_, campaign), "cluster_results_dir": str(results_dir.resolve()),
                     "benchrunner_run_plots": False}
        # A node that does not answer drops out of the play when its facts are gathered or its GPUs counted, and the
        # play resolves the run's job once among those left (benchrunner picks its hosts): a node that dies, whenever
        # it dies, fails only the runs that need it.
        outcome = playbooks.run(project, playbook=playbooks.BENCHMARK_PLAYBOOK, inventory=inventory,
                                extravars=variables, limit=f"localhost,{limit}" if limit else None,
                                progress=playbooks.Progress(out=None), fact_cache=fact_cache)
        attempt = run_outcome(results_dir, run_.run_id)
        # A node lost after the run's own ranks finished fails the play, not the measurement; a stalled job fails
        # the play too, and its record says more than the play's failure.
        if attempt.ok or outcome.ok or summary.stalled_path(results_dir / run_.run_id):
            return attempt
        return Attempt(False, "; ".join(outcome.failures) or f"playbook {outcome.status} (rc {outcome.rc})")

    return execute
