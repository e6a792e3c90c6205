"""A hung rank is named on the lab: a campaign's two-rank run whose second rank is stopped mid-run (SIGSTOP, as a hung
NCCL call leaves a rank) is ended within its stall timeout, recorded as stalled naming the rank and its host, and the
campaign's next run is done; the same for an srun job, watched on its batch host."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import time

import yaml

from benchrunner import campaign, report, results, watchdog
from lab import PROJECT, lab_node_names

# Longer than any step after the first of two TensorFlow ranks on the lab's shared cores (each well under 15 s on a
# machine twice as slow as the one that measured 5.3 s to the first step).
STALL_TIMEOUT_S = 30
# Start-up and the first step (TensorFlow tracing it, Horovod's first allreduce) have their own limit: on CI's cores,
# loaded by the unit suite beside the e2e, two runs' ranks sat at model_ready with no step for over 30 s, beating, and
# were ended as a hung collective (2026-11-28).
STARTUP_TIMEOUT_S = 600
# Two-rank runs: a long one (ended by the stall long before its steps are done) and a short one after it.
CAMPAIGN = {
    "name": "stall",
    "repeats": 1,
    "gpus": [2],
    "workloads": {"measured_steps": [100000, 6]},
    "fixed": {"image_size": 32, "batch_size": 16, "warmup_steps": 2},
    "extra_vars": {"benchrunner_stall_timeout_s": STALL_TIMEOUT_S, "benchrunner_startup_timeout_s": STARTUP_TIMEOUT_S,
                   "benchrunner_timeout_s": 900},
}
# A rank that has sent this much is some steps into its run: each step it sends its share of the small CNN's gradient
# allreduce to the other rank's host, and before its first step only Horovod's handshake. On the lab (2026-11-28) the
# second rank had sent 207 KB when its steps began, 28 MB two seconds later, and 83 MB when stopped after 19 steps.
STEPPING_BYTES = 8 << 20
# The rank processes (orted, which started them, does not match; mpirun runs on the first node).
RANK_PATTERN = "bin/benchrunner train"
# An srun job's ranks alone: the batch script's watchdog and srun carry the rank command in theirs, on the batch host.
SRUN_RANK_PATTERN = r"^\S*python\S* \S*bin/benchrunner train"


def ranks_on(node: str, pattern: str = RANK_PATTERN) -> list[str]:
    found = subprocess.run(["podman", "exec", node, "pgrep", "-f", pattern], capture_output=True, text=True,
                           check=False)
    return found.stdout.split()


def sent_by_ranks_on(node: str, pattern: str) -> int:
    """The bytes the node's ranks sent over TCP so far (ss's bytes_sent of each socket a rank holds); 0 before any
    started. Not /proc/<pid>/io: UCX sends with sendmsg(2), which its wchar does not count. One podman exec a poll
    (about 0.2 CPU-seconds each on the lab's 2 cores, which the ranks watched need): the ranks, a line '--', the
    sockets. The pattern travels in the environment, so the shell's own command line does not match it."""
    shown = subprocess.run(["podman", "exec", "--env", f"RANKS={pattern}", node, "sh", "-c",
                            'pgrep -f "$RANKS"; echo --; ss -tinpH'], capture_output=True, text=True, check=True).stdout
    listed, _, sockets = shown.partition("--\n")
    pids = listed.split()
    if not pids:
        return 0
    total, owned = 0, False
    # A socket's line names the processes holding it; its details follow on an indented line.
    for line in sockets.splitlines():
        if not line[:1].isspace():
            owned = any(f"pid={pid}," in line for pid in pids)
        elif owned and (sent := re.search(r"\bbytes_sent:(\d+)", line)):
            total += int(sent[1])
    return total


def signal_ranks(node: str, name: str, pattern: str = RANK_PATTERN) -> None:
    subprocess.run(["podman", "exec", node, "pkill", f"-{name}", "-f", pattern], capture_output=True, check=False)


def stop_a_rank_of(document: dict, tmp_path, victim: str, pattern: str) -> tuple[str, list[str], float]:
    """The campaign run, its first run's ranks on the victim stopped well into their steps: its output, the ranks left
    on the victim once it ended, and when the rank was stopped."""
    file = tmp_path / f"{document['name']}.yml"
    file.write_text(yaml.safe_dump(document))
    process = subprocess.Popen([sys.executable, "-m", "benchrunner", "campaign", str(file), "--results-dir",
                                str(tmp_path / "results")], cwd=PROJECT, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 600
        # Well into its steps, however long its start took on shared cores (CI's once outlasted a fixed 30 s): the
        # rank beats, then goes silent.
        while sent_by_ranks_on(victim, pattern) < STEPPING_BYTES:
            if process.poll() is not None:
                output = process.communicate()[0]
                raise AssertionError(f"the campaign ended (exit {process.returncode}) before a rank on {victim} sent "
                                     f"{STEPPING_BYTES} bytes: {failures(output)}\n{output}")
            assert time.monotonic() < deadline, f"no rank on {victim} sent {STEPPING_BYTES} bytes within 600 s"
            time.sleep(1)
        signal_ranks(victim, "STOP", pattern)
        stopped = time.monotonic()
        output, _ = process.communicate(timeout=1200)
        left = ranks_on(victim, pattern)
    finally:
        if process.poll() is None:
            process.kill()
        signal_ranks(victim, "KILL", pattern)
    assert process.returncode == 1, f"the campaign exited {process.returncode}, not 1: {failures(output)}\n{output}"
    return output, left, stopped


def failures(output: str) -> str:
    """The campaign's lines that say why a run failed, on one line: what a CI log's one-line summary shows."""
    said = [line.strip() for line in output.splitlines() if "failed" in line or "stalled" in line]
    return " | ".join(said) or "no run said why"


def hostname(node: str) -> str:
    """The name its ranks beat under: the node's own."""
    return subprocess.run(["podman", "exec", node, "hostname"], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_a_stopped_rank_ends_its_run_named_with_its_host_and_the_campaign_goes_on(provisioned, tmp_path):
    document = {**CAMPAIGN, "seed": next(s for s in range(100) if campaign.schedule(CAMPAIGN, s)[0].point[
        "workload"]["measured_steps"] == 100000)}
    results_dir = tmp_path / "results"
    long_run, short_run = campaign.schedule(document, document["seed"])
    victim = lab_node_names()[1]
    host = hostname(victim)
    output, left, stopped = stop_a_rank_of(document, tmp_path, victim, RANK_PATTERN)

    runs = results.load(results.CAMPAIGN_STATE, results_dir / "campaigns" / "stall" / campaign.STATE_JSON)["runs"]
    failed, done = runs[long_run.run_id], runs[short_run.run_id]
    assert failed["status"] == "failed" and done["status"] == "done", output
    assert failed["reason"].startswith(f"stalled: rank 1 on host {host} went silent"), failed
    run_dir = results_dir / long_run.run_id
    record = results.load(results.STALLED, run_dir / watchdog.STALLED_JSON)
    assert record["stalled"] == [1] and record["cause"] == "silent"
    ranks = {r["rank"]: r for r in record["ranks"]}
    assert ranks[1]["host"] == host and ranks[1]["steps"] > 0 and ranks[0]["state"] == "running"
    # Ended by the stall, not by the job's timeout (900 s): within the stall timeout and the play's own time.
    assert ranks[1]["silent_s"] < STALL_TIMEOUT_S + 5 and failed["elapsed_s"] < 900, (record, failed)
    assert time.monotonic() - stopped < 900
    assert f"STALLED: rank 1 on host {host} went silent" in (run_dir / report.REPORT_MD).read_text()
    # The stopped rank did not outlive its job.
    assert left == [], left
    text = (results_dir / "campaigns" / "stall" / report.REPORT_MD).read_text()
    assert f"failed: {long_run.run_id}: stalled: rank 1 on host {host}" in text


def test_an_srun_job_is_watched_on_its_batch_host_and_a_stopped_rank_ends_it_as_stalled(provisioned, tmp_path):
    # One long srun run (the completing run after a stalled one is the test above's).
    document = {**CAMPAIGN, "name": "stall-srun", "stacks": ["slurm"], "workloads": {"measured_steps": [100000]}}
    (run,) = campaign.schedule(document, 0)
    victim = lab_node_names()[1]
    host = hostname(victim)
    output, left, stopped = stop_a_rank_of(document, tmp_path, victim, SRUN_RANK_PATTERN)
    results_dir = tmp_path / "results"
    state = results.load(results.CAMPAIGN_STATE, results_dir / "campaigns" / "stall-srun" / campaign.STATE_JSON)
    failed = state["runs"][run.run_id]
    assert failed["status"] == "failed" and failed["reason"].startswith(
        f"stalled: rank 1 on host {host} went silent"), (failed, output)
    # Written on the batch host by the watchdog around srun, gathered with the run.
    record = results.load(results.STALLED, results_dir / run.run_id / watchdog.STALLED_JSON)
    assert record["stalled"] == [1] and record["cause"] == "silent"
    ranks = {r["rank"]: r for r in record["ranks"]}
    assert ranks[1]["host"] == host and ranks[1]["steps"] > 0 and ranks[0]["state"] == "running"
    assert ranks[1]["silent_s"] < STALL_TIMEOUT_S + 5 and failed["elapsed_s"] < 900, (record, failed)
    assert time.monotonic() - stopped < 900
    # The batch script Slurm ran, kept with the run: srun under the watchdog.
    assert shlex.split((results_dir / run.run_id / "job.sbatch").read_text().splitlines()[-1])[1] == "watch"
    # srun ended the stopped rank with the step.
    assert left == [], left
