"""Horovod TensorFlow and PyTorch DDP on the lab in the nodes' virtualenv and in the benchmark image under
Charliecloud, through mpirun and srun: one campaign crosses them all, each rank checked to run where it says, and the
report gives the container's throughput over the virtualenv's with its interval.

Eight runs and the image's conversion: about 9 minutes on 2 cores, which `make test` cannot add within CI's 90 minutes
on this machine, so `make e2e` leaves these out (marker `containers`) and `make e2e-containers` runs them."""

from __future__ import annotations

import re

import pytest

from benchrunner import campaign, report, results, summary
from lab import LAB_VARS, run_campaign, two_rank_summaries

pytestmark = pytest.mark.containers

# Both frameworks, in the nodes' virtualenv and in the benchmark image under Charliecloud, through mpirun and through
# srun: every launcher places torch's ranks in the transformer campaign below (DDP and FSDP read their place through
# the same code). The smallest window whose runs each still have an interval (6 measured steps: 3 batch means).
CAMPAIGN = {
    "name": "e2e-containers",
    "repeats": 1,
    "gpus": [2],
    "stacks": ["baremetal", "slurm"],
    "frameworks": ["tensorflow-horovod", "pytorch-ddp"],
    "containers": ["none", "charliecloud"],
    "launchers": {"baremetal": ["mpirun"], "slurm": ["srun"]},
    "workloads": {"model": ["small_cnn"]},
    "fixed": {"image_size": 32, "batch_size": 16, "warmup_steps": 2, "measured_steps": 6},
}


@pytest.fixture(scope="module")
def containers_campaign(provisioned, benchmark_image, tmp_path_factory):
    return run_campaign(CAMPAIGN, tmp_path_factory.mktemp("containers"))


def test_both_frameworks_trained_in_the_virtualenv_and_in_the_container_under_mpirun_and_srun(containers_campaign):
    seen = {(found["stack"], found["workload"]["framework"], found["launcher"], found["container"]["runtime"])
            for found in two_rank_summaries(*containers_campaign)}
    assert seen == {(stack, framework, launcher, container) for stack, launcher in (("baremetal", "mpirun"), ("slurm", "srun"))
                    for framework in ("tensorflow-horovod", "pytorch-ddp") for container in ("none", "charliecloud")}


def test_every_rank_records_its_container(containers_campaign):
    document, results_dir = containers_campaign
    for run_ in campaign.plan(document):
        found = results.load(results.SUMMARY, results_dir / run_.run_id / summary.SUMMARY_JSON)
        ranks = [results.load(results.RANK_RESULT, path)
                 for path in sorted((results_dir / run_.run_id / "raw").glob("rank-*.json"))]
        assert len(ranks) == 2, run_.run_id
        for rank in ranks:
            # A rank records its container in its provenance, beside its launcher.
            container = rank["provenance"]["container"]
            assert container["runtime"] == campaign.container(run_.point) and container == found["container"], run_.run_id
            if container["runtime"] == "none":
                assert container == {"runtime": "none"}, run_.run_id
                continue
            # The image the role put on the lab's shared folder, checked against the control host's digest on each node.
            image_dir = LAB_VARS["benchrunner_container_image_dir"]
            assert container["image"].startswith(f"{image_dir}/") and container["image"].endswith(".sqfs"), container
            assert re.fullmatch(r"sha256:[0-9a-f]{64}", container["digest"]), container
            assert isinstance(container["mounts"], list), container


def test_the_campaign_report_shows_the_container_over_the_virtualenv_with_its_interval(containers_campaign):
    _, results_dir = containers_campaign
    text = (results_dir / "campaigns" / "e2e-containers" / report.REPORT_MD).read_text()
    assert "Campaign e2e-containers: 8 runs done, 0 failed." in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and "b16 32px" in line]
    # The founding framework's rows keep their old names; PyTorch's are named for it.
    assert any(row.startswith("| small_cnn synthetic b16 32px") for row in rows), text
    assert any(row.startswith("| pytorch-ddp small_cnn synthetic b16 32px") for row in rows), text
    # Different frameworks are never one figure, nor a ratio, unless pooled on purpose.
    assert not any("tensorflow-horovod" in row and "pytorch-ddp" in row for row in rows)
    # One container/virtualenv ratio per framework and launcher, each with an interval from its runs' batch means
    # (one run a side), labelled so rather than taken for one over repeats.
    ratios = [row for row in rows if "charliecloud" in row and "none" in row]
    assert len(ratios) == 4, text
    assert all(re.search(r"\| \+/- \d+\.\d+ \(batch means, 1 run\) \|", row) for row in ratios), ratios
