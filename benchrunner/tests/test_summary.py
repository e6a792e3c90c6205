import json
import math
import shutil
from pathlib import Path

import pytest

from benchrunner import cli, job_document, peaks, results, summary
from benchrunner import workload as workload_module
from documents import H100_SXM, allreduce_document, as_v2, rank_document, text_rank_document


def checks_by_name(document):
    return {c["name"]: c for c in document["sanity"]["checks"]}


def test_total_is_the_sum_of_every_rank(run_dir, make_rank):
    slow = make_rank(1, step_times=[0.2, 0.2, 0.2, 0.2])
    document = summary.summarize(run_dir(make_rank(0), slow))
    per_rank = [r["samples_per_sec"] for r in document["throughput"]["per_rank"]]
    assert per_rank == pytest.approx([320.0, 160.0])
    assert document["throughput"]["total_per_sec"] == pytest.approx(480.0)
    assert document["ranks"] == 2
    assert document["hosts"] == ["node1", "node2"]


def test_elapsed_and_first_step_come_from_the_slowest_rank(run_dir, make_rank):
    document = summary.summarize(run_dir(make_rank(0), make_rank(1)))
    assert document["elapsed_s"] == pytest.approx(11.0)  # launch at 1000, last rank done at 1011
    assert document["time_to_first_step_s"] == 5.0


def test_clean_run_passes_sanity(run_dir, make_rank):
    document = summary.summarize(run_dir(make_rank(0), make_rank(1)))
    assert document["sanity"]["passed"] is True
    results.validate(results.SUMMARY, document)


def test_missing_rank_fails_sanity(run_dir, make_rank):
    document = summary.summarize(run_dir(make_rank(0, size=3), make_rank(1, size=3)))
    check = checks_by_name(document)["all ranks reported"]
    assert check["passed"] is False
    assert check["detail"] == "expected ranks 0..2, got [0, 1]"
    assert document["sanity"]["passed"] is False


def test_ranks_of_two_different_jobs_fail_sanity(run_dir, make_rank):
    # Two single-rank jobs that wrote into one folder each say rank 0 of 1; two ranks of a 2-rank job agree.
    document = summary.summarize(run_dir(make_rank(0, size=2), make_rank(1, size=3)))
    assert checks_by_name(document)["ranks agree on the job size"] == {
        "name": "ranks agree on the job size", "passed": False, "detail": "job sizes [2, 3]"}
    assert document["sanity"]["passed"] is False


def test_non_finite_loss_fails_sanity_naming_rank_and_step(run_dir, make_rank):
    document = summary.summarize(run_dir(make_rank(0), make_rank(1, losses=[2.3, None, 2.1])))
    assert checks_by_name(document)["loss is finite"] == {
        "name": "loss is finite", "passed": False, "detail": "non-finite loss on rank 1 at step 1"}


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_a_non_finite_number_is_never_written_as_json(tmp_path, value):
    document = {**rank_document(), "losses": [2.3, value]}
    with pytest.raises(results.ResultError, match=r"not JSON.*non-finite number cannot be written"):
        results.save(results.RANK_RESULT, document, tmp_path / "rank-0.json")
    assert not (tmp_path / "rank-0.json").exists()


@pytest.mark.parametrize("constant", ["Infinity", "-Infinity", "NaN"])
def test_a_result_holding_infinity_or_nan_is_refused_on_load(tmp_path, constant):
    path = tmp_path / "rank-0.json"
    text = results.dumps(rank_document())
    path.write_text(text.replace('"losses": [', f'"losses": [{constant}, ', 1))
    with pytest.raises(results.ResultError, match=f"not JSON: {constant} is not JSON"):
        results.load(results.RANK_RESULT, path)


def test_ranks_disagreeing_on_steps_fail_sanity(run_dir, make_rank):
    document = summary.summarize(run_dir(make_rank(0), make_rank(1, step_times=[0.1, 0.1])))
    assert checks_by_name(document)["ranks agree on measured step count"]["passed"] is False


def test_ranks_of_different_runs_fail_sanity(run_dir, make_rank):
    document = summary.summarize(run_dir(make_rank(0), make_rank(1, run_id="other")))
    assert checks_by_name(document)["one run id"]["passed"] is False


def test_empty_run_folder_is_an_error(tmp_path):
    with pytest.raises(results.ResultError, match="no rank-"):
        summary.summarize(tmp_path)


def test_write_produces_files_and_moves_latest(run_dir, make_rank):
    first = run_dir(make_rank(0), make_rank(1))
    summary.write(first)
    assert results.load(results.SUMMARY, first / "summary.json")["run_id"] == "run-1"
    markdown = (first / "report.md").read_text()
    assert "| total |  | 640.0 |  |  |" in markdown
    assert (first / "report.html").read_text().count("data:image/png;base64,") == 1
    assert (first / "plots" / "loss.png").read_bytes().startswith(b"\x89PNG")
    assert "| horovod | 0.28.1 |" in markdown
    assert (first.parent / "latest").resolve() == first

    second = run_dir(make_rank(0, run_id="run-2"), make_rank(1, run_id="run-2"))
    summary.write(second)
    assert (second.parent / "latest").resolve() == second
    assert not [p for p in second.parent.iterdir() if p.name.startswith(".latest")]



@pytest.mark.parametrize("name", results.RESERVED_RUN_IDS)
def test_a_run_folder_with_a_reserved_name_is_refused_before_anything_is_written(run_dir, make_rank, capsys, name):
    folder = run_dir(make_rank(0), make_rank(1))
    reserved = folder.rename(folder.parent / name)
    before = sorted(p.relative_to(reserved.parent) for p in reserved.parent.rglob("*"))
    assert cli.main(["summarize", str(reserved)]) == 2
    err = capsys.readouterr().err
    assert f"{reserved}: '{name}' is reserved for the results folder's own {name}" in err, err
    assert "rename the folder to its run id" in err and len(err.splitlines()) == 1
    assert sorted(p.relative_to(reserved.parent) for p in reserved.parent.rglob("*")) == before


def test_a_run_beside_a_latest_that_is_no_link_is_refused_before_anything_is_written(run_dir, make_rank, capsys):
    folder = run_dir(make_rank(0), make_rank(1))
    (folder.parent / "latest").mkdir()
    assert cli.main(["summarize", str(folder)]) == 2
    assert f"{folder.parent / 'latest'}: not the link to the latest run but a folder" in capsys.readouterr().err
    assert sorted(p.name for p in folder.iterdir()) == ["raw"]


def test_a_latest_link_that_cannot_be_replaced_leaves_no_temporary_link(run_dir, make_rank):
    folder = run_dir(make_rank(0), make_rank(1))
    (folder.parent / "latest").mkdir()
    with pytest.raises(IsADirectoryError):
        summary.point_latest(folder)
    assert sorted(p.name for p in folder.parent.iterdir()) == ["latest", "run-1"]

def test_markdown_names_failed_checks(run_dir, make_rank):
    document = summary.summarize(run_dir(make_rank(0, size=3), make_rank(1, size=3)))
    assert "sanity: FAILED: expected ranks 0..2, got [0, 1]" in summary.render_markdown(document)


def test_a_rank_that_asked_for_a_gpu_and_trained_on_the_cpu_fails_sanity(run_dir, make_rank):
    on_gpu = {"asked_gpu": True, "trained_on": "/job:localhost/replica:0/task:0/device:GPU:0", "gpus_visible": 1}
    on_cpu = {"asked_gpu": True, "trained_on": "/job:localhost/replica:0/task:0/device:CPU:0", "gpus_visible": 0}
    first, second = make_rank(0), make_rank(1)
    first["device"], second["device"] = on_gpu, on_cpu
    document = summary.summarize(run_dir(first, second))
    check = checks_by_name(document)["trained where asked"]
    assert check["passed"] is False
    assert check["detail"] == ("rank 1 on node2 trained on /job:localhost/replica:0/task:0/device:CPU:0 though the job "
                               "asked for a GPU: tensorflow-horovod saw 0 GPU(s) (built with CUDA 12.2, cuDNN 8)")
    assert document["sanity"]["passed"] is False


def test_ranks_on_their_gpus_and_cpu_runs_pass_the_device_check(run_dir, make_rank):
    assert checks_by_name(summary.summarize(run_dir(make_rank(0), make_rank(1))))["trained where asked"] == {
        "name": "trained where asked", "passed": True, "detail": "CPU run: no GPU asked for"}


def test_the_run_page_shows_the_window_the_spread_and_an_interval_over_batch_means(run_dir, make_rank):
    directory = run_dir(make_rank(0, step_times=[0.1, 0.12, 0.1, 0.12]), make_rank(1))
    document = summary.write(directory)
    markdown = (directory / "report.md").read_text()
    # The rank documents measured 4 steps after 2 warmup: shorter than the peers' 100.
    # Launched at 1000, first step done 4 s later, measured window from 1009.6 (finished 1010 after 0.4 s).
    assert ("window: 2 warmup steps (5.6 s after the first step), then 4 measured steps in 0.4 s; SHORT: the peers "
            "measure 100 steps") in markdown
    assert "| 0 | node1 | 290.9 | 0.1100 | 0.0115 | 10.5% | 0.1100 - 0.1100 (2 batches) |" in markdown
    batches = document["throughput"]["per_rank"][0]["step_time_batch_means_s"]
    assert (batches["n"], batches["mean"]) == (2, pytest.approx(0.11))


def real_data_ranks(make_rank, waits0, waits1):
    return [make_rank(0, input_waits=waits0, data="tfrecord", data_dir="/data/cxr"),
            make_rank(1, input_waits=waits1, data="tfrecord", data_dir="/data/cxr")]


@pytest.mark.parametrize(("waits", "classification", "bound"), [
    ([0.03, 0.033, 0.027, 0.03], "input-bound", True),          # 30% of the 0.40 s of steps
    ([0.01, 0.01, 0.01, 0.01], "moderately input-bound", False),  # 10%
    ([0.001, 0.001, 0.001, 0.001], "not input-bound", False),     # 1%
])
def test_a_real_data_run_says_whether_it_was_input_bound_by_the_rank_that_waited_most(
        run_dir, make_rank, waits, classification, bound):
    directory = run_dir(*real_data_ranks(make_rank, [0.0001] * 4, waits))
    document = summary.write(directory)
    figures = document["input"]
    assert (figures["classification"], figures["input_bound"], figures["worst_rank"]) == (classification, bound, 1)
    assert figures["wait_fraction"] == pytest.approx(sum(waits) / 0.40)
    markdown = (directory / "report.md").read_text()
    assert f"input: {classification}: rank 1 waited for its input {100 * sum(waits) / 0.4:.1f}% of its step time" in markdown
    assert "## Input wait" in markdown
    assert f"| 1 | node2 | {sum(waits):.3f} | {100 * sum(waits) / 0.4:.1f}% |" in markdown


def test_a_synthetic_run_says_it_has_no_input_pipeline(run_dir, make_rank):
    directory = run_dir(make_rank(0), make_rank(1))
    document = summary.write(directory)
    assert document["input"]["input_bound"] is None and document["input"]["pipeline"] is False
    markdown = (directory / "report.md").read_text()
    assert "input: synthetic: no input pipeline (input wait 0.00% of step time)" in markdown
    assert "Input wait" not in markdown


def test_results_made_before_input_wait_and_the_new_settings_still_summarize(run_dir, make_rank):
    ranks = [as_v2(rank) for rank in real_data_ranks(make_rank, None, None)]
    for rank in ranks:
        del rank["input_wait_s"], rank["metrics"]["input_wait"], rank["framework"]
        for key in workload_module.BEFORE_RECORDED:
            del rank["workload"][key]
    document = summary.write(run_dir(*ranks))
    assert document["input"]["verdict"] == ("input wait not recorded by rank(s) 0, 1 (results made before "
                                            "benchrunner measured it)")
    assert document["input"]["input_bound"] is None
    # What benchrunner trained with then, so the report compares it with newer runs on every setting.
    assert (document["workload"]["optimizer"], document["workload"]["momentum"]) == ("sgd", 0.9)


def test_the_run_page_names_the_optimizer_the_schedule_and_the_pipeline(run_dir, make_rank):
    peer = {"preset": "horovod_synthetic", "momentum": 0.0, "lr_scaling": "none"}
    directory = run_dir(make_rank(0, **peer), make_rank(1, **peer))
    summary.write(directory)
    assert ("training: SGD, momentum 0, learning rate 0.01 (not scaled by ranks), constant (preset horovod_synthetic)"
            in (directory / "report.md").read_text())
    real = {"data": "images", "data_dir": "/d", "cache": "/scratch", "num_parallel_calls": 4, "optimizer": "adam",
            "lr_schedule": "cosine", "lr_warmup_steps": 1}
    directory = run_dir(make_rank(0, run_id="run-2", **real), make_rank(1, run_id="run-2", **real))
    summary.write(directory)
    markdown = (directory / "report.md").read_text()
    assert "training: Adam, beta_1 0.9, learning rate 0.01 x ranks, cosine, 1 steps' warmup" in markdown
    assert "; pipeline: cache /scratch, prefetch to device no, parallel calls 4\n" in markdown


def test_two_ranks_on_one_machine_fail_sanity_naming_ranks_and_machine(run_dir, make_rank):
    # Two inventory names for one machine: two hostnames, one machine-id, and the launcher placed one rank per node.
    shared = "ab" * 16
    document = summary.summarize(run_dir(make_rank(0, machine=shared), make_rank(1, machine=shared)))
    check = checks_by_name(document)["ranks on machines of their own"]
    assert check == {"name": "ranks on machines of their own", "passed": False,
                     "detail": f"ranks 0, 1 ran on one machine (machine-id {shared}, hostname node1, node2) though the "
                               "launcher placed 1 rank(s) per node"}
    assert document["sanity"]["passed"] is False
    assert len(document["nodes"]) == 1 and document["nodes"][0]["hosts"] == ["node1", "node2"]


def test_ranks_on_machines_of_their_own_or_placed_together_pass(run_dir, make_rank):
    assert checks_by_name(summary.summarize(run_dir(make_rank(0), make_rank(1))))["ranks on machines of their own"] == {
        "name": "ranks on machines of their own", "passed": True, "detail": "2 ranks on 2 machines, as placed"}
    together = [make_rank(rank, machine="cd" * 16) for rank in (0, 1)]
    for document in together:
        document["local_size"] = 2  # the launcher put both ranks on one node (two GPUs per node)
    assert checks_by_name(summary.summarize(run_dir(*together)))["ranks on machines of their own"]["passed"]


def test_a_rank_without_a_machine_id_fails_sanity_rather_than_passing_unchecked(run_dir, make_rank):
    blind = make_rank(1)
    blind["provenance"]["machine_id"] = None
    check = checks_by_name(summary.summarize(run_dir(make_rank(0), blind)))["ranks on machines of their own"]
    assert check["passed"] is False
    assert check["detail"].startswith("rank 1 recorded no machine-id (/etc/machine-id absent, empty or not an ID")


def test_on_kubernetes_the_node_name_tells_machines_apart_not_the_images_machine_id(run_dir, make_rank):
    image_id = "ef" * 16  # every pod of one image holds the image's /etc/machine-id
    pods = [make_rank(rank, stack="k8s", machine=image_id) for rank in (0, 1)]
    assert checks_by_name(summary.summarize(run_dir(*pods)))["ranks on machines of their own"]["passed"]
    pods[1]["provenance"]["node_name"] = "k8s-node1"
    check = checks_by_name(summary.summarize(run_dir(*pods)))["ranks on machines of their own"]
    assert check["detail"] == ("ranks 0, 1 ran on one machine (Kubernetes node k8s-node1, hostname node1, node2) "
                               "though the launcher placed 1 rank(s) per node")
    pods[1]["provenance"]["node_name"] = None
    check = checks_by_name(summary.summarize(run_dir(*pods)))["ranks on machines of their own"]
    assert check["passed"] is False
    assert "rank 1 recorded no Kubernetes node (set BENCHRUNNER_NODE_NAME from the pod's spec.nodeName)" in check["detail"]


LAB = Path(__file__).parent / "fixtures" / "lab-results"


def test_lab_ranks_recorded_before_machine_ids_fail_the_machine_check_loudly(tmp_path):
    # Real rank results from the lab (make demo, 2026-11-23), made before ranks recorded their machine.
    run = tmp_path / "20261123T123732Z-slurm"
    shutil.copytree(LAB / run.name, run)
    document = summary.summarize(run)
    check = checks_by_name(document)["ranks on machines of their own"]
    assert check["passed"] is False
    assert check["detail"].startswith("rank 0, 1 recorded no machine-id")
    assert {c["name"] for c in document["sanity"]["checks"] if not c["passed"]} == {"ranks on machines of their own"}
    # What the lab recorded is on the page: two nodes of the lab's CPU, no GPU.
    assert summary.hardware_line(document) == ("hardware per node (2 nodes): Intel(R) Xeon(R) Processor "
                                               "(2 logical CPUs), memory not recorded, no GPU")


def write_run(run_dir, make_rank, run_id, launched_at, step):
    ranks = [make_rank(rank, run_id=run_id, step_times=[step] * 4) for rank in (0, 1)]
    for document in ranks:
        document["metrics"]["launched_at"] = launched_at
    directory = run_dir(*ranks)
    summary.write(directory)
    return directory


def test_the_run_page_shows_date_hardware_spread_and_the_previous_run_of_the_same_point(run_dir, make_rank):
    # 2026-11-22 and 2026-11-23 runs of one point, a later one of another point (other batch size), in one folder.
    write_run(run_dir, make_rank, "older", 1795350000.0, 0.125)
    other = [make_rank(rank, run_id="other", batch_size=64) for rank in (0, 1)]
    summary.write(run_dir(*other))
    directory = write_run(run_dir, make_rank, "newer", 1795437454.0, 0.100)
    (directory / "job.json").write_text(json.dumps(job_document.resolve(
        {"kind": "job", "schema_version": 1, "run_id": "newer", "program": "train", "stack": "k8s", "launcher": "mpijob",
         "network": "tcp", "ranks": 2, "gpus_per_node": 0, "hosts": ["n1", "n2"], "workload": {}})))
    (directory / "mpijob.yaml").write_text("kind: MPIJob\n")
    markdown = (directory / "report.md").read_text()
    assert "run date: 2026-11-23 12:37 UTC" in markdown
    assert "hardware per node (2 nodes): Xeon (2 cores, 2 logical CPUs), 8.0 GiB memory, no GPU" in markdown
    assert "throughput: 640.0 images/s (total over ranks); spread over 2 batch means of consecutive steps, not repeats" \
        in markdown
    assert "previous run of this point: older (2026-11-22 12:20 UTC), 512.0 images/s; change since: +25.0%" in markdown
    # The job files are linked once they are there (the report is rewritten from the summary).
    summary.write_report(directory, results.load(results.SUMMARY, directory / "summary.json"))
    assert "job: [job.json](job.json) · [mpijob.yaml](mpijob.yaml)" in (directory / "report.md").read_text()
    assert "<a href='job.json'>job.json</a>" in (directory / "report.html").read_text()


def test_the_first_run_of_a_point_says_there_is_none_before_it(run_dir, make_rank):
    directory = write_run(run_dir, make_rank, "first", 1795437454.0, 0.1)
    assert f"previous run of this point: none in {directory.parent}" in (directory / "report.md").read_text()


def test_gpu_build_versions_are_shown_only_where_gpus_were_used(run_dir, make_rank):
    cpu = run_dir(make_rank(0), make_rank(1))
    summary.write(cpu)
    assert "tensorflow_built_cuda" not in (cpu / "report.md").read_text()
    assert "| tensorflow | 2.15.1 |" in (cpu / "report.md").read_text()
    ranks = [make_rank(rank, run_id="gpu") for rank in (0, 1)]
    for document in ranks:
        document["device"] = {"asked_gpu": True, "trained_on": "/device:GPU:0", "gpus_visible": 1}
        document["provenance"]["gpus"] = ["NVIDIA H100 80GB HBM3"]
    gpu = run_dir(*ranks)
    summary.write(gpu)
    page = (gpu / "report.md").read_text()
    assert "| tensorflow_built_cuda | 12.2 |" in page
    assert "1 x NVIDIA H100 80GB HBM3" in page


def test_a_run_summarized_without_its_plot_says_so_until_it_is_drawn(run_dir, make_rank):
    directory = run_dir(make_rank(0), make_rank(1))
    summary.write(directory, plots=False)
    assert not (directory / "plots").exists()
    assert "plots: not drawn yet (a campaign draws them at its end" in (directory / "report.md").read_text()
    assert "<b>plots:</b> not drawn yet (a campaign draws them" in (directory / "report.html").read_text()
    before = (directory / "summary.json").read_bytes()
    assert summary.draw_plots(directory)
    assert (directory / "plots" / "loss.png").stat().st_size > 0
    markdown = (directory / "report.md").read_text()
    assert "![loss](plots/loss.png)" in markdown and "not drawn yet" not in markdown
    assert "data:image/png;base64," in (directory / "report.html").read_text()
    # The summary is what it was; a run with its plot is left as it is.
    assert (directory / "summary.json").read_bytes() == before
    assert not summary.draw_plots(directory)


def test_a_sweep_summarized_without_its_plot_gets_it_drawn_later(tmp_path):
    sweep = allreduce_document(run_id="sweep")
    results.save(results.ALLREDUCE_RESULT, sweep, tmp_path / "sweep" / "raw" / "allreduce.json")
    summary.write_sweep(tmp_path / "sweep", plots=False)
    assert "plots: not drawn yet" in (tmp_path / "sweep" / "report.md").read_text()
    assert not (tmp_path / "sweep" / "plots").exists()
    assert summary.draw_plots(tmp_path / "sweep")
    assert "![allreduce](plots/allreduce.png)" in (tmp_path / "sweep" / "report.md").read_text()
    assert not summary.draw_plots(tmp_path / "sweep")


# What benchrunner.peaks says of a CPU: the reason each of its ranks has no MFU against a peak.
CPU_PEAK_MISSING = peaks.lookup(None, "fp32")[1]


def test_a_text_run_is_summarised_in_tokens_with_its_utilization(run_dir):
    ranks = [text_rank_document(0, product=H100_SXM, step_times=[0.10, 0.11, 0.10, 0.12] * 3),
             text_rank_document(1, product=H100_SXM, step_times=[0.10] * 12)]
    directory = run_dir(*ranks)
    document = summary.write(directory, plots=False)
    figures = document["throughput"]
    assert figures["unit"] == "tokens"
    # Tokens: batch 32 x 64 tokens per step, over each rank's measured time.
    rates = [32 * 64 * 12 / sum(r["step_times_s"]) for r in ranks]
    assert [r["samples_per_sec"] for r in figures["per_rank"]] == pytest.approx(rates)
    assert figures["total_per_sec"] == pytest.approx(sum(rates))
    assert figures["per_device_per_sec"] == pytest.approx(sum(rates) / 2)
    assert figures["per_device_batch_means"]["mean"] == pytest.approx(figures["total_batch_means"]["mean"] / 2)
    assert figures["per_device_batch_means"]["n"] == figures["total_batch_means"]["n"] > 1
    used = document["utilization"]
    mfus = [r["utilization"]["mfu"] for r in ranks]
    assert used["mfu"] == pytest.approx({"mean": sum(mfus) / 2, "minimum": min(mfus), "maximum": max(mfus)})
    assert used["mfu"]["minimum"] < used["mfu"]["maximum"]
    against_probe = [r["utilization"]["mfu_vs_probe"] for r in ranks]
    assert used["mfu_vs_probe"]["mean"] == pytest.approx(sum(against_probe) / 2)
    assert used["peak"] == ranks[0]["utilization"]["peak"] and used["peak_missing"] is None
    assert (used["precision"], used["probe_tflops"], document["utilization_missing"]) == (
        "bf16", {"mean": 0.5, "minimum": 0.5, "maximum": 0.5}, None)
    # Rank 1 reached more memory (documents.py: 100 MiB + rank).
    assert document["memory"] == {"peak_bytes": 101 * 1024 ** 2, "rank": 1, "sources": ["ru_maxrss"], "missing": None}
    page = (directory / "report.md").read_text()
    tflops = [r["utilization"]["model_tflops_per_device"] for r in ranks]
    peak = peaks.PEAKS[H100_SXM]
    peak = {"tflops": peak.tflops("bf16"), "source": peak.source}
    assert (f"throughput: {sum(rates):.1f} tokens/s (total over ranks)" in page
            and f"; {sum(rates) / 2:.1f} tokens/s per device (95% CI " in page)
    assert (f"utilization (bf16): model {sum(tflops) / 2:.3g} TFLOP/s (ranks {min(tflops):.3g} TFLOP/s - "
            f"{max(tflops):.3g} TFLOP/s) per device; MFU {100 * sum(mfus) / 2:.3g}% (ranks {100 * min(mfus):.3g}% - "
            f"{100 * max(mfus):.3g}%) of the "
            f"NVIDIA H100 80GB HBM3 SXM dense bf16 peak {peak['tflops']:g} TFLOP/s ({peak['source']}); MFU vs "
            f"probe {100 * sum(against_probe) / 2:.3g}%") in page
    assert "peak memory: 101.0 MiB (rank 1, ru_maxrss)" in page
    assert "| rank | host | tokens/s |" in page and "llama-tiny, synthetic data, batch 32/rank, seq64" in page
    assert "training: AdamW, beta_1 0.9, weight decay 0.1, learning rate 0.01 x ranks" in page


def test_the_run_page_names_gradient_accumulation(run_dir):
    # Four micro-batches a step take four times as long: the probe's 0.5 TFLOP/s bounds what the model reaches.
    ranks = [text_rank_document(rank, accumulation=4, step_times=[0.4] * 4) for rank in (0, 1)]
    directory = run_dir(*ranks)
    document = summary.write(directory, plots=False)
    assert "llama-tiny, synthetic data, batch 32/rank x 4 micro-batches per step, seq64" in (
        directory / "report.md").read_text()
    # Each step's tokens: 32 sequences x 4 micro-batches x 64 tokens, over the batch's mean step time.
    assert document["throughput"]["total_batch_means"]["mean"] == pytest.approx(2 * 32 * 4 * 64 / 0.4)


def test_a_cpu_text_run_has_mfu_against_its_probe_only_and_says_why(run_dir):
    directory = run_dir(text_rank_document(0), text_rank_document(1))
    document = summary.write(directory, plots=False)
    used = document["utilization"]
    assert used["mfu"] is None and used["peak"] is None
    assert used["peak_missing"] == f"ranks 0, 1: {CPU_PEAK_MISSING}"
    assert used["mfu_vs_probe"]["mean"] > 0
    assert f"MFU vs peak: - (ranks 0, 1: {CPU_PEAK_MISSING}); MFU vs probe " in (directory / "report.md").read_text()


def test_a_rank_without_a_probe_leaves_the_run_without_mfu_against_it(run_dir):
    document = summary.summarize(run_dir(text_rank_document(0), text_rank_document(1, probe_tflops=None)))
    used = document["utilization"]
    assert (used["probe_tflops"], used["mfu_vs_probe"]) == (None, None)
    assert used["probe_missing"] == "rank 1: no GEMM probe recorded"


def test_a_rank_whose_probe_undershot_leaves_the_run_without_mfu_against_it_and_says_why(run_dir):
    """Rank 1's probe ran while its cores were shared: its model outran it, so the run has no MFU against the probe,
    names the rank and the figures, and still records both probes."""
    directory = run_dir(text_rank_document(0), text_rank_document(1, probe_tflops=1e-9))
    rank1 = results.load(results.RANK_RESULT, sorted((directory / summary.RAW_DIR).glob("rank-*.json"))[1])
    assert rank1["utilization"]["mfu_vs_probe"] is None
    document = summary.write(directory, plots=False)
    used = document["utilization"]
    assert used["mfu_vs_probe"] is None and used["probe_tflops"]["maximum"] == 0.5
    assert used["probe_missing"].startswith("rank 1: MFU ") and "the probe undershot" in used["probe_missing"]
    assert f"MFU vs probe: - ({used['probe_missing']})" in (directory / "report.md").read_text()


def test_an_image_run_says_why_it_has_no_utilization(run_dir, make_rank):
    directory = run_dir(make_rank(0), make_rank(1))
    document = summary.write(directory, plots=False)
    assert document["utilization"] is None
    assert document["utilization_missing"] == f"ranks 0, 1: {summary.NO_FLOPS}"
    assert f"utilization: none (ranks 0, 1: {summary.NO_FLOPS})" in (directory / "report.md").read_text()


def test_ranks_counting_different_units_are_refused(run_dir, make_rank):
    directory = run_dir(make_rank(0), text_rank_document(1))
    with pytest.raises(results.ResultError, match=r"ranks count throughput in different units \(rank 0: images, "
                                                  r"rank 1: tokens\): no total adds them up"):
        summary.write(directory)
    assert not (directory / summary.SUMMARY_JSON).exists()


def test_a_text_rank_without_utilization_is_named_with_the_reason(run_dir):
    ranks = [text_rank_document(0), text_rank_document(1)]
    del ranks[1]["utilization"]
    document = summary.summarize(run_dir(*ranks))
    assert document["utilization"] is None
    assert document["utilization_missing"] == f"rank 1: {summary.NOT_RECORDED}"


def test_ranks_on_devices_with_different_peaks_each_have_their_own_mfu(run_dir):
    ranks = [text_rank_document(0, product=H100_SXM), text_rank_document(1, product="NVIDIA H100 PCIe")]
    directory = run_dir(*ranks)
    document = summary.write(directory, plots=False)
    used = document["utilization"]
    assert used["peak"] is None
    assert used["peak_missing"] == "ranks ran on devices with different peaks: each rank's MFU is against its own"
    mfus = [r["utilization"]["mfu"] for r in ranks]
    assert used["mfu"] == pytest.approx({"mean": sum(mfus) / 2, "minimum": min(mfus), "maximum": max(mfus)})
    assert "of each rank's own peak (ranks ran on devices with different peaks: each rank's MFU is against its own)" \
        in (directory / "report.md").read_text()
