"""A transformer pretrained with FSDP2 through mpirun, torchrun, srun and torchrun under srun, judged in tokens/s and
in MFU against what each rank's own matmul reaches; and torch.distributed's collective sweep through torchrun. DDP
beside Horovod TensorFlow, in and out of a container, is test_site_frameworks."""

from __future__ import annotations

import pytest

from benchrunner import campaign, mfu, report, results, summary
from lab import PLACED_BY, run_campaign, run_site

# llama-tiny under FSDP2 on every launcher of both stacks, torchrun under srun included: short sequences, so a step
# takes a second on the lab.
TRANSFORMER = {
    "name": "e2e-transformer", "repeats": 1, "gpus": [2], "stacks": ["baremetal", "slurm"],
    "frameworks": ["pytorch-fsdp"],
    "launchers": {"baremetal": ["mpirun", "torchrun"], "slurm": ["srun", "torchrun"]},
    "workloads": {"model": ["llama-tiny"]},
    "fixed": {"sequence_length": 64, "batch_size": 4, "optimizer": "adamw", "weight_decay": 0.1, "warmup_steps": 2,
              "measured_steps": 6},
}


@pytest.fixture(scope="module")
def transformer_campaign(provisioned, tmp_path_factory):
    return run_campaign(TRANSFORMER, tmp_path_factory.mktemp("transformer"))


def against_the_probe(use: dict, where) -> bool:
    """Whether a rank's (or run's) MFU against the probe was given: a fraction of it, or null where the probe
    undershot. The lab's 2 cores are shared by both ranks and, in make test, the unit suite: a probe slowed more than
    the training after it gives an MFU beyond PROBE_LIMIT, which is left out with the figures (benchrunner.mfu)."""
    if use["mfu_vs_probe"] is None:
        why = use.get("mfu_vs_probe_missing") or use.get("probe_missing") or ""
        assert "the probe undershot" in why, (where, use)
        return False
    fraction = use["mfu_vs_probe"] if isinstance(use["mfu_vs_probe"], float) else use["mfu_vs_probe"]["mean"]
    assert 0 < fraction <= mfu.PROBE_LIMIT, (where, use)
    return True


def test_fsdp_pretrains_the_transformer_through_every_launcher(transformer_campaign):
    document, results_dir = transformer_campaign
    seen = set()
    given = []
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
            assert use["probe"]["tflops"] > 0, path
            given.append(against_the_probe(use, path))
    # Undershooting is the shared cores' doing, now and then; a probe that never gave an MFU would be a fault.
    assert any(given), f"no rank's MFU against the probe: {given}"
    assert seen == {("baremetal", "mpirun"), ("baremetal", "torchrun"), ("slurm", "srun"), ("slurm", "torchrun")}
    # torchrun under Slurm: srun started one agent per node from the batch script kept with the results.
    under_slurm = next(r for r in campaign.plan(document) if (r.point["stack"], r.point["launcher"]) == ("slurm", "torchrun"))
    script = (results_dir / under_slurm.run_id / "job.sbatch").read_text()
    assert "srun --nodes=2 --ntasks-per-node=1 --kill-on-bad-exit=1" in script and "--rdzv-backend=c10d" in script


def test_the_transformer_report_shows_tokens_per_second_and_mfu_against_the_probe(transformer_campaign):
    document, results_dir = transformer_campaign
    text = (results_dir / "campaigns" / "e2e-transformer" / report.REPORT_MD).read_text()
    assert "Campaign e2e-transformer: 4 runs done, 0 failed." in text
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("| workload | stack | GPUs | unit |"))
    columns = [cell.strip() for cell in header.strip("|").split("|")]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines
            if line.startswith("| pytorch-fsdp llama-tiny synthetic b4 seq64") and "| tokens/s |" in line]
    assert len(rows) == 4, text
    # A run whose MFU against the probe was left out (the probe undershot) shows "-", its page says why.
    runs = [results.load(results.SUMMARY, results_dir / r.run_id / summary.SUMMARY_JSON) for r in campaign.plan(document)]
    left_out = sum(not against_the_probe(run["utilization"], run["run_id"]) for run in runs)
    for row in rows:
        cell = dict(zip(columns, row))
        # The lab's CPUs have no datasheet peak; what their own matmul reaches is the measure.
        assert cell["MFU vs peak"] == "-", row
        assert cell["MFU vs probe"] == "-" or 0 < float(cell["MFU vs probe"].rstrip("%")) <= 100 * mfu.PROBE_LIMIT, row
    assert sum(dict(zip(columns, row))["MFU vs probe"] == "-" for row in rows) == left_out, text


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
