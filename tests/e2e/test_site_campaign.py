"""A campaign on the lab survives losing a node mid-run, and a rerun finishes only what is missing. A run touches
only the nodes its job runs on: another node dying at any phase of it (before the run's play, while facts are
gathered, during the job) changes nothing for it."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchrunner import campaign, playbooks, report, results
from lab import PROJECT, lab_node_names, run_site

CAMPAIGN = {
    "name": "e2e",
    "repeats": 1,
    "gpus": [1, 2],
    # TFRecord data only, which the benchmark play makes on the nodes; synthetic data's training is every other e2e's.
    # Four runs: a one- and a two-rank training run and allreduce sweep.
    "workloads": {"data": ["tfrecord"]},
    "fixed": {"image_size": 32, "batch_size": 16, "warmup_steps": 2, "measured_steps": 6},
    "dataset": {"images": 64, "image_size": 32, "tfrecord_shards": 2},
    "allreduce": {"max_bytes": 65536},
}


def kill(node: str) -> None:
    subprocess.run(["podman", "kill", node], check=True, capture_output=True)


def restart(node: str, timeout_s: float = 120) -> None:
    """The killed node started again (its disk kept) and answering Ansible."""
    subprocess.run(["podman", "start", node], check=True, capture_output=True)
    deadline = time.monotonic() + timeout_s
    while node not in playbooks.reachable(PROJECT, pattern=node):
        assert time.monotonic() < deadline, f"{node} did not answer within {timeout_s} s of its restart"
        time.sleep(2)


@pytest.fixture
def victim(provisioned):
    """The last node, which one-rank runs do not use; whatever a test does to it, the lab gets it back. The tests start
    it again themselves (its disk, address and host keys kept, its FUSE device opened at start as every lab node's
    is); the lab's play runs only where a test left it not answering (30-50 s a run, each time, before)."""
    node = lab_node_names()[-1]
    try:
        yield node
    finally:
        if node not in playbooks.reachable(PROJECT, pattern=node):
            back = run_site(playbook="playbooks/lab.yml", extravars={"lab_nodes": len(lab_node_names())})
            assert back.ok, back.failures


class KillOnTask(playbooks.Progress):
    """The play's own event stream kills the victim the moment a task of the benchmark play starts."""

    task = ""
    node = ""

    def __call__(self, event: dict[str, Any]) -> bool:
        data = event.get("event_data", {})
        if (event.get("event") == "playbook_on_task_start" and data.get("play", "").startswith("Benchmark")
                and data.get("task", "").startswith(self.task) and self.node):
            kill(self.node)
            type(self).node = ""
        return super().__call__(event)


PHASES = {
    "before the run's play": None,
    "while facts are gathered": "Gathering Facts",
    "during the job": "Launch the job",
}


def test_a_run_survives_another_node_dying_at_every_phase(victim, tmp_path, monkeypatch):
    file = tmp_path / "phases.yml"
    training = {key: value for key, value in CAMPAIGN.items() if key != "allreduce"}
    file.write_text(yaml.safe_dump({**training, "name": "phases", "workloads": {"data": ["synthetic"]}}))
    document = campaign.load(file)
    one, two = (next(r for r in campaign.plan(document) if r.point["gpus"] == gpus) for gpus in (1, 2))
    execute = campaign.playbook_executor(PROJECT, tmp_path / "results", document)
    monkeypatch.setattr(playbooks, "Progress", KillOnTask)
    for number, (phase, task) in enumerate(PHASES.items()):
        if task is None:
            kill(victim)
        KillOnTask.task, KillOnTask.node = task or "", victim if task else ""
        attempt = execute(dataclasses.replace(one, run_id=f"{one.run_id}.{number}"))
        assert attempt.ok, f"{victim} killed {phase}: {attempt.reason}"
        assert KillOnTask.node == "", f"the play never reached '{task}'"
        assert victim not in playbooks.reachable(PROJECT, pattern=victim)
        # The run that needs the dead node fails when its job is resolved, naming what it lacks, before the play
        # changes anything.
        if number == 0:
            lost = execute(two)
            assert not lost.ok and "2 ranks at 1 per node need 2 hosts, 1 given" in lost.reason, lost
            assert "1 candidate node(s)" in lost.reason and not (tmp_path / "results" / two.run_id).exists(), lost
        restart(victim)


def campaign_command(file: Path, results_dir: Path) -> list[str]:
    return [sys.executable, "-m", "benchrunner", "campaign", str(file), "--results-dir", str(results_dir)]


def state_of(results_dir: Path) -> dict:
    return results.load(results.CAMPAIGN_STATE, results_dir / "campaigns" / "e2e" / "state.json")


def wait_for_done_runs(results_dir: Path, count: int, process: subprocess.Popen, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        path = results_dir / "campaigns" / "e2e" / "state.json"
        if path.exists():
            runs = json.loads(path.read_text())["runs"].values()
            if sum(r["status"] == "done" for r in runs) >= count:
                return
        assert process.poll() is None, "the campaign ended before the node could be killed"
        time.sleep(1)
    pytest.fail(f"{count} runs were not done within {timeout_s} s")


def test_campaign_keeps_what_it_measured_when_a_node_dies_and_resumes(victim, tmp_path):
    # The node dies once two runs are done: a seed whose third run needs one rank keeps a two-rank job from losing
    # a rank mid-collective (Slurm would take SlurmdTimeout, minutes, to fail it), and whose last needs two leaves a
    # run to fail and to be done by the rerun.
    seed = next(s for s in range(100) if [r.point["gpus"] for r in campaign.schedule(CAMPAIGN, s)[2:]] == [1, 2])
    file = tmp_path / "e2e.yml"
    file.write_text(yaml.safe_dump({**CAMPAIGN, "seed": seed}))
    results_dir = tmp_path / "results"
    planned = campaign.plan(campaign.load(file))

    process = subprocess.Popen(campaign_command(file, results_dir), cwd=PROJECT, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        wait_for_done_runs(results_dir, 2, process)
        kill(victim)
        output, _ = process.communicate(timeout=1800)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 1, output

    first = state_of(results_dir)["runs"]
    done_before = {run_id for run_id, entry in first.items() if entry["status"] == "done"}
    failed = {run_id: entry["reason"] for run_id, entry in first.items() if entry["status"] == "failed"}
    assert len(done_before) + len(failed) == len(planned) and failed, first
    # Two-rank runs need the dead node; one-rank runs go on without it.
    assert all(first[r.run_id]["status"] == "failed" for r in planned if r.point["gpus"] == 2 and r.run_id not in done_before)
    assert all(first[r.run_id]["status"] == "done" for r in planned if r.point["gpus"] == 1)
    # The run in flight needed only the first node, so every failure is a two-rank run refused for want of hosts.
    assert all("2 ranks at 1 per node need 2 hosts, 1 given" in reason for reason in failed.values()), failed
    kept = {run_id: (results_dir / run_id / "summary.json").read_bytes() for run_id in done_before
            if (results_dir / run_id / "summary.json").exists()}

    restart(victim)
    rerun = subprocess.run(campaign_command(file, results_dir), cwd=PROJECT, capture_output=True, text=True,
                           timeout=1800, check=False)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert f"{len(done_before)} of {len(planned)} runs already done, {len(failed)} to run" in rerun.stderr

    final = state_of(results_dir)["runs"]
    assert all(entry["status"] == "done" for entry in final.values())
    assert all(final[run_id]["attempts"] == 1 for run_id in done_before)
    assert all(final[run_id]["attempts"] == 2 for run_id in failed)
    assert {run_id: (results_dir / run_id / "summary.json").read_bytes() for run_id in kept} == kept

    out = results_dir / "campaigns" / "e2e"
    assert sorted(p.name for p in (out / report.PLOTS_DIR).iterdir()) == [
        "allreduce.png", "loss.png", "throughput.png"]
    text = (out / report.REPORT_MD).read_text()
    assert f"Campaign e2e: {len(planned)} runs done, 0 failed." in text
    assert "small_cnn tfrecord b16 32px | baremetal | 2 | images/s | 1 |" in text
