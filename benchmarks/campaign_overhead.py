#!/usr/bin/env python3
"""make bench-campaign: what a campaign spends around each run's job on a provisioned cluster.

Runs a small campaign (2 ranks, mpirun and srun, repeated) through `benchrunner campaign`, then reads, for every
run, its wall time as the campaign recorded it (state.json) and its job's own elapsed time, launch to the last
rank's finish (summary.json). Prints the per-run overhead (wall - job) with its median and spread."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

CAMPAIGN = {
    "name": "overhead",
    "stacks": ["baremetal", "slurm"],
    "gpus": [2],
    "workloads": {"data": ["synthetic"]},
    "fixed": {"image_size": 32, "batch_size": 16, "warmup_steps": 2, "measured_steps": 6},
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="repeats of each point (default 3: 6 runs)")
    parser.add_argument("--keep", help="results folder to keep (default: a temporary one)")
    parser.add_argument("--inventory", help="the inventory (default: ansible.cfg's, the lab)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="campaign-overhead-") as scratch:
        results_dir = Path(args.keep or scratch)
        file = Path(scratch) / "overhead.yml"
        file.write_text(yaml.safe_dump({**CAMPAIGN, "repeats": args.repeats}))
        command = [sys.executable, "-m", "benchrunner", "campaign", str(file), "--results-dir", str(results_dir)]
        done = subprocess.run(command + (["--inventory", args.inventory] if args.inventory else []), check=False)
        state = json.loads((results_dir / "campaigns" / CAMPAIGN["name"] / "state.json").read_text())
        rows = []
        for run_id, run in sorted(state["runs"].items()):
            summary = results_dir / run_id / "summary.json"
            job_s = json.loads(summary.read_text())["elapsed_s"] if summary.is_file() else None
            rows.append((run_id, run["status"], run["elapsed_s"], job_s))
    print(f"{'run':60} {'status':7} {'wall s':>7} {'job s':>7} {'overhead s':>10}")
    overheads = []
    for run_id, status, wall, job in rows:
        overhead = wall - job if wall is not None and job is not None else None
        if overhead is not None and status == "done":
            overheads.append(overhead)
        print(f"{run_id:60} {status:7} {wall or 0:7.1f} {job or 0:7.1f} "
              f"{'-' if overhead is None else f'{overhead:10.1f}'}")
    if not overheads:
        print("no run finished with a job time: nothing to measure", file=sys.stderr)
        return 1
    print(f"overhead per run: median {statistics.median(overheads):.1f} s, min {min(overheads):.1f} s, "
          f"max {max(overheads):.1f} s over {len(overheads)} runs")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
