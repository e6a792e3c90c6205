#!/usr/bin/env python3
"""Peer baselines, measured side by side in one run on two nodes, interleaved trial by trial:

(a) `benchrunner train` against Horovod's own synthetic benchmark method (horovod_synthetic.py): the same model,
    batch, image size, ranks and launcher (benchrunner's own mpirun line), benchrunner with the `horovod_synthetic`
    preset (the peer's optimizer and window). Ratio of rank 0's images/s, benchrunner / peer; goal >= 0.98.
(b) the allreduce sweep's largest-message bus bandwidth against the raw TCP bandwidth between the same two nodes
    (iperf3, one stream); goal >= 0.8. Open MPI's own MPI_Allreduce of the same message (mpi_allreduce.c, the same
    mpirun line) is measured beside them, so that the loss splits into MPI's part and Horovod's and TensorFlow's.
(c) torch.distributed's sweep (pytorch-ddp; Gloo on the nodes' CPUs): its largest all_reduce's bus bandwidth against
    the same iperf3 figure, goal >= 0.8, and its all_gather's and reduce_scatter's at the largest message.
(d) benchrunner's PyTorch path against a plain DDP training loop (pytorch_ddp_plain.py): the same network
    (benchrunner.frameworks._torch.cnn), ranks, batch, image size, steps, precision, optimizer and mpirun
    line. Ratio of rank 0's images/s, benchrunner / plain; goal >= 0.98: what benchrunner's harness costs.
(e) benchrunner's pytorch-fsdp transformer against a plain FSDP2 loop (pytorch_fsdp_plain.py, written as torchtitan
    and nanoGPT write theirs): the same decoder (benchrunner.frameworks._torch.llama), ranks, batch, sequence length,
    steps, precision, AdamW and mpirun line. Ratio of rank 0's tokens/s, benchrunner / plain; goal >= 0.98.

Run by `make bench` on the first node as the MPI account, in the nodes' Python environment.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchrunner import launchers, results, stats, sweep
from benchrunner.frameworks import pytorch_ddp, pytorch_fsdp
from benchrunner.launchers import mpirun
from benchrunner.models import cnn, llama
from benchrunner.workload import PRECISIONS, Workload

GOAL_PEER = 0.98
GOAL_TCP = 0.8
# torch.distributed's collectives reported beside all_reduce, at the sweep's largest message.
TORCH_OTHERS = ("all_gather", "reduce_scatter")
# The precisions both FSDP2 loops train in (pytorch-fsdp refuses float16: no sharded loss scaler).
FSDP_PRECISIONS = ("fp32", "mixed_bfloat16")
# The benchrunner beside this Python: the nodes' environment.
BENCHRUNNER = str(Path(sys.executable).parent / "benchrunner")


@dataclass(frozen=True)
class Trial:
    """One trial's measurements: rank 0's images/s (tokens/s for the FSDP pair), and bandwidths in bytes/s."""

    peer: float
    benchrunner: float
    plain_ddp: float
    benchrunner_torch: float
    plain_fsdp: float
    benchrunner_fsdp: float
    link: float
    mpi_busbw: float
    horovod_busbw: float
    torch_busbw: float
    # TORCH_OTHERS' bus bandwidth at the largest message, or why the backend skipped the collective.
    torch_others: dict[str, float | str]


def run(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({done.returncode}): {(done.stderr or done.stdout)[-2000:]}")
    return done.stdout


def job(args: argparse.Namespace, run_id: str, **settings: Any) -> launchers.Job:
    return launchers.Job(run_id=run_id, output_dir=f"{args.workdir}/{run_id}/raw", ranks=len(args.hosts),
                         hosts=tuple(args.hosts), benchrunner=BENCHRUNNER, **settings)


def launch_line(args: argparse.Namespace, run_id: str, **settings: Any) -> list[str]:
    """benchrunner's own mpirun line for such a job, its environment included, without the rank program: what a
    peer runs under instead."""
    bench = job(args, run_id, **settings)
    hostfile = Path(args.workdir) / "hostfile"
    hostfile.write_text(launchers.hostfile(bench))
    return mpirun.argv(bench, str(hostfile))[:-len(bench.rank_argv())]


def launch(args: argparse.Namespace, run_id: str, options: list[str]) -> Path:
    """`benchrunner launch` of a job on the hosts (started by its mpirun line); the folder its ranks wrote into."""
    run([BENCHRUNNER, "launch", "--run-id", run_id, "--results-dir", args.workdir,
         "--ranks", str(len(args.hosts)), "--hosts", ",".join(args.hosts), *options])
    return Path(args.workdir) / run_id / "raw"


def horovod_workload(args: argparse.Namespace) -> Workload:
    return Workload.from_mapping({"preset": "horovod_synthetic", "model": args.model, "batch_size": args.batch_size,
                                  "image_size": args.image_size})


def torch_workload(args: argparse.Namespace) -> Workload:
    # A rate not scaled by the ranks, so that the plain loop's SGD is given the very rate benchrunner trains at.
    return Workload.from_mapping({
        "framework": pytorch_ddp.NAME, "model": args.torch_model, "batch_size": args.torch_batch_size,
        "image_size": args.torch_image_size, "warmup_steps": args.torch_warmup_steps,
        "measured_steps": args.torch_measured_steps, "precision": args.torch_precision, "lr_scaling": "none"})


def fsdp_workload(args: argparse.Namespace) -> Workload:
    # AdamW at a rate not scaled by the ranks, as the plain loop is given it.
    return Workload.from_mapping({
        "framework": pytorch_fsdp.NAME, "model": args.fsdp_model, "batch_size": args.fsdp_batch_size,
        "sequence_length": args.fsdp_sequence_length, "warmup_steps": args.fsdp_warmup_steps,
        "measured_steps": args.fsdp_measured_steps, "precision": args.fsdp_precision, "optimizer": "adamw",
        "lr_scaling": "none"})


def peer(args: argparse.Namespace, trial: int) -> float:
    """Rank 0's images/s by the peer's method, started by the same mpirun line benchrunner uses."""
    out = run([*launch_line(args, f"peer-{trial}"), sys.executable, str(Path(__file__).with_name("horovod_synthetic.py")),
               "--model", args.model, "--batch-size", str(args.batch_size), "--image-size", str(args.image_size)])
    rates = json.loads(out.strip().splitlines()[-1])["images_per_sec_per_device"]
    return sum(rates) / len(rates)


def rank0_rate(out: str, key: str) -> float:
    """Rank 0's figure (`key`: images_per_sec, tokens_per_sec) among the JSON lines every rank of a plain loop prints
    (mpirun interleaves the ranks'); a rank 0 that printed none stops the run, saying what it printed."""
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    rate = next((line.get(key) for line in lines if line.get("rank") == 0), None)
    if rate is None:
        raise SystemExit(f"the plain loop's rank 0 printed no {key}: {out[-2000:]!r}")
    return rate


def plain_ddp_options(workload: Workload) -> list[str]:
    """pytorch_ddp_plain.py's options that train this pytorch-ddp workload."""
    return ["--model", workload.model, "--batch-size", str(workload.batch_size), "--image-size",
            str(workload.image_size), "--num-classes", str(workload.classes), "--warmup-steps",
            str(workload.warmup_steps), "--measured-steps", str(workload.measured_steps), "--precision",
            workload.precision, "--lr", str(workload.learning_rate), "--momentum", str(workload.momentum)]


def plain_fsdp_options(workload: Workload) -> list[str]:
    """pytorch_fsdp_plain.py's options that train this pytorch-fsdp workload."""
    return ["--model", workload.model, "--batch-size", str(workload.batch_size), "--sequence-length",
            str(workload.sequence_length), "--warmup-steps", str(workload.warmup_steps), "--measured-steps",
            str(workload.measured_steps), "--precision", workload.precision, "--lr", str(workload.learning_rate),
            "--beta1", str(workload.momentum), "--weight-decay", str(workload.weight_decay),
            *(["--compile"] if workload.settings.compile else [])]


def plain(args: argparse.Namespace, run_id: str, script: str, workload: Workload, options: list[str],
          key: str) -> float:
    """Rank 0's figure of a plain loop, under the mpirun line (MASTER_ADDR and MASTER_PORT included) that benchrunner
    starts the workload's ranks with."""
    out = run([*launch_line(args, run_id, workload=workload), sys.executable, str(Path(__file__).with_name(script)),
               # benchrunner's ranks train on the CPU too: the job asks for no GPUs.
               *options, "--device", "cpu"])
    return rank0_rate(out, key)


def plain_ddp(args: argparse.Namespace, trial: int) -> float:
    """Rank 0's images/s of the plain DDP loop."""
    workload = torch_workload(args)
    return plain(args, f"plain-ddp-{trial}", "pytorch_ddp_plain.py", workload, plain_ddp_options(workload),
                 "images_per_sec")


def plain_fsdp(args: argparse.Namespace, trial: int) -> float:
    """Rank 0's tokens/s of the plain FSDP2 loop."""
    workload = fsdp_workload(args)
    return plain(args, f"plain-fsdp-{trial}", "pytorch_fsdp_plain.py", workload, plain_fsdp_options(workload),
                 "tokens_per_sec")


def benchrunner(args: argparse.Namespace, run_id: str, workload: Workload) -> float:
    raw = launch(args, run_id, workload.to_argv())
    return results.load(results.RANK_RESULT, raw / "rank-00000.json")["metrics"]["samples_per_sec"]


def tcp_bandwidth(args: argparse.Namespace) -> dict:
    """iperf3's received rate, one stream from this node to the second, as a raw-bandwidth document."""
    server = args.hosts[1]
    run(["ssh", server, "iperf3", "--server", "--one-off", "--daemon"])
    time.sleep(1)
    report = json.loads(run(["iperf3", "--client", server, "--time", "5", "--json"]))
    return {"kind": results.RAW_BANDWIDTH, "schema_version": results.SCHEMA_VERSION,
            "tool": f"iperf {report['start']['version'].split()[-1]}", "hosts": list(args.hosts[:2]),
            "bytes_per_s": report["end"]["sum_received"]["bits_per_second"] / 8, "streams": 1, "duration_s": 5,
            "measured_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}


def mpi_busbw_bytes_per_s(args: argparse.Namespace, trial: int) -> float:
    """Bus bandwidth of Open MPI's MPI_Allreduce alone, the sweep's largest message, started like the ranks."""
    out = json.loads(run([*launch_line(args, f"mpi-{trial}"), str(Path(__file__).with_name("mpi_allreduce")),
                          str(sweep.MAX_BYTES)]).strip().splitlines()[-1])
    return out["bytes"] / out["seconds_per_op"] * 2 * (out["ranks"] - 1) / out["ranks"]


def sweep_document(args: argparse.Namespace, run_id: str, options: list[str]) -> dict[str, Any]:
    raw = launch(args, run_id, ["--program", "allreduce", "--min-bytes", str(args.min_bytes), *options])
    return json.loads((raw / results.SWEEP_JSON).read_text())


def largest_busbw(outcome: dict[str, Any]) -> float | str:
    """A collective's bus bandwidth at a sweep's largest message, or why the backend skipped it."""
    return outcome["skipped"] if "skipped" in outcome else outcome["points"][-1]["busbw_bytes_per_s"]


def measure(args: argparse.Namespace, trial: int) -> Trial:
    """Every measurement of one trial, each pair's sides one after the other."""
    steps: dict[str, Callable[[], Any]] = {
        "peer": lambda: peer(args, trial),
        "benchrunner": lambda: benchrunner(args, f"benchrunner-{trial}", horovod_workload(args)),
        "plain_ddp": lambda: plain_ddp(args, trial),
        "benchrunner_torch": lambda: benchrunner(args, f"benchrunner-torch-{trial}", torch_workload(args)),
        "plain_fsdp": lambda: plain_fsdp(args, trial),
        "benchrunner_fsdp": lambda: benchrunner(args, f"benchrunner-fsdp-{trial}", fsdp_workload(args)),
        "link": lambda: tcp_bandwidth(args),
        "mpi_busbw": lambda: mpi_busbw_bytes_per_s(args, trial),
        "horovod": lambda: sweep_document(args, f"allreduce-{trial}", []),
        "torch": lambda: sweep_document(args, f"torch-allreduce-{trial}", ["--framework", pytorch_ddp.NAME]),
    }
    # Alternate which side goes first, so that drift in the machines' speed hits both alike.
    order = list(steps) if trial % 2 == 0 else list(reversed(steps))
    got = {name: steps[name]() for name in order}
    for run_id in (f"allreduce-{trial}", f"torch-allreduce-{trial}"):
        # Beside each sweep, so that its page draws the link's raw bandwidth.
        results.save(results.RAW_BANDWIDTH, got["link"], Path(args.workdir) / run_id / "raw" / results.RAW_BANDWIDTH_JSON)
    return Trial(peer=got["peer"], benchrunner=got["benchrunner"], plain_ddp=got["plain_ddp"],
                 benchrunner_torch=got["benchrunner_torch"], plain_fsdp=got["plain_fsdp"],
                 benchrunner_fsdp=got["benchrunner_fsdp"], link=got["link"]["bytes_per_s"],
                 mpi_busbw=got["mpi_busbw"], horovod_busbw=largest_busbw(got["horovod"]),
                 torch_busbw=largest_busbw(got["torch"]),
                 torch_others={name: largest_busbw(got["torch"]["collectives"][name]) for name in TORCH_OTHERS})


def bandwidth(value: float | str) -> str:
    return f"skipped ({value})" if isinstance(value, str) else f"{value / 1e9:6.3f} GB/s"


def trial_lines(number: int, t: Trial) -> list[str]:
    others = "  ".join(f"{name} busbw {bandwidth(value)}" for name, value in t.torch_others.items())
    return [f"trial {number}: peer {t.peer:8.1f} img/s  benchrunner {t.benchrunner:8.1f} img/s  ratio "
            f"{t.benchrunner / t.peer:.3f} | iperf3 {t.link / 1e9:6.3f} GB/s  MPI_Allreduce busbw "
            f"{t.mpi_busbw / 1e9:6.3f} GB/s  benchrunner allreduce busbw {t.horovod_busbw / 1e9:6.3f} GB/s  ratio "
            f"{t.horovod_busbw / t.link:.3f}",
            f"  plain DDP {t.plain_ddp:8.1f} img/s  benchrunner pytorch-ddp {t.benchrunner_torch:8.1f} img/s  ratio "
            f"{t.benchrunner_torch / t.plain_ddp:.3f} | torch all_reduce busbw {t.torch_busbw / 1e9:6.3f} GB/s  ratio "
            f"{t.torch_busbw / t.link:.3f}  {others}",
            f"  plain FSDP2 {t.plain_fsdp:8.1f} tokens/s  benchrunner pytorch-fsdp {t.benchrunner_fsdp:8.1f} tokens/s  "
            f"ratio {t.benchrunner_fsdp / t.plain_fsdp:.3f}"]


def interval(ratios: list[float]) -> str:
    summary = stats.describe(ratios)
    return f"{summary.mean:.3f} (95% CI {summary.ci95_low:.3f} to {summary.ci95_high:.3f}, n={summary.n})"


def other_collective(name: str, values: list[float | str]) -> str:
    """A torch collective's largest-message busbw over the trials, or the backend's reason for skipping it."""
    measured = [value / 1e9 for value in values if not isinstance(value, str)]
    skipped = [value for value in values if isinstance(value, str)]
    if not measured:
        return f"{name} skipped ({skipped[0]})"
    return f"{name} {interval(measured)} GB/s" + (f", skipped in {len(skipped)} ({skipped[0]})" if skipped else "")


def summary(args: argparse.Namespace, trials: list[Trial]) -> list[str]:
    torch, fsdp = torch_workload(args), fsdp_workload(args)
    largest = f"{sweep.MAX_BYTES >> 20} MiB"
    others = "; ".join(other_collective(name, [t.torch_others[name] for t in trials]) for name in TORCH_OTHERS)
    return [
        f"{args.model}, batch {args.batch_size}, {args.image_size}px, {len(args.hosts)} ranks on "
        f"{', '.join(args.hosts)}, {len(trials)} interleaved trials",
        f"(a) benchrunner / Horovod synthetic benchmark method: "
        f"{interval([t.benchrunner / t.peer for t in trials])}; goal >= {GOAL_PEER}",
        f"(b) allreduce busbw (256 MiB) / iperf3 TCP: {interval([t.horovod_busbw / t.link for t in trials])}; "
        f"goal >= {GOAL_TCP}",
        f"    of which Open MPI's own MPI_Allreduce / iperf3 TCP: {interval([t.mpi_busbw / t.link for t in trials])}",
        f"(c) torch.distributed all_reduce busbw ({largest}, Gloo) / iperf3 TCP: "
        f"{interval([t.torch_busbw / t.link for t in trials])}; goal >= {GOAL_TCP}",
        f"    busbw at {largest}: {others}",
        f"(d) benchrunner pytorch-ddp / plain DDP loop ({torch.model}, batch {torch.batch_size}, {torch.image_size}px, "
        f"{torch.precision}, {torch.warmup_steps} warmup + {torch.measured_steps} measured steps): "
        f"{interval([t.benchrunner_torch / t.plain_ddp for t in trials])}; goal >= {GOAL_PEER}",
        f"(e) benchrunner pytorch-fsdp / plain FSDP2 loop ({fsdp.model}, batch {fsdp.batch_size}, sequence "
        f"{fsdp.sequence_length}, {fsdp.precision}, AdamW, {fsdp.warmup_steps} warmup + {fsdp.measured_steps} "
        f"measured steps): {interval([t.benchrunner_fsdp / t.plain_fsdp for t in trials])}; goal >= {GOAL_PEER}",
    ]


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--hosts", required=True, type=lambda v: v.split(","), help="two nodes, this one first")
    parser.add_argument("--workdir", default="/tmp/hpcml-peer-baselines")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--model", default="small_cnn")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--min-bytes", type=int, default=1 << 20, help="the sweeps' smallest message (their largest "
                        "is benchrunner's default, 256 MiB)")
    group = parser.add_argument_group("(d) benchrunner pytorch-ddp vs the plain DDP loop")
    # The plain loop's loss is cross-entropy over class indices: a multi-label model trains otherwise.
    group.add_argument("--torch-model", default="resnet50", choices=sorted(set(cnn.MODELS) - cnn.MULTI_LABEL))
    # About 10 to 20 s a side on two CPU lab nodes.
    group.add_argument("--torch-batch-size", type=int, default=8)
    group.add_argument("--torch-image-size", type=int, default=32)
    group.add_argument("--torch-warmup-steps", type=int, default=2)
    group.add_argument("--torch-measured-steps", type=int, default=10)
    group.add_argument("--torch-precision", choices=PRECISIONS, default="fp32")
    group = parser.add_argument_group("(e) benchrunner pytorch-fsdp vs the plain FSDP2 loop")
    group.add_argument("--fsdp-model", default="llama-tiny", choices=sorted(llama.MODELS))
    # About 10 to 20 s a side on two CPU lab nodes.
    group.add_argument("--fsdp-batch-size", type=int, default=4)
    group.add_argument("--fsdp-sequence-length", type=int, default=128)
    group.add_argument("--fsdp-warmup-steps", type=int, default=2)
    group.add_argument("--fsdp-measured-steps", type=int, default=10)
    group.add_argument("--fsdp-precision", choices=FSDP_PRECISIONS, default="fp32")
    return parser


def main() -> int:
    args = parser().parse_args()
    # Bad (d) and (e) settings fail here, not after the first trial's other measurements.
    torch_workload(args).validate()
    fsdp_workload(args).validate()
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    trials = []
    for trial in range(args.repeats):
        trials.append(measure(args, trial))
        print("\n".join(trial_lines(trial + 1, trials[-1])), flush=True)
    print("\n".join(summary(args, trials)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
