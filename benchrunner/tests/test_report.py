import copy
import json
import shutil
from pathlib import Path

import pytest

from benchrunner import cli, containers, launchers, report, results, summary
from documents import H100_SXM, allreduce_document, rank_document, text_rank_document

# Step time per rank by (stack, GPUs): k8s is slower at 2 GPUs, and 2 GPUs scale at 80% on bare metal.
STEP = {("baremetal", 1): 0.100, ("baremetal", 2): 0.125, ("k8s", 1): 0.100, ("k8s", 2): 0.136}


@pytest.fixture
def results_dir(tmp_path):
    """Three repeats of 1 and 2 GPUs on two stacks, plus an allreduce sweep per stack."""
    directory = tmp_path / "results"
    run_ids = []
    for (stack, gpus), step in STEP.items():
        for repeat in range(3):
            run_id = f"{stack}-g{gpus}-r{repeat}"
            jitter = 1 + 0.01 * (repeat - 1)
            for rank in range(gpus):
                document = rank_document(rank, gpus, run_id=run_id, stack=stack,
                                         step_times=[step * jitter] * 4)
                results.save(results.RANK_RESULT, document, directory / run_id / "raw" / f"rank-{rank:05d}.json")
            results.save(results.SUMMARY, summary.summarize(directory / run_id), directory / run_id / "summary.json")
            run_ids.append(run_id)
    for stack, busbw in (("baremetal", 2e9), ("k8s", 1e9)):
        sweep = allreduce_document(run_id=f"sweep-{stack}", stack=stack, busbw=busbw)
        results.save(results.ALLREDUCE_RESULT, sweep, directory / sweep["run_id"] / "raw" / "allreduce.json")
        run_ids.append(sweep["run_id"])
    return directory, run_ids


def by_stack(document):
    return document["provenance"]["stack"]


def rows(table, **match):
    columns = {name: i for i, name in enumerate(table.header)}
    return [row for row in table.rows if all(row[columns[k]] == v for k, v in match.items())]


def cells(table, column, **match):
    """One column's cells of the rows that match."""
    return [row[table.header.index(column)] for row in rows(table, **match)]


def test_throughput_statistics_are_over_repeats(results_dir):
    summaries, _ = report.load_runs(*results_dir)
    table = report.throughput_table(report.series(summaries, by_stack))
    match = {"stack": "baremetal", "GPUs": "2"}
    assert cells(table, "runs", **match) == ["3"]
    assert cells(table, "unit", **match) == ["images/s"]
    (mean,) = (float(v) for v in cells(table, "mean", **match))
    assert mean == pytest.approx(sum(2 * 32 / (0.125 * j) for j in (0.99, 1.0, 1.01)) / 3, abs=0.1)
    assert cells(table, "mean per device", **match) == [f"{mean / 2:.1f}"]
    low, high = (float(v) for v in cells(table, "95% CI", **match)[0].split(" - "))
    assert low < mean < high
    # Image models have no FLOPs count: no MFU columns at all.
    assert not any("MFU" in name for name in table.header)


def test_scaling_efficiency_against_the_smallest_gpu_count(results_dir):
    summaries, _ = report.load_runs(*results_dir)
    table = report.scaling_table(report.series(summaries, by_stack))
    assert rows(table, stack="baremetal", GPUs="1")[0][-1] == "100.0%"
    assert rows(table, stack="baremetal", GPUs="2")[0][-1] == "80.0%"
    assert rows(table, stack="k8s", GPUs="2")[0][-1] == "73.5%"


def test_kubernetes_relative_to_bare_metal_per_gpu_count(results_dir):
    summaries, _ = report.load_runs(*results_dir)
    table = report.ratio_table(report.ratios(report.series(summaries, by_stack), "baremetal"), "baremetal")
    assert [row[1:4] for row in table.rows] == [("k8s / baremetal", "1", "1.000"), ("k8s / baremetal", "2", "0.919")]


def test_allreduce_bandwidth_per_stack(results_dir):
    _, sweeps = report.load_runs(*results_dir)
    table = report.allreduce_table(sweeps, by_stack)
    # 1 MiB at 2 GB/s over 2 ranks: 524.3 us per operation.
    assert rows(table, stack="baremetal", message="1 MiB")[0][3:6] == ("524.3", "2.000", "2.000")
    assert rows(table, stack="k8s", message="8 B")[0][5] == "1.000"


def test_ratio_interval_propagates_both_intervals():
    a = report.stats.describe([100.0, 102.0, 98.0])
    b = report.stats.describe([90.0, 90.0, 90.0])
    value, half = report.ratio(a, b)
    assert value == pytest.approx(0.9)
    assert half == pytest.approx(0.9 * (a.ci95_high - a.mean) / a.mean)


def test_report_writes_markdown_self_contained_html_and_plots(results_dir, tmp_path):
    summaries, sweeps = report.load_runs(*results_dir)
    out = tmp_path / "report"
    report.write(out, "Campaign lab", summaries, sweeps, by_stack, ["intro"])
    plots = sorted(p.name for p in (out / "plots").iterdir())
    assert plots == ["allreduce.png", "loss.png", "ratio.png", "throughput.png"]
    assert all((out / "plots" / p).read_bytes().startswith(b"\x89PNG") for p in plots)
    page = (out / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 4 and "src='plots/" not in page
    text = (out / "report.md").read_text()
    assert "## Throughput relative to baremetal" in text and "![ratio](plots/ratio.png)" in text
    assert "tensorflow: 2.15.1" in text


def test_differing_versions_between_runs_are_called_out(results_dir):
    summaries, _ = report.load_runs(*results_dir)
    summaries[0]["versions"]["horovod"] = "0.27.0"
    assert "horovod: 0.27.0, 0.28.1 (DIFFERS between runs)" in report.provenance_lines(summaries)


def test_compare_cli_puts_b_against_a(results_dir, tmp_path, capsys):
    directory, _ = results_dir
    out = tmp_path / "cmp"
    assert cli.main(["compare", str(directory / "baremetal-g2-r0"), str(directory / "k8s-g2-r0"),
                     "--results-dir", str(directory), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| small_cnn synthetic b32 32px | k8s-g2-r0 / baremetal-g2-r0 | 2 | 0.919 |" in text
    assert (out / "report.html").is_file()


def save_campaign_state(directory, run_ids):
    """Campaign lab's state: every run done, and one more that failed."""
    runs = {run_id: {"point": {"program": "train", "stack": "baremetal", "launcher": "mpirun", "network": "tcp",
                               "gpus": 1, "gpus_per_node": 0, "workload": {}},
                     "repeat": 1, "status": "done", "attempts": 1, "updated_at": "2026-11-21T00:00:00+00:00"}
            for run_id in run_ids}
    runs["lost"] = {**runs[run_ids[0]], "status": "failed", "reason": "lab-node2: UNREACHABLE"}
    state = {"kind": "campaign-state", "schema_version": 2, "campaign": "lab", "campaign_file": "lab.yml",
             "updated_at": "2026-11-21T00:00:00+00:00", "runs": runs}
    state["order"] = {"seed": 42, "run_ids": [*run_ids, "lost"]}
    results.save(results.CAMPAIGN_STATE, state, directory / "campaigns" / "lab" / "state.json")


def test_report_on_a_campaign_lists_its_failures(results_dir, tmp_path, capsys):
    directory, run_ids = results_dir
    save_campaign_state(directory, run_ids)
    assert cli.main(["report", "lab", "--results-dir", str(directory)]) == 0
    text = capsys.readouterr().out
    assert "Campaign lab: 14 runs done, 1 failed." in text and "failed: lost: lab-node2: UNREACHABLE" in text
    assert "Order: repeat rounds, every point once in each, shuffled (seed 42)" in text



def break_two_runs(directory):
    """One summary cut short as a crash leaves it, one written at an older schema version."""
    truncated = directory / "baremetal-g1-r0" / "summary.json"
    truncated.write_text(truncated.read_text()[:100])
    older = directory / "k8s-g2-r1" / "summary.json"
    older.write_text(json.dumps({**json.loads(older.read_text()), "schema_version": 1}))
    return truncated, older


def test_a_campaign_report_reports_every_run_it_can_read_and_lists_the_others_first(results_dir, capsys):
    directory, run_ids = results_dir
    save_campaign_state(directory, run_ids)
    truncated, older = break_two_runs(directory)
    assert cli.main(["report", "lab", "--results-dir", str(directory)]) == 0
    captured = capsys.readouterr()
    intro = captured.out.split("\n\n")[1].splitlines()
    assert intro[0].startswith(f"could not read {truncated}: not JSON: "), intro
    assert intro[1] == f"could not read {older}: schema_version 1 is not the supported 2 or 3", intro
    assert intro[2] == "Campaign lab: 12 runs done, 1 failed, 2 done but unreadable, left out of this report."
    table = captured.out.split("## Throughput")[1].split("##")[0]
    assert "| small_cnn synthetic b32 32px | baremetal | 1 | images/s | 2 |" in table
    assert "| small_cnn synthetic b32 32px | k8s | 2 | images/s | 2 |" in table
    assert "2 done run(s) could not be read" in captured.err
    html = (directory / "campaigns" / "lab" / "report.html").read_text()
    assert f"<p class='warn'>could not read {truncated}: not JSON" in html


def test_a_strict_campaign_report_fails_on_an_unreadable_run_but_still_reports(results_dir, capsys):
    directory, run_ids = results_dir
    save_campaign_state(directory, run_ids)
    break_two_runs(directory)
    assert cli.main(["report", "lab", "--results-dir", str(directory), "--strict"]) == 1
    assert "Campaign lab: 12 runs done" in (directory / "campaigns" / "lab" / "report.md").read_text()
    capsys.readouterr()
    for run_id in run_ids:
        (directory / run_id / "summary.json").unlink(missing_ok=True)
        (directory / run_id / "raw" / "allreduce.json").unlink(missing_ok=True)
    assert cli.main(["report", "lab", "--results-dir", str(directory)]) == 2
    assert "campaign lab: no done run could be read: " in capsys.readouterr().err

def test_a_campaign_with_only_sweeps_done_still_reports(results_dir, tmp_path):
    _, sweeps = report.load_runs(*results_dir)
    report.write(tmp_path / "only-sweeps", "Campaign lab", [], sweeps, by_stack, [])
    assert sorted(p.name for p in (tmp_path / "only-sweeps" / "plots").iterdir()) == ["allreduce.png"]
    assert "## Allreduce time and bandwidth" in (tmp_path / "only-sweeps" / "report.md").read_text()


def test_runs_that_differ_in_any_axis_get_rows_of_their_own(results_dir):
    summaries, _ = report.load_runs(*results_dir)
    compressed = [s for s in summaries if s["run_id"].startswith("baremetal-g2")][:2]
    for s in compressed:
        s["workload"]["fp16_allreduce"] = True
    table = report.throughput_table(report.series(summaries, by_stack))
    assert cells(table, "runs", stack="baremetal", GPUs="2") == ["1", "2"]
    assert {row[0] for row in rows(table, stack="baremetal", GPUs="2")} == {
        "small_cnn synthetic b32 32px fp16_allreduce=false", "small_cnn synthetic b32 32px fp16_allreduce=true"}
    assert report.grouping_lines(summaries, ()) == [
        "Runs of small_cnn synthetic b32 32px differ in fp16_allreduce (false, true): each value has rows of its own."]


def test_a_stack_ratio_between_runs_that_differ_in_more_than_the_stack_is_refused(results_dir, tmp_path):
    summaries, sweeps = report.load_runs(*results_dir)
    for s in summaries:
        if s["stack"] == "k8s":
            s["network"], s["launcher"] = "overlay", "mpijob"
    all_series = report.series(summaries, by_stack)
    # The launcher comes with the stack; the network does not, so no k8s/baremetal ratio is given.
    assert report.ratios(all_series, "baremetal") == []
    (row,) = report.unmatched(all_series, "baremetal").rows
    assert row == ("small_cnn synthetic b32 32px launcher=mpijob network=overlay", "k8s", "network (tcp vs overlay)")

    path = report.write(tmp_path / "pooled", "pooled", summaries, sweeps, by_stack, [], pooled=["network"])
    text = path.read_text()
    assert "POOLED on request although runs of small_cnn synthetic b32 32px differ in: network (overlay, tcp)." in text
    assert "| small_cnn synthetic b32 32px launcher=mpijob | k8s / baremetal | 2 | 0.919 |" in text
    with pytest.raises(results.ResultError, match="cannot pool colour: not an axis of these runs"):
        report.write(tmp_path / "bad", "bad", summaries, sweeps, by_stack, [], pooled=["colour"])


def test_compare_takes_a_as_the_reference_whatever_the_names(results_dir, tmp_path, capsys):
    directory, _ = results_dir
    # Alphabetically k8s-... comes first; A is still the reference.
    assert cli.main(["compare", str(directory / "k8s-g2-r0"), str(directory / "baremetal-g2-r0"),
                     "--results-dir", str(directory), "-o", str(tmp_path / "cmp")]) == 0
    text = capsys.readouterr().out
    assert "| small_cnn synthetic b32 32px | baremetal-g2-r0 / k8s-g2-r0 | 2 | 1.088 |" in text


def write_sweep_run(directory, run_id, measured_at, busbw):
    sweep = allreduce_document(run_id=run_id, busbw=busbw)
    sweep["measured_at"] = measured_at
    results.save(results.ALLREDUCE_RESULT, sweep, directory / run_id / "raw" / "allreduce.json")
    return directory / run_id


def test_the_sweep_page_measures_the_largest_message_against_the_raw_link_bandwidth(tmp_path):
    run = write_sweep_run(tmp_path, "sweep", "2026-11-23T12:00:00+00:00", 0.9e9)
    summary.write_sweep(run)
    assert "no raw link bandwidth recorded (raw/raw-bandwidth.json), so no reference line" in \
        (run / "report.md").read_text()
    # iperf3 --json's end.sum_received.bits_per_second, 9.6 Gbit/s, over 8.
    raw = {"kind": "raw-bandwidth", "schema_version": 2, "tool": "iperf 3.12", "hosts": ["node1", "node2"],
           "bytes_per_s": 1.2e9, "streams": 1, "duration_s": 10.0}
    results.save(results.RAW_BANDWIDTH, raw, run / "raw" / "raw-bandwidth.json")
    summary.write_sweep(run)
    page = (run / "report.md").read_text()
    assert ("largest message (1 MiB): busbw 0.900 GB/s = 75% of the raw link bandwidth, 1.200 GB/s (iperf 3.12 "
            "between node1 and node2)") in page


def test_a_raw_bandwidth_file_that_does_not_match_its_schema_stops_the_page(tmp_path):
    run = write_sweep_run(tmp_path, "sweep", "2026-11-23T12:00:00+00:00", 1e9)
    # Bits where bytes belong, one host: refused with the file's name, not drawn as a wrong line.
    (run / "raw" / "raw-bandwidth.json").write_text(json.dumps(
        {"kind": "raw-bandwidth", "schema_version": 2, "tool": "iperf3", "hosts": ["node1"], "bits_per_second": 9.6e9}))
    with pytest.raises(results.ResultError, match=r"raw-bandwidth\.json: does not match the raw-bandwidth v2 schema"):
        summary.write_sweep(run)


def test_the_sweep_page_shows_the_previous_sweep_of_the_same_point(tmp_path):
    write_sweep_run(tmp_path, "before", "2026-11-22T12:00:00+00:00", 1e9)
    run = write_sweep_run(tmp_path, "after", "2026-11-23T12:00:00+00:00", 1.1e9)
    summary.write_sweep(run)
    page = (run / "report.md").read_text()
    assert "run date: 2026-11-23 12:00 UTC" in page
    assert ("previous run of this point: before (2026-11-22 12:00 UTC), largest message busbw 1.000 GB/s; change "
            "since: +10.0%") in page


def test_a_cpu_only_campaign_lists_no_gpu_build_versions(results_dir):
    summaries, _ = report.load_runs(*results_dir)
    lines = report.provenance_lines(summaries)
    assert "tensorflow: 2.15.1" in lines
    assert not [line for line in lines if line.startswith(report.GPU_VERSIONS)]
    summaries[0]["provenance"]["gpus"] = ["NVIDIA A100-SXM4-80GB"]
    assert "tensorflow_built_cuda: 12.2" in report.provenance_lines(summaries)


def test_the_campaign_table_shows_each_point_s_input_wait(tmp_path):
    directory = tmp_path / "results"
    for repeat, wait in enumerate((0.02, 0.04)):
        run_id = f"real-r{repeat}"
        for rank in range(2):
            document = rank_document(rank, 2, run_id=run_id, step_times=[0.1] * 4, input_waits=[wait] * 4,
                                     data="tfrecord", data_dir="/data/cxr")
            results.save(results.RANK_RESULT, document, directory / run_id / "raw" / f"rank-{rank:05d}.json")
        results.save(results.SUMMARY, summary.summarize(directory / run_id), directory / run_id / "summary.json")
    summaries, _ = report.load_runs(directory, ["real-r0", "real-r1"])
    # 20% and 40% of step time waited for input
    assert cells(report.throughput_table(report.series(summaries, by_stack)), "input wait") == ["30.0%"]
    synthetic, _ = report.load_runs(*_one_synthetic_run(tmp_path))
    assert cells(report.throughput_table(report.series(synthetic, by_stack)), "input wait") == ["0.0%"]


def _one_synthetic_run(tmp_path):
    directory = tmp_path / "synthetic"
    for rank in range(2):
        results.save(results.RANK_RESULT, rank_document(rank, 2, run_id="s"), directory / "s" / "raw" / f"rank-{rank:05d}.json")
    results.save(results.SUMMARY, summary.summarize(directory / "s"), directory / "s" / "summary.json")
    return directory, ["s"]


def test_runs_summarized_before_the_training_settings_group_as_what_they_trained_with(results_dir):
    summaries, _ = report.load_runs(*results_dir)
    old = json.loads(json.dumps(summaries[0]))
    for key in ("optimizer", "momentum", "lr_scaling", "preset"):
        old["workload"].pop(key, None)
    assert report.axes(old) == report.axes(summaries[0])
    peer = json.loads(json.dumps(summaries[0]))
    peer["workload"].update(preset="horovod_synthetic", momentum=0.0, lr_scaling="none")
    assert report.differing_axes([old, peer]).keys() >= {"momentum", "preset", "lr_scaling"}
    assert "preset=horovod_synthetic" in report.workload_label(peer["workload"])


def test_a_campaign_shows_each_workload_in_its_unit_with_mfu_where_runs_have_it(results_dir):
    directory, run_ids = results_dir
    for repeat in range(2):
        run_id = f"llama-r{repeat}"
        for rank in range(2):
            document = text_rank_document(rank, 2, run_id=run_id, product=H100_SXM, step_times=[0.1 + 0.01 * repeat] * 4)
            results.save(results.RANK_RESULT, document, directory / run_id / "raw" / f"rank-{rank:05d}.json")
        results.save(results.SUMMARY, summary.summarize(directory / run_id), directory / run_id / "summary.json")
    summaries, _ = report.load_runs(directory, [*run_ids, "llama-r0", "llama-r1"])
    all_series = report.series(summaries, by_stack)
    table = report.throughput_table(all_series)
    text = {"workload": "pytorch-ddp llama-tiny synthetic b32 seq64 mixed_bfloat16"}
    assert cells(table, "unit", **text) == ["tokens/s"]
    assert set(cells(table, "unit", workload="small_cnn synthetic b32 32px")) == {"images/s"}
    mfus = [s["utilization"]["mfu"]["mean"] for s in summaries if s["utilization"]]
    assert cells(table, "MFU vs peak", **text) == [report.fraction(sum(mfus) / 2)]
    probes = [s["utilization"]["mfu_vs_probe"]["mean"] for s in summaries if s["utilization"]]
    assert cells(table, "MFU vs probe", **text) == [report.fraction(sum(probes) / 2)]
    # Image runs have no FLOPs count: "-", and their pages say why.
    assert set(cells(table, "MFU vs peak", workload="small_cnn synthetic b32 32px")) == {"-"}
    totals = [s["throughput"]["total_per_sec"] for s in summaries if s["utilization"]]
    assert cells(table, "mean per device", **text) == [f"{sum(totals) / 2 / 2:.1f}"]
    scaling = report.scaling_table(all_series)
    assert cells(scaling, "throughput", **text) == [f"{sum(totals) / 2:.1f} tokens/s"]
    assert report.ratios(all_series, "baremetal")  # the image runs' stack ratios, the text runs have no k8s peer


def test_no_ratio_or_statistic_mixes_units(results_dir):
    summaries, _ = report.load_runs(*results_dir)
    # As if k8s had counted tokens for the same workload: its ratio to bare metal would divide tokens by images.
    for s in summaries:
        if s["stack"] == "k8s":
            s["throughput"]["unit"] = "tokens"
    with pytest.raises(results.ResultError, match="k8s counts tokens, baremetal images: no ratio between runs of "
                                                  "different units"):
        report.ratios(report.series(summaries, by_stack), "baremetal")
    # Nor does one series' statistic mix them: one of bare metal's three repeats in tokens.
    (series,) = [s for s in report.series(summaries, by_stack) if s.variant == "baremetal"]
    series.by_gpus[1][1]["throughput"]["unit"] = "tokens"
    with pytest.raises(results.ResultError, match=r"runs count throughput in different units \(images, tokens\)"):
        series.throughput(1)


# Two real runs of one point in the lab's virtualenv (make demo, 2026-11-23: small_cnn, srun under Slurm, 2 ranks).
LAB = Path(__file__).parent / "fixtures" / "lab-results"
LAB_RUNS = ("20261123T123436Z-slurm", "20261123T123732Z-slurm")
IMAGE = {"runtime": "charliecloud", "image": "/srv/benchrunner/images/benchrunner.sqfs",
         "digest": "sha256:" + "5e" * 32, "mounts": ["/srv/benchrunner/datasets"]}


@pytest.fixture(scope="module")
def lab_summaries(tmp_path_factory):
    """The two lab runs, summarized as recorded."""
    out = []
    for name in LAB_RUNS:
        run = tmp_path_factory.mktemp("lab") / name
        shutil.copytree(LAB / name, run)
        out.append(summary.summarize(run))
    return out


def in_container(document, slower, **versions):
    """The run as if measured in the Charliecloud image: `slower` times its throughput, the image's versions."""
    moved = copy.deepcopy(document)
    moved["run_id"] += "-charliecloud"
    moved["container"] = IMAGE
    moved["throughput"]["total_per_sec"] *= slower
    # Its spread over batch means scales with it: the same relative width.
    within = moved["throughput"]["total_batch_means"]
    moved["throughput"]["total_batch_means"] = {k: v if k == "n" else v * slower for k, v in within.items()}
    moved["versions"] |= versions
    return moved


def test_a_run_recorded_without_a_container_ran_in_the_virtualenv(lab_summaries):
    # Ranks recorded before containers were: their summary reads them as the virtualenv's, as does one without the key.
    assert lab_summaries[0]["container"] == {"runtime": "none"}
    assert containers.recorded({k: v for k, v in lab_summaries[0].items() if k != "container"}) == {"runtime": "none"}
    assert report.axes(lab_summaries[0])["container"] == "none"
    # Runs that all read as none are not split by it: no report of them changes.
    assert report.container_table(lab_summaries) is None and report.container_lines(lab_summaries) == []


def test_the_container_over_the_virtualenv_with_its_interval(lab_summaries):
    contained = [in_container(s, 0.8, mpi="Open MPI v4.1.6") for s in lab_summaries]
    table = report.container_table(lab_summaries + contained)
    assert rows(table) == [rows(table, stack="slurm", ratio="charliecloud / none", GPUs="2")[0]]
    # By hand: the virtualenv's throughputs 2209.32 and 2635.64 images/s, the container's 0.8 of each. Two repeats
    # (t = 12.706 at 1 degree of freedom): each mean's relative half-width is 12.706 x |2635.64 - 2209.32| / 2 /
    # 2422.48 = 1.11803, the same on both sides; the ratio's is 0.8 x sqrt(1.11803^2 + 1.11803^2) = 1.265.
    assert cells(table, "value") == ["0.800"]
    assert cells(table, "95% CI (approx.)") == ["+/- 1.265"]
    assert cells(table, "difference") == ["-20.0%"]
    assert cells(table, "versions that differ (container vs virtualenv)") == ["mpi Open MPI v4.1.6 vs Open MPI v4.1.4"]
    # The stack table splits the runs by container (no stack ratio pools them), and the page names the image.
    assert sorted(s.workload for s in report.series(lab_summaries + contained, by_stack)) == [
        "small_cnn synthetic b32 32px container=charliecloud mpi=Open MPI v4.1.6",
        "small_cnn synthetic b32 32px container=none mpi=Open MPI v4.1.4"]
    assert report.container_lines(lab_summaries + contained) == [
        f"container charliecloud: image /srv/benchrunner/images/benchrunner.sqfs ({IMAGE['digest']}), mounts "
        "/srv/benchrunner/datasets"]


def test_a_missing_pair_is_said_not_left_out(lab_summaries):
    # Every Charliecloud run of the campaign failed: the runtime is known only from its plan.
    table = report.container_table(lab_summaries, runtimes={"none", "charliecloud"})
    assert rows(table) == [("small_cnn synthetic b32 32px", "slurm", "charliecloud / none", "2", "MISSING", "-",
                            "no charliecloud run of this point completed (failed or not run)", "-")]
    # The virtualenv's runs failed instead.
    table = report.container_table([in_container(s, 0.8) for s in lab_summaries])
    assert cells(table, "difference") == ["no none (virtualenv) run of this point completed (failed or not run)"]


def test_a_launcher_that_starts_no_container_misses_no_pair(lab_summaries, monkeypatch):
    monkeypatch.setattr(type(launchers.get("srun")), "containers", ())
    assert rows(report.container_table(lab_summaries, runtimes={"charliecloud"})) == []


def test_the_campaign_page_has_the_container_section_and_its_image(lab_summaries, tmp_path):
    contained = [in_container(s, 0.8) for s in lab_summaries]
    path = report.write(tmp_path / "report", "Campaign lab", lab_summaries + contained, [], by_stack, ["intro"])
    text = path.read_text()
    assert "## Throughput in a container relative to the virtualenv" in text
    assert "| small_cnn synthetic b32 32px | slurm | charliecloud / none | 2 | 0.800 | +/- 1.265 | -20.0% | none |" in text
    assert f"container charliecloud: image /srv/benchrunner/images/benchrunner.sqfs ({IMAGE['digest']})" in text


# By hand, from the two lab runs' summaries: run 1's 2635.640 images/s over run 0's 2209.322 is 1.19296. Their spreads
# over 10 batch means of consecutive steps: run 0's 95% CI 1989.140 - 2799.081 about 2394.110, relative half-width
# 404.971 / 2394.110 = 0.169153; run 1's 2438.286 - 2918.127 about 2678.206, 239.920 / 2678.206 = 0.089582. The
# ratio's half-width: 1.19296 x sqrt(0.169153^2 + 0.089582^2) = 1.19296 x 0.191410 = 0.228345.
ONE_RUN_A_SIDE = ("1.193", "+/- 0.228 (batch means, 1 run)", "+19.3%")


def on_k8s(document):
    """The run as if measured on the Kubernetes stack."""
    moved = copy.deepcopy(document)
    moved["run_id"] += "-k8s"
    moved["stack"] = moved["provenance"]["stack"] = "k8s"
    return moved


def test_one_run_a_side_takes_its_interval_from_each_runs_batch_means_and_says_so(lab_summaries):
    table = report.container_table([lab_summaries[0], in_container(lab_summaries[1], 1.0)])
    assert rows(table)[0][4:7] == ONE_RUN_A_SIDE
    assert "labelled (batch means, 1 run): spread within one run, not between repeats" in table.note
    (found,) = report.ratios(report.series([lab_summaries[0], in_container(lab_summaries[1], 1.0)], report._runtime,
                                           pooled=("container",)), "none", bound=())
    assert (found.interval, found.half_width) == (report.BATCH_MEANS, pytest.approx(0.228345, abs=1e-6))


def test_a_stack_ratio_of_one_run_a_side_takes_the_same_interval(lab_summaries):
    k8s = on_k8s(lab_summaries[1])
    table = report.ratio_table(report.ratios(report.series([lab_summaries[0], k8s], by_stack), "slurm"), "slurm")
    assert rows(table) == [("small_cnn synthetic b32 32px", "k8s / slurm", "2", *ONE_RUN_A_SIDE)]
    assert "(batch means, 1 run): spread within one run" in table.note


def test_repeats_on_one_side_and_one_run_on_the_other_say_which_is_which(lab_summaries):
    table = report.container_table([lab_summaries[0], *(in_container(s, 0.8) for s in lab_summaries)])
    # The container's two repeats keep their relative half-width 1.11803 (see above), the virtualenv's one run its
    # batch means' 0.169153: 0.8 x 2422.481 / 2209.322 = 0.87718, +/- 0.87718 x sqrt(1.11803^2 + 0.169153^2) = 0.99192.
    assert rows(table)[0][4:6] == ("0.877", "+/- 0.992 (batch means of the 1-run side, repeats of the other)")


def test_a_single_run_without_batch_means_gives_no_interval(lab_summaries):
    short = copy.deepcopy(lab_summaries[0])
    short["throughput"]["total_batch_means"] = None  # too few steps for batch means
    table = report.container_table([short, in_container(lab_summaries[1], 1.0)])
    assert cells(table, "value") == ["1.193"] and cells(table, "95% CI (approx.)") == ["- (1 run)"]
    # Nor from one batch mean, whose interval would have no width.
    short["throughput"]["total_batch_means"] = {**lab_summaries[0]["throughput"]["total_batch_means"], "n": 1}
    assert cells(report.container_table([short, in_container(lab_summaries[1], 1.0)]), "95% CI (approx.)") == [
        "- (1 run)"]


def test_the_page_labels_a_batch_means_interval(lab_summaries, tmp_path):
    k8s = on_k8s(lab_summaries[1])
    report.write(tmp_path / "report", "Campaign lab", [lab_summaries[0], k8s], [], by_stack, ["intro"])
    page = (tmp_path / "report" / "report.html").read_text()
    assert "<td>+/- 0.228 (batch means, 1 run)</td>" in page
    assert (tmp_path / "report" / "plots" / "ratio.png").read_bytes().startswith(b"\x89PNG")
