"""The `benchrunner` command."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from benchrunner import __version__, results, summary

STACKS = ("baremetal", "slurm", "k8s")
LAUNCHERS = ("mpirun", "horovodrun", "srun", "mpijob")
NETWORKS = ("tcp", "rdma", "ipoib", "overlay")
PRECISIONS = ("fp32", "mixed_float16", "mixed_bfloat16")


def _extravars(pairs: list[str]) -> dict[str, Any]:
    extravars: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise SystemExit(f"benchrunner: -e takes NAME=VALUE, got {pair!r}")
        try:
            extravars[name] = json.loads(value)
        except json.JSONDecodeError:
            extravars[name] = value
    return extravars


def cmd_train(args: argparse.Namespace) -> int:
    from benchrunner import train  # noqa: PLC0415 - imports TensorFlow lazily

    config = train.TrainConfig(
        run_id=args.run_id, output_dir=Path(args.output_dir), model=args.model, batch_size=args.batch_size,
        image_size=args.image_size, num_classes=args.num_classes, precision=args.precision,
        warmup_steps=args.warmup_steps, measured_steps=args.steps, learning_rate=args.learning_rate,
        stack=args.stack, launcher=args.launcher, network=args.network,
        launched_at=train.launched_at_from_env(), git_commit=args.git_commit)
    document = train.run(config)
    print(f"rank {document['rank']}/{document['size']} on {document['host']}: "
          f"{document['metrics']['images_per_sec']:.1f} images/s")
    return 0


def _run_dir(value: str) -> Path:
    path = Path(value)
    return path.resolve() if path.exists() else path


def cmd_summarize(args: argparse.Namespace) -> int:
    document = summary.write(_run_dir(args.run_dir))
    sys.stdout.write(summary.render_markdown(document))
    if not document["sanity"]["passed"]:
        print("benchrunner: the run failed its sanity checks; its numbers are not to be trusted", file=sys.stderr)
        return 1
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    run_dir = _run_dir(args.run_dir) if args.run_dir else Path(args.results_dir) / summary.LATEST
    document = results.load(results.SUMMARY, run_dir / summary.SUMMARY_JSON)
    sys.stdout.write(summary.render_markdown(document))
    return 0


def cmd_schema_check(args: argparse.Namespace) -> int:
    failed = 0
    for name in args.files:
        try:
            document = json.loads(Path(name).read_text())
            results.load(results.kind_of(document), Path(name))
            print(f"{name}: ok")
        except (OSError, ValueError) as exc:
            print(f"{name}: {exc}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


def _playbook(args: argparse.Namespace, *, tags: str | None, skip_tags: str | None) -> int:
    from benchrunner import playbooks  # noqa: PLC0415 - needs the control extra

    project = playbooks.find_project(Path(args.project_dir) if args.project_dir else None)
    extravars = _extravars(args.extra_vars)
    if args.stack:
        extravars["stack"] = args.stack
    outcome = playbooks.run(project, inventory=args.inventory, extravars=extravars, tags=tags,
                            skip_tags=skip_tags, limit=args.limit, check=getattr(args, "check", False))
    playbooks.print_recap(outcome)
    return 0 if outcome.ok else (outcome.rc or 1)


def cmd_deploy(args: argparse.Namespace) -> int:
    from benchrunner.playbooks import BENCHMARK_TAG  # noqa: PLC0415
    return _playbook(args, tags=None, skip_tags=BENCHMARK_TAG)


def cmd_bench(args: argparse.Namespace) -> int:
    from benchrunner.playbooks import BENCHMARK_TAG  # noqa: PLC0415
    return _playbook(args, tags=BENCHMARK_TAG, skip_tags=None)


def _add_playbook_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-i", "--inventory", help="inventory path (default: the one in ansible.cfg, the lab)")
    parser.add_argument("-e", "--extra-vars", action="append", default=[], metavar="NAME=VALUE",
                        help="extra variable; VALUE is parsed as JSON when it can be (repeatable)")
    parser.add_argument("--stack", choices=("baremetal", "k8s"), help="the stack to provision (default: baremetal)")
    parser.add_argument("--limit", help="limit the run to these hosts or groups")
    parser.add_argument("--project-dir", help="project root (default: found upwards from here)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="benchrunner",
        description="Horovod TensorFlow training benchmark for GPU clusters. On the control host: "
                    "'deploy' provisions, 'bench' runs the benchmark, 'report' shows the result.")
    parser.add_argument("--version", action="version", version=f"benchrunner {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("train", help="train on this rank and write its result (run by the launcher on every rank)")
    p.add_argument("--run-id", required=True)
    p.add_argument("--output-dir", required=True, help="folder for rank-NNNNN.json")
    p.add_argument("--model", default="small_cnn")
    p.add_argument("--batch-size", type=int, default=32, help="images per rank per step")
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--num-classes", type=int, default=10)
    p.add_argument("--precision", choices=PRECISIONS, default="fp32")
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--steps", type=int, default=20, help="measured steps")
    p.add_argument("--learning-rate", type=float, default=0.01, help="per rank; scaled by the number of ranks")
    p.add_argument("--stack", choices=STACKS, default="baremetal")
    p.add_argument("--launcher", choices=LAUNCHERS, default="mpirun")
    p.add_argument("--network", choices=NETWORKS, default="tcp")
    p.add_argument("--git-commit")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("summarize", help="check a run's rank files and write summary.json and summary.md")
    p.add_argument("run_dir")
    p.set_defaults(func=cmd_summarize)

    p = sub.add_parser("report", help="print a run's summary (default: results/latest)")
    p.add_argument("run_dir", nargs="?")
    p.add_argument("--results-dir", default="results")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("schema-check", help="validate result files against their schema")
    p.add_argument("files", nargs="+")
    p.set_defaults(func=cmd_schema_check)

    p = sub.add_parser("deploy", help="provision the cluster: site.yml without the benchmark, via ansible-runner")
    _add_playbook_options(p)
    p.add_argument("--check", action="store_true", help="report what would change, change nothing (--check --diff)")
    p.set_defaults(func=cmd_deploy)

    p = sub.add_parser("bench", help="run the benchmark play of site.yml via ansible-runner")
    _add_playbook_options(p)
    p.set_defaults(func=cmd_bench)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (results.ResultError, FileNotFoundError, ValueError) as exc:
        print(f"benchrunner: {exc}", file=sys.stderr)
        return 2
