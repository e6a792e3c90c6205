"""benchrunner's results of one rank on a real NVIDIA H100 (fixtures/gpu-h100-20261124/README.md): summarized here as
on the control host, each run passes its checks, names how it was started and where its start-up went."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchrunner import results, summary

H100 = Path(__file__).parent / "fixtures" / "gpu-h100-20261124"
# Run folder: (launcher, the variables its rank found, precision, compiled, images/s as the rank measured it).
TRAINED = {
    "mpirun-mixed-bs256": ("mpirun", "openmpi", "mixed_float16", False, 4328.4),
    "torchrun-bf16-bs256": ("torchrun", "torchrun", "mixed_bfloat16", False, 3672.4),
    "torchrun-compile-mixed-bs256": ("torchrun", "torchrun", "mixed_float16", True, 4633.3),
    "record-resnet50-mixed_float16-bs256": ("torchrun", "torchrun", "mixed_float16", False, 4280.2),
    "record-resnet50-fp32-bs256": ("torchrun", "torchrun", "fp32", False, 2384.0),
}


def copied(tmp_path: Path, name: str) -> Path:
    return Path(shutil.copytree(H100 / name, tmp_path / name))


@pytest.mark.parametrize("name", TRAINED)
def test_each_h100_run_passes_its_checks_on_the_gpu_it_asked_for(tmp_path, name):
    launcher, launched_by, precision, compiled, images_per_sec = TRAINED[name]
    document = summary.write(copied(tmp_path, name))
    assert document["sanity"]["passed"], document["sanity"]
    checks = {c["name"]: c["detail"] for c in document["sanity"]["checks"]}
    assert checks["trained where asked"] == "every rank on its GPU"
    assert round(document["throughput"]["total_per_sec"], 1) == images_per_sec and document["throughput"]["unit"] == "images"
    prov = document["provenance"]
    assert (prov["launcher"], prov["torch"]["launched_by"], prov["torch"]["compiled"]) == (launcher, launched_by,
                                                                                            compiled)
    assert (prov["gpus"], prov["nvidia_driver"], prov["torch"]["backend"]) == (["NVIDIA H100 80GB HBM3"],
                                                                               "580.159.04", "nccl")
    assert document["workload"]["precision"] == precision


def test_the_start_up_is_told_by_stage_in_order(tmp_path):
    run = copied(tmp_path, "mpirun-mixed-bs256")
    document = summary.write(run)
    stages = document["startup_s"]
    in_order = [stages[stage] for stage in summary.STARTUP_WORDS]
    assert in_order == sorted(in_order)
    assert stages["first_step"] == pytest.approx(document["time_to_first_step_s"])
    assert ("time to first step: 17.6 s (process started 0.9, framework imported 5.5, ranks joined 5.6, "
            "model and input ready 12.9, first step done 17.6)") in (run / "report.md").read_text()


def test_an_h100_rank_that_trained_on_the_cpu_fails_the_run(tmp_path):
    # Derived: the mpirun run's rank as if CUDA had not been usable there.
    run = copied(tmp_path, "mpirun-mixed-bs256")
    rank_file = run / "raw" / "rank-00000.json"
    rank = json.loads(rank_file.read_text())
    rank["device"] = {**rank["device"], "trained_on": "cpu", "gpus_visible": 0}
    rank_file.write_text(json.dumps(rank))
    document = summary.summarize(run)
    assert document["sanity"]["passed"] is False
    failed = {c["name"]: c["detail"] for c in document["sanity"]["checks"] if not c["passed"]}
    assert failed == {"trained where asked": "rank 0 on vm trained on cpu though the job asked for a GPU: pytorch-ddp "
                                             "saw 0 GPU(s) (built with CUDA 13.0, cuDNN 91900)"}


def test_the_one_rank_nccl_sweep_reads_and_moves_no_bytes_between_ranks(tmp_path):
    run = copied(tmp_path, "torchrun-allreduce")
    sweep = results.load(results.ALLREDUCE_RESULT, run / "raw" / results.SWEEP_JSON)
    assert (sweep["ranks"], sweep["provenance"]["torch"]["backend"]) == (1, "nccl")
    assert [p["bytes"] for p in sweep["points"]] == [2 ** n for n in range(3, 31)]
    # One rank: an allreduce is a local copy, so the bus carries nothing (nccl-tests' factor 2(n-1)/n is 0).
    assert {p["busbw_bytes_per_s"] for p in sweep["points"]} == {0.0}
    summary.write_sweep(run)
    assert ("largest message (1 GiB): busbw 0.000 GB/s: one rank, so no data crosses between ranks and the algorithm "
            "bandwidth is a copy within the rank; run two or more to measure a link") in (run / "report.md").read_text()
