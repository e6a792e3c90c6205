"""The benchmark play hands benchrunner one job document, built as data: what the inventory says reaches the ranks
exactly as given, or the play stops in preflight saying what to fix, having changed nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from playbook_run import play, role_tasks

from unit_paths import PROJECT

HOSTILE_ENV = {
    "QUOTES": "it's \"quoted\" 'twice'",
    "SUBSHELL": "$(touch {marker}) `touch {marker}`",
    "NEWLINES": "first\nsecond\n; touch {marker}\n",
    "BOOLEAN": "true",
    "NUMBERS": "007",
    "NULL": "null",
}


def settings(tmp_path: Path, **more) -> dict:
    return {"cluster_results_dir": str(tmp_path / "results"), "benchrunner_node_results_dir": str(tmp_path / "node"),
            "cluster_python_env": str(tmp_path / "venv"), "cluster_project_dir": str(PROJECT), **more}


def stub(path: Path, body: str) -> None:
    path.write_text(f"#!{sys.executable}\nimport json, os, subprocess, sys\n{body}")
    path.chmod(0o755)


def test_env_values_reach_the_ranks_exactly_and_run_nothing(tmp_path):
    marker = tmp_path / "INJECTED"
    env = {name: value.format(marker=marker) for name, value in HOSTILE_ENV.items()}
    run = play(tmp_path, role_tasks("benchrunner", "resolve") + role_tasks("benchrunner", "keep_job"), gather_facts=True,
               extravars=settings(
        tmp_path, benchrunner_run_id="r1", benchrunner_launcher="srun", benchrunner_stack="slurm",
        benchrunner_env=env, benchrunner_workload={"model": "small_cnn", "xla": True, "learning_rate": 0.05}))
    assert run.returncode == 0, run.stdout[-3000:]
    job_file = tmp_path / "results" / "r1" / "job.json"
    job = json.loads(job_file.read_text())
    assert job["env"] == env and job["workload"] == {"model": "small_cnn", "xla": True, "learning_rate": 0.05}
    assert job["ranks"] == 1 and job["hosts"] == [os.uname().nodename.split(".")[0]]

    # The job as the launcher host runs it: Slurm's commands stubbed, the batch script run by bash, srun recording
    # the environment the ranks would get.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub(bin_dir / "sbatch", "subprocess.run(['bash', sys.argv[-1]], check=True)\nprint('42')\n")
    stub(bin_dir / "scontrol", "print('JobId=42 JobState=COMPLETED ExitCode=0:0')\n")
    stub(bin_dir / "srun", f"json.dump({{n: os.environ.get(n) for n in {sorted(env)!r}}}, "
                           f"open({str(tmp_path / 'srun.json')!r}, 'w'))\n")
    # The batch script runs srun under the nodes' benchrunner (its watchdog): this Python's.
    nodes_benchrunner = Path(job["nodes"]["benchrunner"])
    nodes_benchrunner.parent.mkdir(parents=True)
    nodes_benchrunner.symlink_to(Path(sys.executable).with_name("benchrunner"))
    launched = subprocess.run([sys.executable, "-m", "benchrunner", "job", "launch", str(job_file)],
                              env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}, capture_output=True,
                              text=True, check=False, cwd=tmp_path)
    assert launched.returncode == 0, launched.stderr
    assert json.loads((tmp_path / "srun.json").read_text()) == env
    assert not marker.exists()
    # The launcher host keeps the same record beside its raw/ folder, and the batch script that ran.
    assert json.loads((tmp_path / "node" / "r1" / "job.json").read_text()) == job
    assert (tmp_path / "node" / "r1" / "job.sbatch").is_file()


@pytest.mark.parametrize(("change", "said"), [
    ({"benchrunner_workload": {"image_s": 64}}, "unknown workload settings: image_s (known: batch_size,"),
    ({"benchrunner_workload": {"batch_size": "32"}}, "workload: batch_size must be an integer (got '32', a string)"),
    ({"benchrunner_env": {"OMP_NUM_THREADS": 4}}, "at env/OMP_NUM_THREADS: 4 is not of type 'string'"),
    ({"benchrunner_ranks": "2"}, "at ranks: '2' is not of type 'integer'"),
])
def test_a_job_benchrunner_refuses_stops_the_play_in_preflight(tmp_path, change, said):
    run = play(tmp_path, role_tasks("benchrunner", "00-preflight"), gather_facts=True,
               extravars=settings(tmp_path, **change))
    assert run.refused("The benchmark settings are not valid: "), run.stdout[-3000:]
    assert said in " ".join(run.stdout.split()).replace("\\\\", "\\"), run.stdout[-3000:]
    assert not (tmp_path / "results").exists()


def test_launcher_settings_given_to_a_launcher_that_takes_none_stop_the_play_before_the_job_is_resolved(tmp_path):
    run = play(tmp_path, role_tasks("benchrunner", "00-preflight"), extravars=settings(
        tmp_path, benchrunner_launcher="mpirun", benchrunner_launcher_settings={"partition": "gpu"}))
    assert run.refused("benchrunner_launcher_settings gives partition, but launcher mpirun takes no settings. "), \
        run.stdout[-3000:]
    assert "use a launcher that takes settings: mpijob, srun, torchrun." in " ".join(run.stdout.split()), run.stdout[-3000:]
    assert "Resolve the job" not in run.stdout and not (tmp_path / "results").exists()


@pytest.mark.parametrize(("change", "said"), [
    ({"cluster_kubernetes_version": "1.99.0"}, "Kubernetes 1.99.0: the offline validator knows 1.25.0 to"),
    ({"benchrunner_runtime_class": "Bad Class!"}, "kubernetes.runtime_class 'Bad Class!' is not a RuntimeClass name"),
])
def test_an_mpijob_the_job_launch_would_refuse_stops_the_play_before_it_writes_the_job(tmp_path, change, said):
    # Preflight, then what the benchmark play does next: write the run's job.json.
    run = play(tmp_path, role_tasks("benchrunner", "00-preflight") + role_tasks("benchrunner", "keep_job"),
               gather_facts=True, extravars=settings(tmp_path, cluster_stack="k8s", benchrunner_run_id="k1", **change))
    assert run.refused("The benchmark settings are not valid: "), run.stdout[-3000:]
    assert said in " ".join(run.stdout.split()), run.stdout[-3000:]
    assert not (tmp_path / "results").exists()


def test_the_job_is_resolved_once_by_the_first_play_that_needs_it(tmp_path):
    # Preflight resolves it; the run's plays (here the same play, as in site.yml's) take what it kept.
    run = play(tmp_path, role_tasks("benchrunner", "00-preflight") + role_tasks("benchrunner", "resolve")
               + role_tasks("benchrunner", "keep_job"), gather_facts=True,
               extravars=settings(tmp_path, benchrunner_run_id="once", benchrunner_ranks=1,
                                  # The inventory's Slurm setting, which this job's launcher does not read.
                                  benchrunner_slurm_partition="batch"))
    assert run.returncode == 0, run.stdout[-3000:]
    outcomes = [part.split("\n\n", 1)[0] for part in run.stdout.split("TASK [benchrunner : Resolve the job on the "
                                                                      "control host]")[1:]]
    assert len(outcomes) == 2 and "ok: [node001" in outcomes[0] and "skipping: [node001]" in outcomes[1], outcomes
    job = json.loads((tmp_path / "results" / "once" / "job.json").read_text())
    # What the user left unset is benchrunner's to fill in (benchrunner.job_defaults), not the role's.
    assert job["resolved"] is True and job["timeout_s"] == 3600
    # The job holds its launcher's settings alone: benchrunner refuses another launcher's.
    assert job["launcher"] == "mpirun" and not {"slurm", "kubernetes"} & set(job), job
