"""The benchmark play's node command and benchrunner's `job gather` agree: what a node's run folder holds reaches
the control host byte for byte, and nothing else of the folder does."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from benchrunner import gather

RUN_TASKS = Path(__file__).resolve().parents[2] / "roles" / "benchrunner" / "tasks" / "run.yml"


def node_script() -> str:
    block = next(t for t in yaml.safe_load(RUN_TASKS.read_text()) if "block" in t)
    task = next(t for t in block["always"] if t["name"] == "Read this node's results")
    return task["vars"]["_benchrunner_send_results"]


def send(run_dir: Path, *leaves: str) -> str:
    return subprocess.run(["sh", "-c", node_script(), "sh", str(run_dir), *leaves], capture_output=True, text=True,
                          check=True).stdout


def test_a_node_sends_its_ranks_and_the_launcher_s_leaves_byte_for_byte(tmp_path):
    node = tmp_path / "node" / "run-1"
    (node / "raw").mkdir(parents=True)
    files = {"raw/rank-00000.json": '{"loss": [2.3, 2.1]}\n', "raw/rank-00001.json": "{}",
             "job.sbatch": "#!/bin/bash\n#SBATCH --job-name=run-1\nsrun --mpi=pmix 'benchrunner' train\n"}
    for name, text in files.items():
        (node / name).write_text(text)
    # Neither the job's document nor the launcher's other output leaves the node this way.
    (node / "job.json").write_text("{}")
    (node / "raw" / "slurm-1.out").write_text("log")
    control = tmp_path / "control" / "run-1"
    written = gather.write(control, {"node1": send(node, "job.sbatch")}, ("job.sbatch",), require_leaves=True)
    assert written == sorted(files)
    assert {name: (control / name).read_bytes() for name in written} == {n: t.encode() for n, t in files.items()}


def test_a_node_without_the_run_s_folder_sends_nothing(tmp_path):
    assert send(tmp_path / "absent", "hostfile") == ""
