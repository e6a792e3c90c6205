"""A hung rank is named: a launcher whose ranks beat is run watched, and a job whose rank stops (SIGSTOP, as a hung
NCCL call leaves it) or whose ranks all beat without completing a step is ended within the stall timeout, naming
the rank and its host. The 'launcher' here is a real process starting real rank processes that beat with the
ranks' own Beater; one stops itself with SIGSTOP."""

from __future__ import annotations

import argparse
import base64
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

import benchrunner
from benchrunner import campaign, cli, gather, launchers, results, summary, watchdog
from benchrunner.launchers import srun

SRC = str(Path(benchrunner.__file__).resolve().parents[1])
# The benchrunner command beside this Python (it imports SRC, on PYTHONPATH).
BENCHRUNNER = str(Path(sys.executable).with_name("benchrunner"))
# One rank: beats every 0.1 s and after each step, completes a step every 0.05 s, stops itself (SIGSTOP) before step
# `stop_at`, or goes on beating without completing a step from step `stuck_at`; a rank that ends says so on its output.
RANK = """
import os, signal, sys, time
from benchrunner.watchdog import Beater
rank, host, steps, stop_at, stuck_at = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
beater = Beater(rank, host, interval_s=0.1)
beater.start()
for step in range(steps):
    if step == stop_at:
        os.kill(os.getpid(), signal.SIGSTOP)
    while step >= stuck_at:
        time.sleep(1)
    time.sleep(0.05)
    beater.progress += 1
    beater.write(beater.line("run"))  # as the beat thread would now and then: a known step count to assert
print(f"rank {rank} trained {steps} steps", flush=True)
beater.stop(done=True)
"""
# The launcher: starts every rank (their pids in a file), prints a line of its own, and exits with `code` once they
# have ended.
LAUNCHER = """
import json, subprocess, sys
ranks, pids, code = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
print("launcher: starting", len(ranks), "ranks", flush=True)
print("launcher: to stderr", file=sys.stderr, flush=True)
started = [subprocess.Popen([sys.executable, "-c", sys.argv[4], *map(str, rank)]) for rank in ranks]
open(pids, "w").write(json.dumps([p.pid for p in started]))
codes = [p.wait() for p in started]
sys.exit(code if not any(codes) else 1)
"""
NEVER = 10**6


def launcher_argv(tmp_path: Path, ranks: list[tuple[int, str, int, int, int]], code: int = 0) -> list[str]:
    """The fake launcher's command, starting these ranks (their pids in tmp_path/pids.json)."""
    os.environ["PYTHONPATH"] = SRC
    return [sys.executable, "-c", LAUNCHER, json.dumps(ranks), str(tmp_path / "pids.json"), str(code), RANK]


def launcher(tmp_path: Path, ranks: list[tuple[int, str, int, int, int]], code: int = 0):
    """start() for supervise: replaces the forked child with the fake launcher, as mpirun's start does."""
    argv = launcher_argv(tmp_path, ranks, code)

    def start() -> int:
        os.execvp(argv[0], argv)

    return start


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purpose: only its parent (the killed launcher) could reap it.
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] if Path(f"/proc/{pid}").exists() else "X"
    return state not in ("Z", "X")


# Long enough for the ranks to start on a busy 2-core host (a Python each), short for a test.
STALL_S = 3.0


def supervise(tmp_path: Path, ranks: list[tuple[int, str, int, int, int]], *, stall_s: float = STALL_S,
              timeout_s: float = 60, code: int = 0) -> tuple[int, float]:
    started = time.monotonic()
    exit_code = watchdog.supervise(launcher(tmp_path, ranks, code), run_id="stall-test", run_dir=tmp_path,
                                   ranks=len(ranks), limits=watchdog.Limits(timeout_s, stall_s), grace_s=2)
    return exit_code, time.monotonic() - started


def test_a_stopped_rank_ends_the_job_within_the_stall_timeout_named_with_its_host(tmp_path, capfd):
    (tmp_path / watchdog.STALLED_JSON).write_text("an earlier attempt's record")
    code, took = supervise(tmp_path, [(0, "node-a", NEVER, NEVER, NEVER), (1, "node-b", NEVER, 5, NEVER)])
    assert code == watchdog.STALLED_EXIT
    # Rank 1 stops after ~0.3 s; the stall is seen STALL_S later and the job ended (SIGTERM, then SIGKILL).
    assert took < STALL_S + 5, took
    record = results.load(results.STALLED, tmp_path / watchdog.STALLED_JSON)
    assert record["cause"] == "silent" and record["stalled"] == [1]
    assert record["reason"].startswith("stalled: rank 1 on host node-b went silent (no beat for ")
    assert "after 5 completed steps" in record["reason"]
    by_rank = {r["rank"]: r for r in record["ranks"]}
    assert (by_rank[1]["host"], by_rank[1]["steps"], by_rank[1]["state"]) == ("node-b", 5, "running")
    # The record rounds to the millisecond: a stall seen within half of one past the timeout reads as the timeout.
    assert by_rank[1]["silent_s"] >= STALL_S and by_rank[0]["silent_s"] < 1.0 and by_rank[0]["steps"] > 5
    # The launcher's own output passed through, the beats taken out; the stall said on stderr.
    out, err = capfd.readouterr()
    assert "launcher: starting 2 ranks" in out and watchdog.MARKER not in out
    assert "launcher: to stderr" in err
    assert "benchrunner: stalled: rank 1 on host node-b went silent" in err
    # Every rank is gone, the stopped one included.
    assert all_gone(json.loads((tmp_path / "pids.json").read_text()))


def all_gone(pids: list[int]) -> bool:
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not any(alive(pid) for pid in pids)


def batch_job(tmp_path: Path, ranks: list[tuple[int, str, int, int, int]],
              limits: watchdog.Limits) -> tuple[launchers.Job, subprocess.CompletedProcess[str], float]:
    """srun's batch script for a job of these ranks, run as Slurm runs it on the batch host: with an srun that starts
    the fake ranks and passes their output on (as srun does every task's), and this checkout's benchrunner."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(f"#!/bin/sh\nexec {shlex.join(launcher_argv(tmp_path, ranks))}\n")
    (bin_dir / "srun").chmod(0o755)
    job = launchers.Job(run_id="stall-test", output_dir=str(tmp_path / "run" / "raw"), ranks=len(ranks),
                        stack="slurm", launcher="srun", benchrunner=BENCHRUNNER)
    batch_script = tmp_path / srun.SCRIPT
    batch_script.write_text(srun.script(job, limits))
    started = time.monotonic()
    ran = subprocess.run(["bash", str(batch_script)], env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
                         capture_output=True, text=True, check=False, timeout=60)
    return job, ran, time.monotonic() - started


def test_an_srun_job_is_watched_on_its_batch_host_and_a_stopped_rank_ends_it_as_stalled(tmp_path):
    job, ran, took = batch_job(tmp_path, [(0, "node-a", NEVER, NEVER, NEVER), (1, "node-b", NEVER, 5, NEVER)],
                               watchdog.Limits(60, STALL_S))
    # The script's status, so the Slurm job's ExitCode, is the watchdog's: what `benchrunner launch` then exits with.
    assert ran.returncode == watchdog.STALLED_EXIT, ran.stderr
    assert took < STALL_S + 8, took
    record = results.load(results.STALLED, launchers.run_dir(job) / watchdog.STALLED_JSON)
    assert (record["run_id"], record["cause"], record["stalled"]) == ("stall-test", "silent", [1])
    assert record["reason"].startswith("stalled: rank 1 on host node-b went silent (no beat for ")
    # What srun passed on reaches the job's output file, the beats taken out.
    assert "launcher: starting 2 ranks" in ran.stdout and watchdog.MARKER not in ran.stdout
    assert "benchrunner: stalled: rank 1 on host node-b went silent" in ran.stderr
    assert all_gone(json.loads((tmp_path / "pids.json").read_text()))


def test_an_srun_job_that_finishes_passes_through_its_status_with_no_record(tmp_path):
    job, ran, _ = batch_job(tmp_path, [(0, "node-a", 5, NEVER, NEVER), (1, "node-b", 8, NEVER, NEVER)],
                            watchdog.Limits(60, STALL_S))
    assert ran.returncode == 0, ran.stderr
    assert not (launchers.run_dir(job) / watchdog.STALLED_JSON).exists()
    assert "rank 0 trained 5 steps" in ran.stdout and "rank 1 trained 8 steps" in ran.stdout
    assert watchdog.MARKER not in ran.stdout


def test_launch_of_an_srun_job_ended_as_stalled_exits_as_for_mpirun(tmp_path, monkeypatch, capsys):
    # Slurm stubbed: sbatch runs the batch script where it is (the batch host), scontrol says how it ended, as Slurm
    # does for a script that exited non-zero (JobState=FAILED, ExitCode=<status>:0).
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ranks = [(0, "node-a", NEVER, NEVER, NEVER), (1, "node-b", NEVER, 5, NEVER)]
    stubs = {"srun": f"exec {shlex.join(launcher_argv(tmp_path, ranks))}\n",
             "sbatch": f'bash "$2" > {tmp_path / "slurm.out"} 2>&1; echo $? > {tmp_path / "rc"}; echo 42\n',
             "scontrol": f'rc=$(cat {tmp_path / "rc"}); [ "$rc" = 0 ] && echo "JobId=42 JobState=COMPLETED ExitCode=0:0" '
                         f'|| echo "JobId=42 JobState=FAILED Reason=NonZeroExitCode ExitCode=$rc:0"\n'}
    for name, body in stubs.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv(launchers.LAUNCHED_AT_ENV, "")
    # Watched inside the job, where the ranks' output is; never on the launching node, which does not see it.
    monkeypatch.setattr(watchdog, "supervise", lambda *_, **__: pytest.fail("srun watched on the launching node"))
    stall_s = watchdog.MIN_STALL_TIMEOUT_S
    started = time.monotonic()
    assert cli.main(["launch", "--launcher", "srun", "--stack", "slurm", "--run-id", "stall-test", "--results-dir",
                     str(tmp_path / "node"), "--ranks", "2", "--benchrunner", BENCHRUNNER, "--timeout", "60",
                     "--stall-timeout", str(stall_s)]) == watchdog.STALLED_EXIT
    assert time.monotonic() - started < stall_s + 8
    assert "slurm job 42 ended FAILED (NonZeroExitCode)" in capsys.readouterr().err
    run = tmp_path / "node" / "stall-test"
    # The script Slurm ran is kept (it watched srun within the job's limits), and so is the watchdog's record.
    assert (f"watch --run-id stall-test --run-dir {run} --ranks 2 --timeout 60.0 --stall-timeout {stall_s} "
            f"--startup-timeout {stall_s}") in (run / srun.SCRIPT).read_text()
    assert set(launchers.kept_files("srun", "slurm")) == {launchers.JOB_JSON, srun.SCRIPT, watchdog.STALLED_JSON}
    assert results.load(results.STALLED, run / watchdog.STALLED_JSON)["stalled"] == [1]
    assert "benchrunner: stalled: rank 1 on host node-b went silent" in (tmp_path / "slurm.out").read_text()


def test_the_watch_command_refuses_limits_that_do_not_hold_together(capsys):
    assert cli.main(["watch", "--run-id", "r1", "--run-dir", "relative", "--ranks", "0", "--timeout", "10",
                     "--stall-timeout", "10", "--startup-timeout", "20", "--", "srun"]) == 2
    err = capsys.readouterr().err
    assert "--run-dir 'relative' must be an absolute path" in err and "--ranks must be 1 or more, got 0" in err
    assert "--stall-timeout must be below --timeout (10 s), got 10" in err
    assert "--startup-timeout must be below --timeout (10 s), got 20" in err


def test_ranks_that_all_beat_but_complete_no_step_are_a_hung_collective_naming_the_lowest(tmp_path, capfd):
    code, took = supervise(tmp_path, [(0, "node-a", NEVER, NEVER, 8), (1, "node-b", NEVER, NEVER, 3),
                                      (2, "node-c", NEVER, NEVER, 8)])
    assert code == watchdog.STALLED_EXIT and took < STALL_S + 5
    record = results.load(results.STALLED, tmp_path / watchdog.STALLED_JSON)
    assert record["cause"] == "no progress" and record["stalled"] == [1]
    assert record["reason"].startswith("stalled: rank 1 on host node-b at the lowest step (3 completed)")
    assert [r["steps"] for r in record["ranks"]] == [8, 3, 8]
    assert all(r["state"] == "running" and r["silent_s"] < 1.0 for r in record["ranks"])


def test_a_job_that_finishes_passes_through_with_its_launchers_status_and_no_record(tmp_path, capfd):
    code, _ = supervise(tmp_path, [(0, "node-a", 5, NEVER, NEVER), (1, "node-b", 8, NEVER, NEVER)], code=7)
    assert code == 7
    assert not (tmp_path / watchdog.STALLED_JSON).exists()
    out, _ = capfd.readouterr()
    assert "rank 0 trained 5 steps" in out and "rank 1 trained 8 steps" in out and watchdog.MARKER not in out


def test_a_job_past_its_timeout_is_ended_and_said_so_not_called_stalled(tmp_path, capfd):
    code, took = supervise(tmp_path, [(0, "node-a", NEVER, NEVER, NEVER)], stall_s=30, timeout_s=4)
    assert code == watchdog.TIMED_OUT_EXIT and took < 4 + 5
    assert not (tmp_path / watchdog.STALLED_JSON).exists()
    _, err = capfd.readouterr()
    assert "the job's timeout_s (4 s) passed with no stall seen" in err and "rank 0 on node-a: running" in err


@pytest.mark.parametrize("line, beat", [
    ("BENCHRUNNER-BEAT:1:3:gpu-07:model_ready:120:run", watchdog.Beat(3, "gpu-07", "model_ready", 120, False)),
    ("[1,3]<stdout>:BENCHRUNNER-BEAT:1:3:gpu-07:model_ready:120:done\n",
     watchdog.Beat(3, "gpu-07", "model_ready", 120, True)),
    # Cut, mixed with another rank's output, another version: not a beat, passed through as output.
    ("BENCHRUNNER-BEAT:1:3:gpu-07:model_ready:12", None),
    ("BENCHRUNNER-BEAT:1:3:gpu-07:model_ready:120:runrank 0/2 on gpu-01: 5.0 images/s", None),
    ("BENCHRUNNER-BEAT:1:3:gpu-07:120:run", None),
    ("BENCHRUNNER-BEAT:2:3:gpu-07:model_ready:120:run", None),
])
def test_a_beat_is_read_whole_or_not_at_all(line, beat):
    assert watchdog.parse(line) == beat


@pytest.mark.parametrize("environ, rank", [
    ({"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "8"}, 5),
    ({"RANK": "2", "WORLD_SIZE": "4"}, 2),
    ({"SLURM_PROCID": "7"}, 7),
    ({"HOROVOD_RANK": "1"}, 1),
    ({}, 0),
    ({"OMPI_COMM_WORLD_SIZE": "8"}, None),
])
def test_a_rank_beats_under_the_number_its_launcher_gave_it(environ, rank):
    assert watchdog.rank_of(environ) == rank


def test_a_rank_beats_only_where_its_launchers_node_reads_the_beats(monkeypatch):
    lines: list[str] = []
    monkeypatch.setattr(watchdog, "_write_line", lambda fd, line: lines.append(line))
    with watchdog.beating(False, {"RANK": "1"}):
        watchdog.advance()
    assert lines == []
    with watchdog.beating(True, {"RANK": "1"}):
        watchdog.reached("ranks_joined")
        watchdog.advance()
        watchdog.advance()
    assert lines[0].endswith(":started:0:run\n") and lines[-1].endswith(":ranks_joined:2:done\n")
    assert lines[0].startswith(f"{watchdog.MARKER}:1:")
    # A rank that fails says no done: its launcher ends the job.
    lines.clear()
    with pytest.raises(RuntimeError), watchdog.beating(True, {"RANK": "1"}):
        raise RuntimeError("a rank that failed")
    assert [line for line in lines if line.endswith(":done\n")] == []
    # Watched on the launching node, inside the job (srun's batch script, torchrun's under Slurm), or not at all (an
    # MPIJob).
    for launcher_name, stack, beats, in_job in (
            ("mpirun", "baremetal", True, False), ("torchrun", "baremetal", True, False),
            ("torchrun", "slurm", True, True), ("horovodrun", "baremetal", True, False), ("srun", "slurm", True, True),
            ("mpijob", "k8s", False, False)):
        assert (launchers.get(launcher_name).beats, launchers.on_stack(launcher_name, stack).watched_in_job) == (
            beats, in_job)


def test_a_stalled_run_is_reported_and_recorded_with_its_rank_and_host(tmp_path, capsys):
    run_dir = tmp_path / "node" / "stall-test"
    run_dir.mkdir(parents=True)
    assert supervise(run_dir, [(0, "node-a", NEVER, NEVER, NEVER), (1, "node-b", NEVER, 3, NEVER)])[0] == 3
    capsys.readouterr()
    # What the launching node wrote reaches the control host with the rank results.
    sent = f"{watchdog.STALLED_JSON}\n{base64.b64encode((run_dir / watchdog.STALLED_JSON).read_bytes()).decode()}\n"
    control = tmp_path / "control" / "stall-test"
    assert gather.write(control, {"node-a": sent}, ("hostfile",), require_leaves=False) == [watchdog.STALLED_JSON]
    # A run without rank results is summarized as stalled, not a crash.
    assert cli.main(["summarize", str(control)]) == 1
    out, err = capsys.readouterr()
    assert "# Run stall-test: stalled" in out and "STALLED: rank 1 on host node-b went silent" in out
    assert "| 1 | node-b | running (STALLED) | 3 |" in out
    assert "the run's job was ended as stalled: rank 1 on host node-b" in err
    assert "STALLED" in (control / "report.html").read_text()
    assert (control.parent / summary.LATEST).resolve() == control.resolve()
    # The campaign records the run failed for that reason, and goes on.
    attempt = campaign.run_outcome(control.parent, "stall-test")
    assert not attempt.ok and attempt.reason.startswith("stalled: rank 1 on host node-b went silent")


@pytest.mark.parametrize(("launcher_name", "launched", "beats"), [
    ("mpirun", True, True), ("torchrun", True, True), ("horovodrun", True, True),
    # srun's batch script exports the launch time and reads the beats on the batch host.
    ("srun", True, True),
    # Not started by `benchrunner launch` (by hand, or a test's own ranks): nothing reads the beats.
    ("mpirun", False, False), ("srun", False, False),
    # Their output goes to the launcher pod's log: nobody reads it while they run.
    ("mpijob", True, False),
])
def test_a_rank_program_beats_where_its_launchers_node_reads_them(monkeypatch, launcher_name, launched, beats):
    lines: list[str] = []
    monkeypatch.setattr(watchdog, "_write_line", lambda fd, line: lines.append(line))
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "1")
    if launched:
        monkeypatch.setenv(launchers.LAUNCHED_AT_ENV, "1700000000.0")
    else:
        monkeypatch.delenv(launchers.LAUNCHED_AT_ENV, raising=False)
    with cli._beating(argparse.Namespace(launcher=launcher_name)):
        watchdog.advance()
    assert bool(lines) is beats and all(line.startswith(f"{watchdog.MARKER}:1:") for line in lines)


STAGES = ((0, watchdog.STARTED), (9, "framework_imported"), (18, "ranks_joined"), (27, "model_ready"))


def beat_until(watch: watchdog.Watch, ranks: tuple[int, ...], start: int, end: int) -> None:
    """These ranks beat every 2 s from start to end, in their start-up stage of the time, no step done; no stall."""
    for now in range(start, end + 1, 2):
        stage = [name for at, name in STAGES if at <= now][-1]
        for rank in ranks:
            watch.heard(watchdog.Beat(rank, f"node-{rank}", stage, 0, False), now)
        assert watch.stall(now) is None, now


def test_a_start_longer_than_the_stall_timeout_is_no_stall_while_its_stages_go_on():
    watch = watchdog.Watch.of(2, stall_timeout_s=10, started=0.0)
    beat_until(watch, (0, 1), 0, 38)
    # Beating on at model_ready (since 28), with no first step: a hung collective, both ranks at step 0.
    stall = watch.stall(39)
    assert stall is not None and stall.cause == "no progress" and [r.rank for r in stall.ranks] == [0, 1]
    assert stall.reason().startswith("stalled: rank 0 on host node-0, rank 1 on host node-1 at the lowest step (0")
    assert [r["stage"] for r in watch.document("r", stall, 39)["ranks"]] == ["model_ready", "model_ready"]


def test_a_first_step_longer_than_the_stall_timeout_is_bounded_by_the_startup_timeout_and_later_steps_are_not():
    watch = watchdog.Watch.of(2, stall_timeout_s=10, started=0.0, startup_timeout_s=60)
    # At model_ready from 28, the first step compiling for 50 s: within the start-up timeout, every rank beating.
    beat_until(watch, (0, 1), 0, 78)
    for now in range(80, 90, 2):
        for rank in (0, 1):
            watch.heard(watchdog.Beat(rank, f"node-{rank}", "model_ready", 1, False), now)
        assert watch.stall(now) is None, now
    # One step done by every rank: from the last progress (80), the stall timeout again.
    for now in range(90, 92, 2):
        for rank in (0, 1):
            watch.heard(watchdog.Beat(rank, f"node-{rank}", "model_ready", 1, False), now)
    stall = watch.stall(91)
    assert stall is not None and stall.cause == "no progress" and stall.seconds == 11
    assert watch.document("r", stall, 91)["startup_timeout_s"] == 60


def test_a_start_up_that_goes_on_past_the_startup_timeout_is_a_stall_and_says_so():
    watch = watchdog.Watch.of(2, stall_timeout_s=10, started=0.0, startup_timeout_s=60)
    beat_until(watch, (0, 1), 0, 86)
    stall = watch.stall(89)
    assert stall is not None and stall.cause == "no progress" and stall.seconds == 61
    assert "for 61 s (start-up and first step: the start-up timeout) though every rank beats" in stall.reason()
    record = watch.document("r", stall, 89)
    assert (record["stall_timeout_s"], record["startup_timeout_s"]) == (10, 60)


def test_a_rank_silent_while_starting_is_named_after_the_stall_timeout_not_the_startup_timeout():
    watch = watchdog.Watch.of(2, stall_timeout_s=10, started=0.0, startup_timeout_s=60)
    beat_until(watch, (0, 1), 0, 20)
    beat_until(watch, (0,), 22, 30)
    stall = watch.stall(31)
    assert stall is not None and stall.cause == "silent" and [r.rank for r in stall.ranks] == [1]


def test_a_rank_going_silent_while_the_others_wait_is_named_silent_not_a_hung_collective():
    watch = watchdog.Watch.of(2, stall_timeout_s=10, started=0.0)
    beat_until(watch, (0, 1), 0, 30)
    # Rank 1 stops at 30; rank 0 waits for it, beating. No progress since 28, but rank 1 is not heard: not yet.
    beat_until(watch, (0,), 32, 40)
    stall = watch.stall(41)
    assert stall is not None and stall.cause == "silent" and [r.rank for r in stall.ranks] == [1]
    assert stall.reason() == ("stalled: rank 1 on host node-1 went silent (no beat for 11 s, starting, at stage "
                              "model_ready): stopped or wedged")


def test_the_clocks_start_at_the_first_beat_and_a_rank_never_heard_from_is_then_named():
    # The launcher still starting (torchrun importing torch, mpirun reaching its nodes): only the job's timeout.
    assert watchdog.Watch.of(2, stall_timeout_s=10, started=0.0).stall(1000) is None
    watch = watchdog.Watch.of(2, stall_timeout_s=10, started=-100.0)
    beat_until(watch, (0,), 0, 10)
    stall = watch.stall(11)
    assert stall is not None and stall.cause == "silent" and [r.rank for r in stall.ranks] == [1]
    assert stall.reason().startswith("stalled: rank 1 (never heard from) went silent (no beat for 11 s")
    assert [(r["host"], r["state"]) for r in watch.document("r", stall, 11)["ranks"]] == [
        ("node-0", "running"), (None, "never heard")]
