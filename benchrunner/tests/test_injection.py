"""Values that reach a batch script, hostfile or command line arrive as data or are refused: the generated script is
run with stubbed Slurm commands, and nothing the values smuggle in runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import benchrunner
from benchrunner import cli, launchers, watchdog
from benchrunner.launchers import srun
from benchrunner.workload import Workload

SRC = str(Path(benchrunner.__file__).resolve().parents[1])
BENCHRUNNER = str(Path(sys.executable).with_name("benchrunner"))
LIMITS = watchdog.Limits(timeout_s=3600, stall_timeout_s=300)
HOSTILE_VALUES = {
    "QUOTES": "it's \"quoted\" 'twice'",
    "SUBSHELL": "$(touch {marker}) `touch {marker}`",
    "NEWLINES": "first\nsecond\n; touch {marker}\n",
    "BOOLEAN": "true",
    "NUMBERS": "007",
    "EXPONENT": "1e3",
    "NULL": "null",
}


def srun_stub(folder) -> None:
    """An srun that records its argv and the environment the batch script exported, as JSON."""
    stub = folder / "srun"
    names = json.dumps(sorted(HOSTILE_VALUES))
    stub.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                    f"json.dump({{'argv': sys.argv[1:], 'env': {{n: os.environ.get(n) for n in {names}}}}},"
                    f" open({str(folder / 'srun.json')!r}, 'w'))\n")
    stub.chmod(0o755)


def test_hostile_env_values_reach_the_ranks_exactly_and_run_nothing(tmp_path):
    marker = tmp_path / "INJECTED"
    values = {name: value.format(marker=marker) for name, value in HOSTILE_VALUES.items()}
    job = launchers.Job(run_id="r1", output_dir=str(tmp_path / "raw"), ranks=1, stack="slurm", launcher="srun",
                        env=tuple(sorted(values.items())), workload=Workload(), benchrunner=BENCHRUNNER)
    script = tmp_path / "job.sbatch"
    script.write_text(srun.script(job, LIMITS, partition="debug"))
    srun_stub(tmp_path)
    # srun runs under the watchdog (`benchrunner watch`), this checkout's.
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "PYTHONPATH": SRC}
    subprocess.run(["bash", str(script)], check=True, env=env, cwd=tmp_path)
    recorded = json.loads((tmp_path / "srun.json").read_text())
    assert recorded["env"] == values
    assert recorded["argv"][:3] == ["--mpi=pmix", "--kill-on-bad-exit=1", BENCHRUNNER]
    assert not marker.exists()


def test_env_values_from_the_command_line_are_not_retyped(capsys):
    argv = ["launch", "--dry-run", "--launcher", "srun", "--stack", "slurm", "--run-id", "r1", "--results-dir", "/o",
            "--ranks", "1", *[arg for name, value in HOSTILE_VALUES.items() if "\n" not in value
                              for arg in ("--env", f"{name}={value}")]]
    assert cli.main(argv) == 0
    script = capsys.readouterr().out
    for name in ("BOOLEAN", "NUMBERS", "EXPONENT", "NULL"):
        assert f"export {name}={HOSTILE_VALUES[name]}\n" in script


@pytest.mark.parametrize(("change", "refusal"), [
    ({"run_id": "r1\ntouch /tmp/x"}, "run id 'r1\\ntouch /tmp/x' must be 1 to 128 letters"),
    ({"run_id": "latest"}, "run id 'latest' is reserved"),
    ({"run_id": "campaigns"}, "run id 'campaigns' is reserved"),
    ({"run_id": ""}, "run id '' must be"),
    ({"run_id": "a/b"}, "run id 'a/b' must be"),
    ({"output_dir": "/o\n#SBATCH --uid=0"}, "output dir '/o\\n#SBATCH --uid=0' must be an absolute path"),
    ({"output_dir": "relative/raw"}, "output dir 'relative/raw' must be an absolute path"),
    ({"hosts": ("gpu1\ngpu2 slots=64",)}, "host 'gpu1\\ngpu2 slots=64' is not a hostname"),
    ({"hosts": ("gpu1;reboot",)}, "host 'gpu1;reboot' is not a hostname"),
    ({"env": (("A;touch /tmp/x", "1"),)}, "environment variable name 'A;touch /tmp/x' is not a shell name"),
    ({"env": (("A", 1),)}, "environment variable A must be a string without NUL (got 1)"),
    ({"git_commit": "abc\nrm -rf /"}, "git commit 'abc\\nrm -rf /' is not what git describe prints"),
])
def test_values_that_would_change_a_script_or_hostfile_are_refused(change, refusal):
    settings = {"run_id": "r1", "output_dir": "/o", "ranks": 1, "stack": "slurm", "launcher": "srun", **change}
    with pytest.raises(ValueError) as refused:
        srun.script(launchers.Job(**settings), LIMITS)
    assert refusal in str(refused.value)
    with pytest.raises(ValueError):
        launchers.hostfile(launchers.Job(**{**settings, "stack": "baremetal", "launcher": "mpirun",
                                            "hosts": settings.get("hosts", ("gpu1",))}))


@pytest.mark.parametrize(("partition", "mpi"), [("debug\n#SBATCH --uid=0", "pmix"), ("gpu;id", "pmix"),
                                                 ("debug", "pmix\nid")])
def test_a_partition_or_mpi_plugin_that_is_not_a_name_is_refused(partition, mpi):
    job = launchers.Job(run_id="r1", output_dir="/o", ranks=1, stack="slurm", launcher="srun")
    with pytest.raises(ValueError, match=r"is not a (partition|plugin) name"):
        srun.script(job, LIMITS, partition=partition, mpi=mpi)
