"""The `benchrunner` command."""

from __future__ import annotations

import argparse
import atexit
import dataclasses
import math
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any, NoReturn

import yaml

import benchrunner
from benchrunner import (
    __version__,
    campaign,
    catalogue,
    containers,
    dataset,
    frameworks,
    gather,
    job_defaults,
    job_document,
    kubernetes,
    launchers,
    node_report,
    rank_env,
    report,
    results,
    summary,
    sweep,
    tokens,
    watchdog,
)
from benchrunner.playbooks import BENCHMARK_TAG
from benchrunner.workload import MAX_SEQUENCE_LENGTH, Workload, add_arguments
from benchrunner.workload import option_names as workload_option_names


def _pairs(pairs: list[str], option: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise ValueError(f"{option} takes NAME=VALUE, got {pair!r}")
        found[name] = value
    return found


def _extravars(pairs: list[str]) -> dict[str, Any]:
    """Ansible's extra vars: a value that is JSON is that JSON (-e 'x=[1, 2]'), as ansible-playbook -e takes it."""
    extravars: dict[str, Any] = {}
    for name, value in _pairs(pairs, "-e").items():
        try:
            extravars[name] = results.strict_loads(value)
        except ValueError:
            extravars[name] = value
    return extravars


def _context(args: argparse.Namespace) -> Any:
    from benchrunner import train  # noqa: PLC0415 - imports nothing heavy until run

    return train.RunContext(run_id=args.run_id, output_dir=Path(args.output_dir), stack=args.stack,
                            launcher=args.launcher, network=args.network,
                            launched_at=train.launched_at_from_env(), git_commit=args.git_commit,
                            container=containers.record(_rank_container(args)))


def _beating(args: argparse.Namespace) -> Any:
    """This rank beats while it runs where a watchdog reads the beats: a launcher whose jobs are watched, started by
    `benchrunner launch` (which sets the launch time, as srun's batch script does)."""
    return watchdog.beating(launchers.get(args.launcher).beats and rank_env.LAUNCHED_AT_ENV in os.environ)


def _check_launcher(args: argparse.Namespace, framework: str) -> None:
    """Once, at the rank's entry, before any framework is imported or joined: a process started by hand, or by
    another launcher, would otherwise be filed under the launcher it records."""
    problem = launchers.launcher_problem(rank_env.variables_source(os.environ), args.launcher, framework)
    if problem:
        raise ValueError(problem)


def _rank_container(args: argparse.Namespace) -> containers.Container | None:
    """The container this rank was told it runs in (--container and what goes with it); None: the nodes'
    virtualenv."""
    if args.container == containers.NONE:
        given = [option for option, value in (("--image", args.image), ("--image-digest", args.image_digest),
                                              ("--container-mount", args.container_mount)) if value]
        if given:
            raise ValueError(f"{', '.join(given)} describe a container: give its runtime with --container")
        return None
    if not args.image or not args.image_digest:
        raise ValueError(f"a rank in a {args.container} container records its image: give --image and --image-digest")
    container = containers.Container(args.container, args.image, args.image_digest, tuple(args.container_mount))
    paths = [("--image", container.image), *(("--container-mount", mount) for mount in container.mounts)]
    problems = [p for p in (containers.digest_problem(container.digest),
                            *(launchers.path_problem(what, path) or containers.separator_problem(what, path)
                              for what, path in paths)) if p]
    if problems:
        raise ValueError("; ".join(problems))
    return container


def _check_container(args: argparse.Namespace) -> None:
    """Once, at the rank's entry: a rank outside the container it records (or inside one it does not) would file its
    run under what it did not use."""
    problem = containers.container_problem(_rank_container(args), os.environ,
                                           Path(containers.MOUNTINFO).read_text())
    if problem:
        raise ValueError(problem)


def cmd_train(args: argparse.Namespace) -> int:
    workload = Workload.from_args(args)
    workload.validate()
    _check_launcher(args, workload.framework)
    _check_container(args)
    with _beating(args):
        document = frameworks.get(workload.framework).train(workload, workload.settings, _context(args))
    print(f"rank {document['rank']}/{document['size']} on {document['host']}: "
          f"{document['metrics']['samples_per_sec']:.1f} {report.per_sec(document['metrics']['unit'])}")
    return 0


def cmd_allreduce(args: argparse.Namespace) -> int:
    _check_launcher(args, args.framework)
    _check_container(args)
    with _beating(args):
        document = frameworks.get(args.framework).allreduce(_context(args), args.min_bytes, args.max_bytes)
    largest = document["points"][-1]
    print(f"allreduce over {document['ranks']} ranks: {largest['bytes']} bytes at "
          f"{largest['algbw_bytes_per_s'] / 1e9:.3f} GB/s algorithm, {largest['busbw_bytes_per_s'] / 1e9:.3f} GB/s bus bandwidth")
    return 0


# The options of each kind of dataset by their names in the namespace, as the command line spells them: the other
# kind's are refused, never ignored.
_IMAGE_DATASET = {"directory": "DIRECTORY", "images": "--images", "image_size": "--image-size", "seed": "--seed",
                  "tfrecord_shards": "--tfrecord-shards"}
_TOKEN_DATASET = {"text": "--text", "tokenizer": "--tokenizer"}


def cmd_dataset(args: argparse.Namespace) -> int:
    others = _IMAGE_DATASET if args.tokens else _TOKEN_DATASET
    given = [option for name, option in others.items() if getattr(args, name) is not None]
    if given:
        raise ValueError(f"--tokens makes a token folder from --text files: leave out the image dataset's "
                         f"{', '.join(given)}" if args.tokens else
                         f"{', '.join(given)} belong to a token folder: name its folder with --tokens DIR")
    return _token_dataset(args) if args.tokens else _image_dataset(args)


def _token_dataset(args: argparse.Namespace) -> int:
    if not args.text:
        raise ValueError("--tokens needs the text files to tokenise: --text FILE [FILE ...]")
    manifest = tokens.write(Path(args.tokens), [Path(text) for text in args.text], args.tokenizer or tokens.BYTES)
    print(f"{Path(args.tokens) / tokens.BIN}: {manifest['tokens']} tokens ({manifest['dtype']}) of {len(args.text)} "
          f"text files by tokenizer {manifest['tokenizer']}, vocabulary {manifest['vocab_size']}")
    return 0


def _image_dataset(args: argparse.Namespace) -> int:
    if args.directory is None:
        raise ValueError("give the image dataset's folder (benchrunner dataset DIRECTORY), or a token folder's "
                         "(benchrunner dataset --tokens DIR --text FILE [FILE ...])")
    spec = dataset.Spec(**{name: getattr(args, name) for name in ("images", "image_size", "seed")
                           if getattr(args, name) is not None})
    shards = args.tfrecord_shards or 0
    if shards < 0:
        raise ValueError(f"--tfrecord-shards must be 0 (none) or more (got {shards})")
    tf = None
    if shards:
        # Asked before any image is written: TensorFlow is on the nodes' environment, not the control host's.
        try:
            import tensorflow as tf  # noqa: PLC0415 - writing TFRecords needs TensorFlow
        except ImportError as exc:
            raise ValueError(f"--tfrecord-shards needs TensorFlow, which this Python cannot import ({exc}); "
                             "run it in the nodes' environment (/opt/hpcml/venv)") from exc
    directory = dataset.generate(Path(args.directory), spec)
    print(f"{directory}: {spec.images} images of {spec.image_size}px with {dataset.LABELS_CSV}")
    if tf is not None:
        from benchrunner.frameworks.tensorflow_horovod import data  # noqa: PLC0415 - TensorFlow's own format

        written = data.write_tfrecords(tf, directory, shards)
        print(f"{directory / dataset.TFRECORD_DIR}: {len(written)} TFRecord shards")
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    if not 1 <= args.sequence_length <= MAX_SEQUENCE_LENGTH:
        raise ValueError(f"--sequence-length must be from 1 to {MAX_SEQUENCE_LENGTH} tokens (got {args.sequence_length})")
    listing = catalogue.document(args.sequence_length)
    sys.stdout.write(results.dumps(listing) if args.json else catalogue.render(listing))
    return 0


def cmd_rank(args: argparse.Namespace) -> int:
    """The rank program named by the environment, for launchers that must not see its options."""
    argv = shlex.split(os.environ.get(rank_env.RANK_ARGV_ENV, ""))
    if not argv or argv[0] not in launchers.PROGRAMS:
        raise ValueError(f"{rank_env.RANK_ARGV_ENV} must hold 'train ...' or 'allreduce ...', got {argv[:1]}")
    ranked = build_parser().parse_args(argv)
    return ranked.func(ranked)


def _request(args: argparse.Namespace) -> dict[str, Any]:
    """The job document `launch`'s options ask for: the same contract the playbooks and campaigns use."""
    return {
        "kind": job_document.KIND, "schema_version": job_document.VERSION, "run_id": args.run_id,
        "program": args.program, "stack": args.stack, "launcher": args.launcher,
        "framework": getattr(args, "framework", frameworks.DEFAULT), "network": args.network,
        "ranks": args.ranks, "gpus_per_node": args.gpus_per_node,
        "hosts": [h for h in args.hosts.split(",") if h] if args.hosts else [],
        # The workload options given, as given: a preset fills in the rest when the job is resolved.
        "workload": {name: getattr(args, name) for name in workload_option_names() if hasattr(args, name)},
        "allreduce": {"min_bytes": args.min_bytes, "max_bytes": args.max_bytes},
        # Environment values are strings, passed exactly as given: "true", "007", "1e3" and "null" stay what they are.
        "env": _pairs(args.env, "--env"), "launcher_args": list(args.launcher_arg), "git_commit": args.git_commit,
        "container": _container_request(args),
        "timeout_s": args.timeout,
        # Unset: benchrunner's default, which depends on timeout_s (job_document.stall_timeout).
        **({} if args.stall_timeout is None else {"stall_timeout_s": args.stall_timeout}),
        **({} if args.startup_timeout is None else {"startup_timeout_s": args.startup_timeout}),
        # On the nodes, the benchrunner beside this Python; an MPIJob's pods have their own.
        "nodes": {"results_dir": args.results_dir, "benchrunner": args.benchrunner or _default_benchrunner()},
        # Of the launchers' settings, only those given: the job refuses any its launcher does not read.
        **_given({"slurm": {"partition": args.partition, "mpi": args.slurm_mpi},
                  # --image is the container's image where the ranks run in one, else the MPIJob pods'.
                  "kubernetes": {"image": args.image if args.container == containers.NONE else None,
                                 "namespace": args.namespace, "version": args.kubernetes_version,
                                 "network_attachment": args.network_attachment, "runtime_class": args.runtime_class,
                                 "results_claim": args.results_claim, "shm_size": args.shm_size,
                                 "worker_cpu": args.worker_cpu, "worker_memory": args.worker_memory,
                                 "rdma_resource": args.rdma_resource}}),
    }


def _given(settings: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each key's options that were given (not None), and only the keys given any."""
    given = {key: {k: v for k, v in options.items() if v is not None} for key, options in settings.items()}
    return {key: options for key, options in given.items() if options}


def _container_request(args: argparse.Namespace) -> Any:
    """The job's container from --container, --image and --image-digest, as the job document says it."""
    if args.container == containers.NONE:
        if args.image_digest:
            raise ValueError("--image-digest is a container image's: give its runtime with --container")
        return containers.NONE
    if not args.image:
        raise ValueError(f"--container {args.container} needs its image: --image PATH, the image file on the nodes")
    return {"runtime": args.container, "image": args.image,
            **({"digest": args.image_digest} if args.image_digest else {})}


def _launch(args: argparse.Namespace, plan: job_document.Plan) -> int:
    launcher, job = plan.launcher, plan.job
    # What this host and the cluster must hold for a job started from here, asked before anything is written or
    # started (a job submitted from the control host reads its dataset where its ranks run).
    problems = [] if args.dry_run else [p for p in (
        dataset.dataset_problem(job.workload, job.ranks) if job.program == "train" and not launcher.submits else None,
        *launcher.host_problems(job, plan.settings)) if p]
    if problems:
        raise ValueError("; ".join(problems))
    if job.container and not args.dry_run:
        # The image the ranks will run, read here before anything starts: one that is missing, or is not the one the
        # job names, fails the launch; the ranks record the digest read.
        job = dataclasses.replace(job, container=containers.verified(job.container))
    options = launchers.Options(dry_run=args.dry_run, collect_dir=args.collect_dir, kubeconfig=args.kubeconfig,
                                manifest_out=args.manifest_out, keep=args.keep)
    return launchers.execute(job, plan.settings, options, plan.limits, record=results.dumps(plan.document))


def cmd_watch(args: argparse.Namespace) -> int:
    """Run a launcher's command watched, where its job's ranks' output reaches (srun's batch script)."""
    problems = [p for p in (
        results.run_id_problem(args.run_id), launchers.path_problem("--run-dir", args.run_dir),
        None if args.ranks >= 1 else f"--ranks must be 1 or more, got {args.ranks}",
        *(None if value is None or value < args.timeout else
          f"{option} must be below --timeout ({args.timeout:g} s), got {value:g}"
          for option, value in (("--stall-timeout", args.stall_timeout), ("--startup-timeout", args.startup_timeout))))
        if p]
    if problems:
        raise ValueError("; ".join(problems))
    argv = args.argv

    def start() -> int:
        os.execvp(argv[0], argv)

    return watchdog.supervise(start, run_id=args.run_id, run_dir=Path(args.run_dir), ranks=args.ranks,
                              limits=watchdog.Limits(timeout_s=args.timeout, stall_timeout_s=args.stall_timeout,
                                                     startup_timeout_s=args.startup_timeout))


def cmd_launch(args: argparse.Namespace) -> int:
    return _launch(args, job_document.plan(_request(args), "launch options"))


def _job_file(name: str) -> tuple[Any, str]:
    if name == "-":
        source = "job document on standard input"
        return job_document.loads(job_document.read_bounded(sys.stdin, source), source), source
    return job_document.load(Path(name)), name


def _inventory_hosts(value: str) -> dict[str, str]:
    try:
        hosts = results.strict_loads(value)
    except ValueError as exc:
        raise ValueError(f"--inventory-hosts: not JSON: {exc}") from exc
    if not isinstance(hosts, dict) or not all(isinstance(v, str) for v in hosts.values()):
        raise ValueError(f"--inventory-hosts: a JSON object of inventory name -> hostname, got {value!r}")
    return hosts


def cmd_job_resolve(args: argparse.Namespace) -> int:
    if (args.keep or args.overwrite) and not args.results_dir:
        raise ValueError("--keep and --overwrite need --results-dir, the folder the job is kept in")
    request, source = _job_file(args.file)
    if args.inventory_hosts is None:
        document = job_document.resolve(request, source)
        out: dict[str, Any] = document
    else:
        out = job_document.placement(request, _inventory_hosts(args.inventory_hosts), source)
        document = out["job"]
    if args.output:
        results.write_atomic(Path(args.output), results.dumps(document))
    if args.results_dir:
        out = {**out, **_keep_job(document, Path(args.results_dir), keep=args.keep, overwrite=args.overwrite)}
    sys.stdout.write(results.dumps(out))
    return 0


def _keep_job(document: dict[str, Any], results_dir: Path, *, keep: bool, overwrite: bool) -> dict[str, bool]:
    """Whether the run's folder under results_dir already holds a run; with keep, the job written there (readable by
    its owner alone: environment values may be private) unless that would replace an earlier run not to overwrite."""
    run_dir = results_dir / document["run_id"]
    earlier = run_dir.exists()
    kept = keep and (overwrite or not earlier)
    if kept:
        results.write_atomic(run_dir / launchers.JOB_JSON, results.dumps(document), mode=0o600)
    return {"earlier_run": earlier, "kept": kept}


def cmd_job_gather(args: argparse.Namespace) -> int:
    try:
        answers = results.strict_loads(sys.stdin.read())
    except ValueError as exc:
        raise ValueError(f"the nodes' answers on standard input: not JSON: {exc}") from exc
    if not isinstance(answers, dict) or not all(isinstance(v, str) for v in answers.values()):
        raise ValueError("the nodes' answers on standard input: a JSON object of host -> what its command printed")
    written = gather.write(_run_dir(args.run_dir), answers, tuple(args.leaves), require_leaves=args.require_leaves)
    print(f"gathered {len(written)} file(s) from {len(answers)} node(s): {', '.join(written) or 'none'}")
    return 0


def cmd_job_launch(args: argparse.Namespace) -> int:
    document, source = _job_file(args.file)
    return _launch(args, job_document.launch_plan(document, source))


def _run_dir(value: str) -> Path:
    path = Path(value)
    return path.resolve() if path.exists() else path


def cmd_summarize(args: argparse.Namespace) -> int:
    run_dir = _run_dir(args.run_dir)
    if summary.stalled_path(run_dir):
        # Before the rank results: those that reached the control host are of a job that did not finish.
        stalled = summary.write_stalled(run_dir)
        sys.stdout.write((run_dir / report.REPORT_MD).read_text())
        print(f"benchrunner: the run's job was ended as {stalled['reason']}", file=sys.stderr)
        return 1
    if summary.sweep_path(run_dir):
        summary.write_sweep(run_dir, plots=args.plots)
        sys.stdout.write((run_dir / report.REPORT_MD).read_text())
        return 0
    document = summary.write(run_dir, plots=args.plots)
    sys.stdout.write(summary.render_markdown(document, run_dir))
    if not document["sanity"]["passed"]:
        print("benchrunner: the run failed its sanity checks; its numbers are not to be trusted", file=sys.stderr)
        return 1
    return 0


def _campaign_dir(results_dir: Path, value: str) -> Path | None:
    for candidate in (Path(value), campaign.directory(results_dir, value)):
        if (candidate / campaign.STATE_JSON).is_file():
            return candidate
    return None


def _runs_of(results_dir: Path, value: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """The completed runs a report is about: a campaign's (by folder or name), or one run's."""
    campaign_dir = _campaign_dir(results_dir, value)
    if campaign_dir:
        state = results.load(results.CAMPAIGN_STATE, campaign_dir / campaign.STATE_JSON)
        done = sorted(run_id for run_id, entry in state["runs"].items() if entry["status"] == "done")
        summaries, sweeps = report.load_runs(results_dir, done)
        return summaries, sweeps, state["campaign"]
    run_dir = _run_dir(value)
    summaries, sweeps = report.load_runs(run_dir.parent, [run_dir.name])
    return summaries, sweeps, run_dir.resolve().name


def cmd_report(args: argparse.Namespace) -> int:
    results_dir = Path(args.results_dir)
    target = args.target or str(results_dir / summary.LATEST)
    campaign_dir = _campaign_dir(results_dir, target)
    if campaign_dir is None:
        run_dir = _run_dir(target)
        sweep = summary.sweep_path(run_dir)
        if summary.stalled_path(run_dir):
            summary.write_stalled(run_dir)
        elif sweep:
            report.write_sweep(run_dir, results.load(results.ALLREDUCE_RESULT, sweep))
        else:
            summary.write_report(run_dir, results.load(results.SUMMARY, run_dir / summary.SUMMARY_JSON))
        sys.stdout.write((run_dir / report.REPORT_MD).read_text())
        return 0
    return _report_campaign(results_dir, campaign_dir, args.pool, strict=args.strict)


def _report_campaign(results_dir: Path, campaign_dir: Path, pooled: list[str], strict: bool = False) -> int:
    """The campaign's report over every done run that can be read; those that cannot are listed first, and fail the
    command only when strict."""
    state = results.load(results.CAMPAIGN_STATE, campaign_dir / campaign.STATE_JSON)
    name = state["campaign"]
    summaries, sweeps, unreadable = report.read_runs(results_dir, sorted(
        run_id for run_id, entry in state["runs"].items() if entry["status"] == "done"))
    # A campaign's runs were summarized without their plots: drawn here, in one process, for every run that lacks one.
    drawn = sum(summary.draw_plots(results_dir / document["run_id"]) for document in summaries + sweeps)
    if drawn:
        print(f"drew the plots of {drawn} run report(s)", file=sys.stderr)
    if not summaries and not sweeps and unreadable:
        raise results.ResultError(f"campaign {name}: no done run could be read: " + "; ".join(unreadable))
    failed = {run_id: e["reason"] for run_id, e in sorted(state["runs"].items()) if e["status"] == "failed"}
    # First, so that no reader takes the report for the whole campaign.
    intro = [f"could not read {problem}" for problem in unreadable]
    intro.append(f"Campaign {name}: {len(summaries) + len(sweeps)} runs done, {len(failed)} failed"
                 + (f", {len(unreadable)} done but unreadable, left out of this report." if unreadable else "."))
    intro += [f"failed: {run_id}: {reason}" for run_id, reason in failed.items()]
    if "order" in state:
        intro.append(f"Order: repeat rounds, every point once in each, shuffled (seed {state['order']['seed']}); "
                     f"run by run in {campaign_dir / campaign.STATE_JSON}.")
    path = report.write(campaign_dir, f"Campaign {name}", summaries, sweeps, lambda d: d["provenance"]["stack"], intro,
                        pooled=pooled, runtimes={campaign.container(e["point"]) for e in state["runs"].values()})
    sys.stdout.write(path.read_text())
    print(f"\nreport: {path} and {path.with_name(report.REPORT_HTML)}", file=sys.stderr)
    if unreadable:
        print(f"benchrunner: {len(unreadable)} done run(s) could not be read and are left out of the report (listed "
              "at its top)", file=sys.stderr)
    return 1 if unreadable and strict else 0


def cmd_compare(args: argparse.Namespace) -> int:
    results_dir = Path(args.results_dir)
    a_summaries, a_sweeps, a_name = _runs_of(results_dir, args.a)
    b_summaries, b_sweeps, b_name = _runs_of(results_dir, args.b)
    if a_name == b_name:
        a_name, b_name = f"A:{a_name}", f"B:{b_name}"
    labels = {id(d): a_name for d in a_summaries + a_sweeps} | {id(d): b_name for d in b_summaries + b_sweeps}
    out = Path(args.output) if args.output else results_dir / "compare" / f"{a_name}--{b_name}".replace(":", "_")
    intro = [f"A = {a_name} ({len(a_summaries)} training runs), B = {b_name} ({len(b_summaries)} training runs); "
             "ratios are B / A for the same workload and GPU count."]
    path = report.write(out, f"{b_name} compared with {a_name}", a_summaries + b_summaries, a_sweeps + b_sweeps,
                        lambda d: labels[id(d)], intro, reference=a_name, pooled=args.pool)
    sys.stdout.write(path.read_text())
    print(f"\nreport: {path} and {path.with_name(report.REPORT_HTML)}", file=sys.stderr)
    return 0


def _write_mpijobs(args: argparse.Namespace, document: dict[str, Any]) -> int:
    """Every Kubernetes run's MPIJob, validated, one file per run id."""
    given = {"image": args.image, "namespace": args.namespace, "network_attachment": args.network_attachment,
             "runtime_class": args.runtime_class, "rdma_resource": args.rdma_resource,
             "version": args.kubernetes_version}
    manifests = campaign.manifests(document, {"kubernetes": {k: v for k, v in given.items() if v is not None}})
    if not manifests:
        raise ValueError(f"campaign {document['name']} has no Kubernetes runs (stacks: {document.get('stacks')})")
    out = Path(args.mpijobs)
    for run_id, manifest in manifests.items():
        results.write_atomic(out / f"{run_id}.yaml", yaml.safe_dump(manifest, sort_keys=False))
    print(f"{len(manifests)} MPIJobs written to {out}, each valid for Kubernetes {args.kubernetes_version}")
    return 0


def cmd_campaign(args: argparse.Namespace) -> int:
    document = campaign.load(Path(args.file))
    results_dir = Path(args.results_dir).resolve()
    if args.plan:
        for run_ in campaign.plan(document):
            print(run_.run_id)
        return 0
    if args.mpijobs:
        return _write_mpijobs(args, document)
    from benchrunner import playbooks  # noqa: PLC0415 - needs the control extra

    project = playbooks.find_project(Path(args.project_dir) if args.project_dir else None)
    execute = campaign.playbook_executor(project, results_dir, document, inventory=args.inventory, limit=args.limit)
    state = campaign.run(document, Path(args.file).resolve(), results_dir, execute,
                         progress=lambda line: print(line, file=sys.stderr, flush=True))
    tally = campaign.counts(state, campaign.plan(document))
    print(f"campaign {document['name']}: {tally['done']} done, {tally['failed']} failed", file=sys.stderr)
    if tally["done"]:
        _report_campaign(results_dir, campaign.directory(results_dir, document["name"]), pooled=[])
    return 0 if not tally["failed"] else 1


def cmd_schema_check(args: argparse.Namespace) -> int:
    failed = 0
    for name in args.files:
        try:
            document = results.strict_loads(Path(name).read_text())
            results.load(results.kind_of(document), Path(name))
            print(f"{name}: ok")
        except (OSError, ValueError) as exc:
            print(f"{name}: {exc}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


def cmd_validate_manifests(args: argparse.Namespace) -> int:
    passed, failed = kubernetes.validate_files([Path(name) for name in args.files], args.kubernetes_version)
    for line in passed:
        print(f"ok   {line}")
    for line in failed:
        print(f"FAIL {line}", file=sys.stderr)
    print(f"{len(passed)} objects valid for Kubernetes {args.kubernetes_version}, {len(failed)} not")
    return 1 if failed or not passed else 0


def _playbook(args: argparse.Namespace, *, tags: str | None, skip_tags: str | None) -> int:
    from benchrunner import playbooks  # noqa: PLC0415 - needs the control extra

    project = playbooks.find_project(Path(args.project_dir) if args.project_dir else None)
    extravars = _extravars(args.extra_vars)
    if args.stack:
        extravars["cluster_stack"] = args.stack
    outcome = playbooks.run(project, inventory=args.inventory, extravars=extravars, tags=tags,
                            skip_tags=skip_tags, limit=args.limit, check=getattr(args, "check", False))
    playbooks.print_recap(outcome)
    return 0 if outcome.ok else (outcome.rc or 1)


def cmd_deploy(args: argparse.Namespace) -> int:
    return _playbook(args, tags=None, skip_tags=BENCHMARK_TAG)


def cmd_bench(args: argparse.Namespace) -> int:
    return _playbook(args, tags=BENCHMARK_TAG, skip_tags=None)


def _add_playbook_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-i", "--inventory", help="inventory path (default: the one in ansible.cfg, the lab)")
    parser.add_argument("-e", "--extra-vars", action="append", default=[], metavar="NAME=VALUE",
                        help="extra variable; VALUE is parsed as JSON when it can be (repeatable)")
    parser.add_argument("--stack", choices=("baremetal", "k8s"), help="the stack to provision (default: baremetal)")
    parser.add_argument("--limit", help="limit the run to these hosts or groups")
    parser.add_argument("--project-dir", help="project root (default: found upwards from here)")


def _add_context(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("run (where results go and what they record)")
    group.add_argument("--run-id", required=True)
    group.add_argument("--output-dir", required=True, help="folder every rank writes its result into")
    group.add_argument("--stack", choices=launchers.STACKS, default="baremetal")
    group.add_argument("--launcher", choices=launchers.names(), default=launchers.default_for("baremetal"))
    group.add_argument("--network", choices=launchers.NETWORKS, default="tcp",
                       help="how ranks talk, recorded with the results; sets NCCL's variables when launching")
    group.add_argument("--git-commit", help="the project's commit, recorded with the results")
    group.add_argument("--container", choices=containers.choices(), default=containers.NONE,
                       help="the container runtime this rank runs in (checked at its start), recorded with the results")
    group.add_argument("--image", help="the container's image file on the nodes")
    group.add_argument("--image-digest", help="the container image's sha256:<hex>")
    group.add_argument("--container-mount", action="append", default=[], metavar="PATH",
                       help="a host path bound into the container at the same path (repeatable)")


def _add_sweep(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("allreduce sweep")
    group.add_argument("--min-bytes", type=int, default=sweep.MIN_BYTES)
    group.add_argument("--max-bytes", type=int, default=sweep.MAX_BYTES)


def _default_benchrunner() -> str:
    """The benchrunner beside this Python: the same environment on every node."""
    return shutil.which("benchrunner", path=str(Path(sys.executable).parent)) or "benchrunner"


def _add_pool(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pool", action="append", default=[], metavar="AXIS",
                        help="put runs that differ in AXIS (a workload setting, network, launcher or a version) "
                        "into one figure anyway; the report names what was pooled. Repeatable.")


def _positive_seconds(value: str) -> float:
    """A timeout: 0 or less would mean wait forever or never, NaN would never compare."""
    seconds = float(value)
    if not (math.isfinite(seconds) and seconds > 0):
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {value!r}")
    return seconds


def _add_execution(parser: argparse.ArgumentParser) -> None:
    """How this host carries a job out: not part of the job, so not in its document."""
    group = parser.add_argument_group("execution")
    group.add_argument("--dry-run", action="store_true", help="print the command, script or manifest; start nothing")
    group.add_argument("--manifest-out", help="also write the validated MPIJob here")
    group.add_argument("--kubeconfig", help="kubeconfig of the cluster to run the MPIJob on (default: ~/.kube/config)")
    group.add_argument("--collect-dir", help="the run's folder on this host; an MPIJob's rank results go to its raw/")
    group.add_argument("--keep", action="store_true", help="leave the MPIJob in the cluster after it finished")


def _command(sub: Any, name: str, **kwargs: Any) -> argparse.ArgumentParser:
    return sub.add_parser(name, allow_abbrev=False, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    # No abbreviations: an unambiguous prefix (--image-s for --image-size) or a typo must not pass for an option.
    parser = argparse.ArgumentParser(
        allow_abbrev=False,
        prog="benchrunner",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=" ".join(benchrunner.__doc__.split("\n\n")[0].split()),
        epilog="On the control host, in the project folder:\n"
               "  benchrunner deploy                      provision the cluster (site.yml without the benchmark)\n"
               "  benchrunner bench                       one benchmark run; results in results/<run-id>/\n"
               "  benchrunner campaign campaigns/lab.yml  a matrix of runs, resumable; ends with its report\n"
               "  benchrunner report [RUN|CAMPAIGN]       Markdown, HTML and plots (default: results/latest)\n"
               "  benchrunner compare A B                 B relative to A (runs or campaigns)\n"
               "On the nodes, launchers run 'train' or 'allreduce' on every rank.")
    parser.add_argument("--version", action="version", version=f"benchrunner {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = _command(sub, "train", help="train on this rank and write its result (what every rank runs)")
    _add_context(p)
    add_arguments(p)
    p.set_defaults(func=cmd_train, rank_program=True)

    p = _command(sub, "allreduce", help="time the framework's allreduce over message sizes (what every rank runs)")
    _add_context(p)
    p.add_argument("--framework", choices=frameworks.names(), default=frameworks.DEFAULT,
                   help="whose collectives: Horovod's, or torch.distributed's (all_reduce, all_gather, reduce_scatter)")
    _add_sweep(p)
    p.set_defaults(func=cmd_allreduce, rank_program=True)

    p = _command(sub, "rank", help=f"run the train or allreduce command held in ${rank_env.RANK_ARGV_ENV} "
                                    "(how horovodrun starts ranks)")
    p.set_defaults(func=cmd_rank, rank_program=True)

    p = _command(sub, "dataset", help="write a small ChestX-ray14-style dataset (PNGs + labels CSV), or a token "
                                      "folder from text files (--tokens)")
    group = p.add_argument_group("image dataset (for --data images or tfrecord)")
    group.add_argument("directory", nargs="?", help="the dataset's folder")
    group.add_argument("--images", type=int, help=f"default: {dataset.Spec.images}")
    group.add_argument("--image-size", type=int, help=f"default: {dataset.Spec.image_size}")
    group.add_argument("--seed", type=int, help=f"default: {dataset.Spec.seed}")
    group.add_argument("--tfrecord-shards", type=int, help="also write this many TFRecord shards (needs TensorFlow)")
    group = p.add_argument_group("token folder (for --data tokens)")
    group.add_argument("--tokens", metavar="DIR", help=f"the folder to write {tokens.BIN} (token ids, as nanoGPT's "
                                                       f"train.bin) and {tokens.MANIFEST} into")
    group.add_argument("--text", nargs="+", metavar="FILE", help="UTF-8 text files, tokenised in this order")
    group.add_argument("--tokenizer", help=f"{tokens.BYTES} (one id per UTF-8 byte, vocabulary "
                                           f"{tokens.BYTES_END_OF_TEXT + 1}) or {tokens.TIKTOKEN}ENCODING where tiktoken "
                                           f"is installed; default: {tokens.BYTES}")
    p.set_defaults(func=cmd_dataset)

    p = _command(sub, "models", help="list every model: its kind, the frameworks that build it, its parameters (built "
                 "on the meta device) beside the published count, and text models' FLOPs per token")
    p.add_argument("--sequence-length", type=int, default=catalogue.DEFAULT_SEQUENCE_LENGTH,
                   help="tokens per sequence the FLOPs per token are counted at")
    p.add_argument("--json", action="store_true", help="print the list as JSON")
    p.set_defaults(func=cmd_models)

    p = _command(sub, "launch", help="start a job on the cluster with one of the launchers (or print it: --dry-run)")
    group = p.add_argument_group("run (where results go and what they record)")
    group.add_argument("--run-id", required=True)
    group.add_argument("--results-dir", default=job_defaults.DEFAULT_NODE_RESULTS_DIR,
                       help="the nodes' results folder; ranks write into <results-dir>/<run-id>/raw")
    group.add_argument("--stack", choices=launchers.STACKS, default="baremetal")
    group.add_argument("--launcher", choices=launchers.names(), default=launchers.default_for("baremetal"))
    group.add_argument("--network", choices=launchers.NETWORKS, default="tcp",
                       help="how ranks talk, recorded with the results; sets NCCL's variables")
    group.add_argument("--git-commit", help="the project's commit, recorded with the results")
    group = p.add_argument_group("job")
    group.add_argument("--program", choices=launchers.PROGRAMS, default="train")
    group.add_argument("--ranks", type=int, required=True, help="total ranks (= GPUs when gpus-per-node > 0)")
    group.add_argument("--hosts", help="comma-separated hosts for mpirun and horovodrun, filled in order")
    group.add_argument("--gpus-per-node", type=int, default=0, help="0 trains on CPUs, one rank per node")
    group.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="environment for every rank")
    group.add_argument("--launcher-arg", action="append", default=[], metavar="ARG",
                       help="passed to the launcher as it is (repeatable), e.g. --launcher-arg=--mca ...")
    group.add_argument("--benchrunner", help="benchrunner on the nodes (default: the one beside this Python; an "
                       "MPIJob's pods run the image's)")
    group.add_argument("--partition", help="Slurm partition")
    # Left out, the settings take the job's defaults (job_defaults), which the help shows.
    group.add_argument("--slurm-mpi", help=f"srun --mpi plugin (pmix, pmi2; default: {job_defaults.DEFAULTS['slurm']['mpi']})")
    k8s = job_defaults.DEFAULTS["kubernetes"]
    group.add_argument("--container", choices=containers.choices(), default=containers.NONE,
                       help="what the ranks run in: the nodes' virtualenv (none), or a container of this runtime "
                       "(the launcher must start ranks in it)")
    group.add_argument("--image", help="the container's image file on the nodes (absolute path); without --container, "
                       f"the MPIJob's container image (default: {k8s['image']})")
    group.add_argument("--image-digest", help="the container image's sha256:<hex>, checked against the file at launch "
                       "(default: computed from it)")
    group.add_argument("--namespace", help=f"MPIJob namespace (default: {k8s['namespace']})")
    group.add_argument("--network-attachment", help="Multus network for MPIJob workers")
    group.add_argument("--results-claim", help="ReadWriteMany PVC the MPIJob's ranks write results to "
                       "(default: none; results travel in the launcher's log)")
    group.add_argument("--shm-size", help=f"size of the MPIJob pods' memory-backed /dev/shm (default: {k8s['shm_size']})")
    group.add_argument("--worker-cpu", help=f"CPU each MPIJob worker requests (default: {k8s['worker_cpu']})")
    group.add_argument("--worker-memory", help=f"memory each MPIJob worker requests (default: {k8s['worker_memory']})")
    group.add_argument("--rdma-resource", help="the RDMA device plugin's resource (e.g. rdma/rdma_shared_device_a), "
                       "needed for --network rdma")
    group.add_argument("--runtime-class", help="RuntimeClass of the MPIJob's workers (nvidia where it is not "
                       "containerd's default runtime)")
    group.add_argument("--kubernetes-version",
                       help=f"the API the MPIJob's pod templates are validated against (default: {k8s['version']})")
    group.add_argument("--timeout", type=_positive_seconds, default=job_defaults.DEFAULTS["timeout_s"],
                       help="seconds the job may run: how long an MPIJob is waited for, and when any other job is "
                       "ended (a Slurm job's time limit: this in minutes, rounded up, plus one)")
    group.add_argument("--stall-timeout", type=_positive_seconds,
                       help="seconds a rank may beat no more, or every rank go without finishing a start-up stage or a "
                       "step, before the "
                       f"job is ended as stalled, naming the rank (default: {job_defaults.DEFAULTS['stall_timeout_s']}"
                       ", or half the timeout where that is shorter; every launcher's jobs but MPIJobs)")
    group.add_argument("--startup-timeout", type=_positive_seconds,
                       help="seconds every rank may go without finishing a start-up stage until each completed its "
                       "first step (a first step that compiles or sets up communicators can take far longer than the "
                       "rest), before the job is ended as stalled (default: the stall timeout)")
    _add_execution(p)
    add_arguments(p)
    _add_sweep(p)
    p.set_defaults(func=cmd_launch)

    p = _command(sub, watchdog.COMMAND, help="run a launcher's command (after --) watched for stalled ranks, where "
                 "their output reaches (what a Slurm job's batch script runs)")
    p.add_argument("--run-id", required=True)
    p.add_argument("--run-dir", required=True, help=f"the run's folder, where {watchdog.STALLED_JSON} goes")
    p.add_argument("--ranks", type=int, required=True, help="how many ranks beat")
    p.add_argument("--timeout", type=_positive_seconds, required=True, help="seconds the job may run")
    p.add_argument("--stall-timeout", type=_positive_seconds, required=True,
                   help="seconds a rank may beat no more, or every rank go without progress")
    p.add_argument("--startup-timeout", type=_positive_seconds,
                   help="seconds every rank may go without progress before each completed its first step (default: "
                   "the stall timeout)")
    p.add_argument("argv", nargs="+", metavar="COMMAND", help="the launcher's command, after --")
    p.set_defaults(func=cmd_watch)

    p = _command(sub, "job", help="check or launch a job document (job v1: what the playbooks and campaigns hand "
                                  "benchrunner)")
    jobs = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    q = _command(jobs, "resolve", help="check a job request and print the resolved job (ranks, hosts, paths)")
    q.add_argument("file", help="the job document (- for standard input)")
    q.add_argument("-o", "--output", help="also write the resolved job here")
    q.add_argument("--inventory-hosts", metavar="JSON",
                   help="the candidates as {inventory name: hostname}, in order (the benchmark play's): they are the "
                   "hosts of a request naming none, and what is printed is {job, hosts (inventory names), leaves "
                   "(the files the launcher leaves beside raw/)}")
    q.add_argument("--results-dir", help="the control host's results folder: the answer also says whether the run's "
                   "folder there holds an earlier run (earlier_run) and whether --keep wrote the job there (kept)")
    q.add_argument("--keep", action="store_true", help=f"write the job as <results-dir>/<run id>/{launchers.JOB_JSON} "
                   "(mode 0600), unless that folder holds an earlier run and --overwrite is not given")
    q.add_argument("--overwrite", action="store_true", help="--keep writes over an earlier run's folder too")
    q.set_defaults(func=cmd_job_resolve)
    q = _command(jobs, "gather", help="write what the job's nodes sent (their rank results, the launcher's files) "
                 "into the run's folder on the control host")
    q.add_argument("run_dir", help="the run's folder; the nodes' answers come on standard input as JSON, "
                   "{host: what its command printed}")
    q.add_argument("--leaves", nargs="*", default=[], metavar="NAME",
                   help="the files the launcher leaves beside raw/ (job resolve's leaves), which the launcher's host "
                   "sends")
    q.add_argument("--require-leaves", action="store_true", help="fail when a leaf did not come (the launch succeeded)")
    q.set_defaults(func=cmd_job_gather)
    q = _command(jobs, "launch", help="launch a resolved job (what `job resolve` printed), as it is")
    q.add_argument("file", help="the resolved job (- for standard input)")
    _add_execution(q)
    q.set_defaults(func=cmd_job_launch)

    p = _command(sub, "campaign", help="run a campaign file: every point x repeat, skipping what is done")
    p.add_argument("file")
    p.add_argument("--results-dir", default="results")
    p.add_argument("--plan", action="store_true", help="list the campaign's run ids and stop")
    p.add_argument("--mpijobs", metavar="DIR", help="write the validated MPIJob of every Kubernetes run to DIR and stop")
    p.add_argument("--image", help=f"the MPIJobs' image (default: {job_defaults.DEFAULTS['kubernetes']['image']})")
    p.add_argument("--namespace", help="the MPIJobs' namespace (default: default)")
    p.add_argument("--network-attachment", help="Multus network of the workers")
    p.add_argument("--runtime-class", help="RuntimeClass of the workers")
    p.add_argument("--rdma-resource", help="the RDMA device plugin's resource, for network rdma")
    p.add_argument("--kubernetes-version", default=kubernetes.DEFAULT_KUBERNETES_VERSION)
    p.add_argument("-i", "--inventory", help="inventory path (default: the one in ansible.cfg, the lab)")
    p.add_argument("--limit", help="limit the runs to these hosts or groups")
    p.add_argument("--project-dir", help="project root (default: found upwards from here)")
    p.set_defaults(func=cmd_campaign)

    p = _command(sub, "summarize", help="check a run's rank files; write summary.json, report.md and report.html")
    p.add_argument("run_dir")
    p.add_argument("--no-plots", dest="plots", action="store_false",
                   help="leave the run's plot out of its report, saying so (a campaign's report, or `report RUN`, "
                   "draws it later; matplotlib is not imported)")
    p.set_defaults(func=cmd_summarize)

    p = _command(sub, "report", help="report on a run or a campaign (default: results/latest)")
    p.add_argument("target", nargs="?", help="a run folder, a campaign folder or a campaign name")
    p.add_argument("--results-dir", default="results")
    p.add_argument("--strict", action="store_true", help="exit 1 when a campaign's done run cannot be read (the "
                   "report on the others is written all the same)")
    _add_pool(p)
    p.set_defaults(func=cmd_report)

    p = _command(sub, "compare", help="compare two runs or campaigns (e.g. bare metal and Kubernetes)")
    p.add_argument("a", help="the reference: run folder, campaign folder or campaign name")
    p.add_argument("b")
    p.add_argument("--results-dir", default="results")
    p.add_argument("-o", "--output", help="report folder (default: results/compare/A--B)")
    _add_pool(p)
    p.set_defaults(func=cmd_compare)

    node_report.add_command(sub)

    p = _command(sub, "schema-check", help="validate result files against their schema")
    p.add_argument("files", nargs="+")
    p.set_defaults(func=cmd_schema_check)

    p = _command(sub, "validate-manifests", help="validate Kubernetes manifests offline: the API of a Kubernetes "
                       "release (strict) and the custom resources' schemas")
    p.add_argument("files", nargs="+")
    p.add_argument("--kubernetes-version", default=kubernetes.DEFAULT_KUBERNETES_VERSION)
    p.set_defaults(func=cmd_validate_manifests)

    p = _command(sub, "deploy", help="provision the cluster: site.yml without the benchmark, via ansible-runner")
    _add_playbook_options(p)
    p.add_argument("--check", action="store_true", help="report what would change, change nothing (--check --diff)")
    p.set_defaults(func=cmd_deploy)

    p = _command(sub, "bench", help="run the benchmark play of site.yml via ansible-runner")
    _add_playbook_options(p)
    p.set_defaults(func=cmd_bench)
    return parser


def _leave(code: int) -> NoReturn:
    """A rank that has written its result (fsynced) and shut its framework's collectives down leaves at once: the
    interpreter's teardown of TensorFlow or PyTorch after that (about a second) only delays the job's end. The exit
    handlers still run (Horovod's and torch.distributed's own shutdown, logging's flush), so MPI and PMIx see a
    finalized rank and exit status 0."""
    atexit._run_exitfuncs()  # what a normal exit runs first, without the teardown after it
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code = args.func(args)
        # Only for a rank started as its own process (argv from its command line), never for a caller of main().
        if code == 0 and argv is None and getattr(args, "rank_program", False):
            _leave(code)
        return code
    except (results.ResultError, ValueError) as exc:
        print(f"benchrunner: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        # One line naming the file (a folder given where a file goes, a file where a folder goes, no permission).
        print(f"benchrunner: {exc.filename or ''}: {exc.strerror or exc}".replace(": : ", ": "), file=sys.stderr)
        return 2
