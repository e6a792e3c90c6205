"""PyTorch DDP beside Horovod TensorFlow on the lab, in the nodes' virtualenv and in the benchmark image under
Charliecloud, through mpirun and srun: one campaign crosses them all, each run gathered, checked and grouped by
framework in the report, which gives the container's throughput over the virtualenv's with its interval; a transformer
pretrained with FSDP2 through mpirun, torchrun, srun and torchrun under srun, judged in tokens/s and in MFU against
what each rank's own matmul reaches; and torch.distributed's collective sweep through torchrun."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import yaml

from benchrunner import campaign, report, results, summary
from lab import LAB_VARS, PROJECT, run_site

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


# llama-tiny under FSDP2 on every launcher of both stacks, torchrun under srun included: short sequences, so a step
# takes a second on the lab.
TRANSFORMER = {
    **{key: value for key, value in CAMPAIGN.items() if key != "containers"}, "name": "e2e-transformer",
    "frameworks": ["pytorch-fsdp"],
    "launchers": {"baremetal": ["mpirun", "torchrun"], "slurm": ["srun", "torchrun"]},
    "workloads": {"model": ["llama-tiny"]},
    "fixed": {"sequence_length": 64, "batch_size": 4, "optimizer": "adamw", "weight_decay": 0.1, "warmup_steps": 2,
              "measured_steps": 6},
}
PLACED_BY = {"torchrun": "torchrun", "mpirun": "openmpi", "srun": "slurm"}


def run_campaign(document: dict, folder) -> tuple[dict, object]:
    file = folder / "campaign.yml"
    file.write_text(yaml.safe_dump(document))
    results_dir = folder / "results"
    done = subprocess.run([sys.executable, "-m", "benchrunner", "campaign", str(file), "--results-dir",
                           str(results_dir)], cwd=PROJECT, capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return campaign.load(file), results_dir


@pytest.fixture(scope="module")
def containers_campaign(provisioned, benchmark_image, tmp_path_factory):
    return run_campaign(CAMPAIGN, tmp_path_factory.mktemp("containers"))


@pytest.fixture(scope="module")
def transformer_campaign(provisioned, tmp_path_factory):
    return run_campaign(TRANSFORMER, tmp_path_factory.mktemp("transformer"))


def test_both_frameworks_trained_in_the_virtualenv_and_in_the_container_under_mpirun_and_srun(containers_campaign):
    document, results_dir = containers_campaign
    seen = set()
    for run_ in campaign.plan(document):
        found = results.load(results.SUMMARY, results_dir / run_.run_id / summary.SUMMARY_JSON)
        assert found["sanity"]["passed"], (run_.run_id, found["sanity"])
        assert found["ranks"] == 2 and len(set(found["hosts"])) == 2
        seen.add((found["stack"], found["workload"]["framework"], found["launcher"], found["container"]["runtime"]))
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


def test_pytorch_ranks_record_their_framework_backend_and_launcher(containers_campaign):
    document, results_dir = containers_campaign
    for run_ in campaign.plan(document):
        if run_.point.get("framework") != "pytorch-ddp":
            continue
        for path in sorted((results_dir / run_.run_id / "raw").glob("rank-*.json")):
            rank = results.load(results.RANK_RESULT, path)
            assert rank["framework"] == "pytorch-ddp" and rank["model"]["parameters"] > 0
            torch = rank["provenance"]["torch"]
            # Where each rank read its place from: Open MPI's variables or Slurm's, in the container as outside it.
            assert (torch["backend"], torch["launched_by"]) == ("gloo", PLACED_BY[run_.point["launcher"]]), path
            assert rank["device"]["trained_on"] == "cpu"
            assert rank["provenance"]["launcher"] == run_.point["launcher"]


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


def test_fsdp_pretrains_the_transformer_through_every_launcher(transformer_campaign):
    document, results_dir = transformer_campaign
    seen = set()
    for run_ in campaign.plan(document):
        found = results.load(results.SUMMARY, results_dir / run_.run_id / summary.SUMMARY_JSON)
        assert found["sanity"]["passed"], (run_.run_id, found["sanity"])
        assert found["ranks"] == 2 and len(set(found["hosts"])) == 2
        assert found["throughput"]["unit"] == "tokens" and found["throughput"]["total_per_sec"] > 0
        seen.add((found["stack"], found["launcher"]))
        for path in sorted((results_dir / run_.run_id / "raw").glob("rank-*.json")):
            rank = results.load(results.RANK_RESULT, path)
            assert (rank["framework"], rank["model"]["kind"]) == ("pytorch-fsdp", "text")
            assert rank["provenance"]["torch"]["launched_by"] == PLACED_BY[run_.point["launcher"]], path
            steps = document["fixed"]["warmup_steps"] + document["fixed"]["measured_steps"]
            assert len(rank["losses"]) == len(rank["grad_norms"]) == steps
            assert all(norm is not None and norm > 0 for norm in rank["grad_norms"]), path
            assert rank["flops"]["formula"] == "6*N + 12*L*H*Q*T" and rank["flops"]["terms"]["T"] == 64
            use = rank["utilization"]
            # A CPU has no datasheet peak: no MFU against one, and the reason; against its own matmul there is one.
            assert use["peak"] is None and use["mfu"] is None and use["peak_missing"], path
            assert use["probe"]["tflops"] > 0 and 0 < use["mfu_vs_probe"] <= 1.05, path
    assert seen == {("baremetal", "mpirun"), ("baremetal", "torchrun"), ("slurm", "srun"), ("slurm", "torchrun")}
    # torchrun under Slurm: srun started one agent per node from the batch script kept with the results.
    under_slurm = next(r for r in campaign.plan(document) if (r.point["stack"], r.point["launcher"]) == ("slurm", "torchrun"))
    script = (results_dir / under_slurm.run_id / "job.sbatch").read_text()
    assert "srun --nodes=2 --ntasks-per-node=1 --kill-on-bad-exit=1" in script and "--rdzv-backend=c10d" in script


def test_the_transformer_report_shows_tokens_per_second_and_mfu_against_the_probe(transformer_campaign):
    _, results_dir = transformer_campaign
    text = (results_dir / "campaigns" / "e2e-transformer" / report.REPORT_MD).read_text()
    assert "Campaign e2e-transformer: 4 runs done, 0 failed." in text
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("| workload | stack | GPUs | unit |"))
    columns = [cell.strip() for cell in header.strip("|").split("|")]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines
            if line.startswith("| pytorch-fsdp llama-tiny synthetic b4 seq64") and "| tokens/s |" in line]
    assert len(rows) == 4, text
    for row in rows:
        cell = dict(zip(columns, row))
        # The lab's CPUs have no datasheet peak; what their own matmul reaches is the measure.
        assert cell["MFU vs peak"] == "-" and 0 < float(cell["MFU vs probe"].rstrip("%")) <= 105, row


def test_torch_collectives_sweep_through_torchrun(tmp_path):
    outcome = run_site(tags="benchmark", extravars={
        "benchrunner_framework": "pytorch-ddp", "benchrunner_launcher": "torchrun", "benchrunner_program": "allreduce",
        "benchrunner_allreduce": {"min_bytes": 8, "max_bytes": 65536}, "benchrunner_run_id": "e2e-torch-allreduce",
        "cluster_results_dir": str(tmp_path)})
    assert outcome.ok, outcome.failures
    sweep = results.load(results.ALLREDUCE_RESULT, tmp_path / "e2e-torch-allreduce" / "raw" / results.SWEEP_JSON)
    assert (sweep["framework"], sweep["ranks"], sweep["provenance"]["torch"]["backend"]) == ("pytorch-ddp", 2, "gloo")
    assert [p["bytes"] for p in sweep["points"]] == [8 << i for i in range(14)]
    assert all(p["busbw_bytes_per_s"] > 0 for p in sweep["points"])
    # gloo gathers; a collective it cannot run is recorded as skipped with the reason, never left out silently.
    assert set(sweep["collectives"]) == {"all_gather", "reduce_scatter"}
    for name, found in sweep["collectives"].items():
        assert "points" in found or found["skipped"], name
