"""Horovod TensorFlow and PyTorch DDP side by side on the lab, in the nodes' virtualenv and in the benchmark image
under Charliecloud, through mpirun and srun: one campaign crosses them all, each rank checked to run where it says,
and the report keeps the frameworks apart and gives the container's throughput over the virtualenv's with its
interval."""

from __future__ import annotations

import re

import pytest

from benchrunner import campaign, report, results, summary
from lab import LAB_VARS, PLACED_BY, run_campaign, two_rank_summaries

# Both frameworks through mpirun and srun: every launcher places torch's ranks in the transformer campaign
# (test_site_pytorch; DDP and FSDP read their place through the same code), so these two carry the container axis.
# The smallest window whose runs each still have an interval (6 measured steps: 3 batch means).
CAMPAIGN = {
    "name": "e2e-frameworks",
    "repeats": 1,
    "gpus": [2],
    "stacks": ["baremetal", "slurm"],
    "frameworks": ["tensorflow-horovod", "pytorch-ddp"],
    "containers": ["none", "charliecloud"],
    "launchers": {"baremetal": ["mpirun"], "slurm": ["srun"]},
    "workloads": {"model": ["small_cnn"]},
    "fixed": {"image_size": 32, "batch_size": 16, "warmup_steps": 2, "measured_steps": 6},
}
LAUNCHERS = (("baremetal", "mpirun"), ("slurm", "srun"))
FRAMEWORKS = ("tensorflow-horovod", "pytorch-ddp")


@pytest.fixture(scope="module")
def frameworks_campaign(provisioned, benchmark_image, tmp_path_factory):
    return run_campaign(CAMPAIGN, tmp_path_factory.mktemp("frameworks"))


def test_both_frameworks_trained_in_the_virtualenv_and_in_the_container_under_mpirun_and_srun(frameworks_campaign):
    seen = {(found["stack"], found["workload"]["framework"], found["launcher"], found["container"]["runtime"])
            for found in two_rank_summaries(*frameworks_campaign)}
    assert seen == {(stack, framework, launcher, container) for stack, launcher in LAUNCHERS
                    for framework in FRAMEWORKS for container in ("none", "charliecloud")}


def test_every_rank_records_its_framework_launcher_and_container(frameworks_campaign):
    document, results_dir = frameworks_campaign
    for run_ in campaign.plan(document):
        found = results.load(results.SUMMARY, results_dir / run_.run_id / summary.SUMMARY_JSON)
        ranks = [results.load(results.RANK_RESULT, path)
                 for path in sorted((results_dir / run_.run_id / "raw").glob("rank-*.json"))]
        assert len(ranks) == 2, run_.run_id
        for rank in ranks:
            assert rank["provenance"]["launcher"] == run_.point["launcher"], run_.run_id
            if campaign.framework(run_.point) == "pytorch-ddp":
                assert rank["framework"] == "pytorch-ddp" and rank["model"]["parameters"] > 0
                torch = rank["provenance"]["torch"]
                # Where each rank read its place from: Open MPI's variables or Slurm's, in the container as out of it.
                assert (torch["backend"], torch["launched_by"]) == ("gloo", PLACED_BY[run_.point["launcher"]]), run_.run_id
                assert rank["device"]["trained_on"] == "cpu"
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


def test_the_report_keeps_frameworks_apart_and_shows_the_container_over_the_virtualenv(frameworks_campaign):
    _, results_dir = frameworks_campaign
    text = (results_dir / "campaigns" / "e2e-frameworks" / report.REPORT_MD).read_text()
    assert "Campaign e2e-frameworks: 8 runs done, 0 failed." in text
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
