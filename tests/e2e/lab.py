"""Running site.yml on the lab through ansible-runner, as an automation would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from benchrunner import campaign, playbooks, results, summary

PROJECT = Path(__file__).resolve().parents[2]
LAB_INVENTORY = PROJECT / "inventory" / "lab" / "hosts.yml"
# The settings the lab's inventory gives every host (benchrunner_image, where container images go on the nodes).
LAB_VARS = yaml.safe_load((PROJECT / "inventory" / "lab" / "group_vars" / "all.yml").read_text())


def run_site(**kwargs) -> playbooks.Outcome:
    """A playbook of the project (site.yml unless playbook= says otherwise), events recorded, nothing printed."""
    return playbooks.run(PROJECT, progress=playbooks.Progress(out=None), **kwargs)


def lab_node_names() -> list[str]:
    inventory = yaml.safe_load(LAB_INVENTORY.read_text())
    return sorted(inventory["all"]["children"]["nodes"]["hosts"])




# Whose variables a torch rank reads its place from, by the launcher that started it.
PLACED_BY = {"torchrun": "torchrun", "mpirun": "openmpi", "srun": "slurm"}


def run_campaign(document: dict, folder: Path) -> tuple[dict, Path]:
    """A campaign run by `benchrunner campaign` from the control host, as a user runs it: its document and results."""
    file = folder / "campaign.yml"
    file.write_text(yaml.safe_dump(document))
    results_dir = folder / "results"
    done = subprocess.run([sys.executable, "-m", "benchrunner", "campaign", str(file), "--results-dir",
                           str(results_dir)], cwd=PROJECT, capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return campaign.load(file), results_dir


def two_rank_summaries(document: dict, results_dir: Path) -> list[dict]:
    """Each planned run's summary, in plan order, each passing its checks with two ranks on two hosts."""
    found = []
    for run_ in campaign.plan(document):
        run_summary = results.load(results.SUMMARY, results_dir / run_.run_id / summary.SUMMARY_JSON)
        assert run_summary["sanity"]["passed"], (run_.run_id, run_summary["sanity"])
        assert run_summary["ranks"] == 2 and len(set(run_summary["hosts"])) == 2, run_.run_id
        found.append(run_summary)
    return found
