#!/usr/bin/env python3
"""Peer baselines, measured side by side in one run on two nodes, interleaved trial by trial:

(a) `benchrunner train` against Horovod's own synthetic benchmark method (horovod_synthetic.py): the same model,
    batch, image size, ranks and launcher (benchrunner's own mpirun line), benchrunner with the `horovod_synthetic`
    preset (the peer's optimizer and window). Ratio of rank 0's images/s, benchrunner / peer; goal >= 0.98.
(b) the allreduce sweep's largest-message bus bandwidth against the raw TCP bandwidth between the same two nodes
    (iperf3, one stream); goal >= 0.8. Open MPI's own MPI_Allreduce of the same message (mpi_allreduce.c, the same
    mpirun line) is measured beside them, so that the loss splits into MPI's part and Horovod's and TensorFlow's.

Run by `make bench` on the first node as the MPI account, in the nodes' Python environment.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import time
from pathlib import Path

from benchrunner import launchers, results, stats, sweep
from benchrunner.launchers import mpirun
from benchrunner.workload import Workload

GOAL_PEER = 0.98
GOAL_TCP = 0.8


def run(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({done.returncode}): {(done.stderr or done.stdout)[-2000:]}")
    return done.stdout


def job(args: argparse.Namespace, run_id: str, **settings) -> launchers.Job:
    return launchers.Job(run_id=run_id, output_dir=f"{args.workdir}/{run_id}/raw", ranks=len(args.hosts),
                         hosts=tuple(args.hosts), benchrunner=str(Path(sys.executable).parent / "benchrunner"),
                         **settings)


def peer(args: argparse.Namespace, trial: int) -> float:
    """Rank 0's images/s by the peer's method, started by the same mpirun line benchrunner uses."""
    bench = job(args, f"peer-{trial}")
    hostfile = Path(args.workdir) / "hostfile"
    hostfile.write_text(launchers.hostfile(bench))
    launch = mpirun.argv(bench, str(hostfile))[:-len(bench.rank_argv())]
    out = run([*launch, sys.executable, str(Path(__file__).with_name("horovod_synthetic.py")), "--model", args.model,
               "--batch-size", str(args.batch_size), "--image-size", str(args.image_size)])
    rates = json.loads(out.strip().splitlines()[-1])["images_per_sec_per_device"]
    return sum(rates) / len(rates)


def benchrunner(args: argparse.Namespace, trial: int) -> float:
    run_id = f"benchrunner-{trial}"
    workload = Workload.from_mapping({"preset": "horovod_synthetic", "model": args.model,
                                      "batch_size": args.batch_size, "image_size": args.image_size})
    launch = job(args, run_id, workload=workload)
    run([launch.benchrunner, "launch", "--run-id", run_id, "--results-dir", args.workdir, "--ranks",
         str(launch.ranks), "--hosts", ",".join(launch.hosts), *workload.to_argv()])
    rank0 = json.loads((Path(args.workdir) / run_id / "raw" / "rank-00000.json").read_text())
    return rank0["metrics"]["images_per_sec"]


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
    bench = job(args, f"mpi-{trial}")
    hostfile = Path(args.workdir) / "hostfile"
    hostfile.write_text(launchers.hostfile(bench))
    launch = mpirun.argv(bench, str(hostfile))[:-len(bench.rank_argv())]
    out = json.loads(run([*launch, str(Path(__file__).with_name("mpi_allreduce")), str(sweep.MAX_BYTES)])
                     .strip().splitlines()[-1])
    return out["bytes"] / out["seconds_per_op"] * 2 * (out["ranks"] - 1) / out["ranks"]


def busbw_bytes_per_s(args: argparse.Namespace, trial: int) -> float:
    run_id = f"allreduce-{trial}"
    launch = job(args, run_id, program="allreduce")
    run([launch.benchrunner, "launch", "--program", "allreduce", "--run-id", run_id, "--results-dir", args.workdir,
         "--ranks", str(launch.ranks), "--hosts", ",".join(launch.hosts), "--min-bytes", str(args.min_bytes)])
    sweep = json.loads((Path(args.workdir) / run_id / "raw" / "allreduce.json").read_text())
    return sweep["points"][-1]["busbw_bytes_per_s"]


def interval(ratios: list[float]) -> str:
    summary = stats.describe(ratios)
    return f"{summary.mean:.3f} (95% CI {summary.ci95_low:.3f} to {summary.ci95_high:.3f}, n={summary.n})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--hosts", required=True, type=lambda v: v.split(","), help="two nodes, this one first")
    parser.add_argument("--workdir", default="/tmp/hpcml-peer-baselines")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--model", default="small_cnn")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--min-bytes", type=int, default=1 << 20, help="the sweep's smallest message (its largest "
                        "is benchrunner's default, 256 MiB)")
    args = parser.parse_args()
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    peer_ratios, tcp_ratios, mpi_ratios = [], [], []
    for trial in range(args.repeats):
        # Alternate which side goes first, so that drift in the machines' speed hits both alike.
        if trial % 2 == 0:
            theirs, ours = peer(args, trial), benchrunner(args, trial)
            link, mpi, bus = tcp_bandwidth(args), mpi_busbw_bytes_per_s(args, trial), busbw_bytes_per_s(args, trial)
        else:
            ours, theirs = benchrunner(args, trial), peer(args, trial)
            bus, mpi, link = busbw_bytes_per_s(args, trial), mpi_busbw_bytes_per_s(args, trial), tcp_bandwidth(args)
        # Beside the sweep, so that its page draws the link's raw bandwidth.
        results.save(results.RAW_BANDWIDTH, link, Path(args.workdir) / f"allreduce-{trial}" / "raw" /
                     results.RAW_BANDWIDTH_JSON)
        raw = link["bytes_per_s"]
        peer_ratios.append(ours / theirs)
        tcp_ratios.append(bus / raw)
        mpi_ratios.append(mpi / raw)
        print(f"trial {trial + 1}: peer {theirs:8.1f} img/s  benchrunner {ours:8.1f} img/s  ratio {ours / theirs:.3f}"
              f" | iperf3 {raw / 1e9:6.3f} GB/s  MPI_Allreduce busbw {mpi / 1e9:6.3f} GB/s  benchrunner allreduce "
              f"busbw {bus / 1e9:6.3f} GB/s  ratio {bus / raw:.3f}", flush=True)
    print(f"{args.model}, batch {args.batch_size}, {args.image_size}px, {len(args.hosts)} ranks on "
          f"{', '.join(args.hosts)}, {args.repeats} interleaved trials")
    print(f"(a) benchrunner / Horovod synthetic benchmark method: {interval(peer_ratios)}; goal >= {GOAL_PEER}")
    print(f"(b) allreduce busbw (256 MiB) / iperf3 TCP: {interval(tcp_ratios)}; goal >= {GOAL_TCP}")
    print(f"    of which Open MPI's own MPI_Allreduce / iperf3 TCP: {interval(mpi_ratios)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
