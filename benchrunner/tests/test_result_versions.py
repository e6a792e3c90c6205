"""Training results at v3 (samples per second in the workload's unit) and every v2 result still read: v2's images/s
is read as samples per second in unit images, by results.load, summarize, the reports, compare and schema-check."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchrunner import cli, report, results, summary
from documents import as_v2, as_v2_summary, rank_document, text_rank_document, write_json

PROJECT = Path(__file__).resolve().parents[2]
# Where recorded results are kept: every rank result or summary under them at v2 is checked below, so a fixture added
# later is covered without naming it.
FIXTURE_ROOTS = ("benchrunner/tests/fixtures", "tests/unit/fixtures")
# The v2 training results recorded so far (lab-results: make demo, 2026-11-23; gpu-h100-20261124: a lent H100).
KNOWN_V2 = 9


def recorded_v2() -> list[Path]:
    """Every training result (rank result or summary) at v2 kept in the repository."""
    found = []
    for root in FIXTURE_ROOTS:
        for path in sorted((PROJECT / root).rglob("*.json")):
            try:
                document = json.loads(path.read_text())
            except ValueError:  # tool output kept as it was printed (a preamble before its JSON): not a result
                continue
            if (isinstance(document, dict) and document.get("kind") in (results.RANK_RESULT, results.SUMMARY)
                    and document.get("schema_version") == 2):
                found.append(path)
    return found


V2_FILES = recorded_v2()


def test_the_recorded_v2_results_are_found():
    assert len(V2_FILES) >= KNOWN_V2, V2_FILES


@pytest.mark.parametrize("path", V2_FILES, ids=lambda p: str(p.relative_to(PROJECT)))
def test_every_recorded_v2_result_loads_as_samples_per_sec_in_images(path):
    on_disk = json.loads(path.read_text())
    kind = on_disk["kind"]
    document = results.load(kind, path)
    assert document["schema_version"] == 2  # the view says which version was on disk
    if kind == results.RANK_RESULT:
        assert "images_per_sec" not in document["metrics"]
        assert document["metrics"]["samples_per_sec"] == on_disk["metrics"]["images_per_sec"]
        assert document["metrics"]["unit"] == "images"
        assert document.get("model", {"kind": "image"})["kind"] == "image"
    else:
        assert document["throughput"]["total_per_sec"] == on_disk["throughput"]["total"]
        assert document["throughput"]["unit"] == "images"


def recorded_runs() -> list[Path]:
    """The run folders of the recorded v2 rank results."""
    return sorted({path.parent.parent for path in V2_FILES if path.parent.name == summary.RAW_DIR})


@pytest.mark.parametrize("run", recorded_runs(), ids=lambda p: str(p.relative_to(PROJECT)))
def test_every_recorded_v2_run_summarises_and_reports(tmp_path, run):
    copy = Path(shutil.copytree(run, tmp_path / "results" / run.name))
    written = summary.write(copy, plots=False)
    assert written["schema_version"] == 3 and written["throughput"]["unit"] == "images"
    on_disk = [json.loads(p.read_text()) for p in sorted((run / summary.RAW_DIR).glob("rank-*.json"))]
    assert written["throughput"]["total_per_sec"] == pytest.approx(sum(r["metrics"]["images_per_sec"] for r in on_disk))
    assert written["throughput"]["per_device_per_sec"] == pytest.approx(written["throughput"]["total_per_sec"]
                                                                        / len(on_disk))
    # v2 ranks measured neither utilization nor memory, and the page says so rather than showing a figure.
    assert written["utilization"] is None and "recorded no utilization" in written["utilization_missing"]
    assert written["memory"]["peak_bytes"] is None and "recorded no peak memory" in written["memory"]["missing"]
    page = (copy / "report.md").read_text()
    assert f"throughput: {written['throughput']['total_per_sec']:.1f} images/s" in page
    assert "utilization: none (rank" in page
    assert cli.main(["schema-check", str(copy / summary.SUMMARY_JSON),
                     *map(str, sorted((copy / summary.RAW_DIR).glob("rank-*.json")))]) == 0


def test_a_campaign_report_over_every_recorded_v2_run(tmp_path):
    directory = tmp_path / "results"
    for run in recorded_runs():
        summary.write(Path(shutil.copytree(run, directory / run.name)), plots=False)
    summaries, _ = report.load_runs(directory, [run.name for run in recorded_runs()])
    table = report.throughput_table(report.series(summaries, lambda s: s["stack"]))
    assert {row[table.header.index("unit")] for row in table.rows} == {"images/s"}
    assert len(table.rows) >= 1 and not any("MFU" in name for name in table.header)


def test_schema_check_takes_v2_and_v3(tmp_path, capsys):
    v3 = write_json(tmp_path / "v3.json", rank_document())
    v2 = write_json(tmp_path / "v2.json", as_v2(rank_document()))
    assert cli.main(["schema-check", str(v2), str(v3)]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{v2}: ok", f"{v3}: ok"]


def test_a_v2_document_with_v3_fields_is_refused(tmp_path):
    mixed = as_v2(rank_document())
    mixed["metrics"]["unit"] = "images"
    with pytest.raises(results.ResultError, match="v2 schema at metrics: Additional properties"):
        results.load(results.RANK_RESULT, write_json(tmp_path / "r.json", mixed))


@pytest.mark.parametrize("build", [rank_document, text_rank_document], ids=["image", "text"])
def test_a_v3_rank_result_round_trips(tmp_path, build):
    document = build()
    results.save(results.RANK_RESULT, document, tmp_path / "rank.json")
    assert results.load(results.RANK_RESULT, tmp_path / "rank.json") == document


def test_a_v3_summary_round_trips(run_dir):
    directory = run_dir(text_rank_document(0, peak_tflops=989.4), text_rank_document(1, peak_tflops=989.4))
    written = summary.write(directory, plots=False)
    assert results.load(results.SUMMARY, directory / summary.SUMMARY_JSON) == written


def test_a_v2_rank_result_reads_as_the_v3_one_it_would_be(tmp_path):
    v3 = rank_document()
    view = results.load(results.RANK_RESULT, write_json(tmp_path / "r.json", as_v2(v3)))
    assert view["metrics"] == v3["metrics"]
    assert view["model"] == v3["model"]


def test_a_v2_summary_reads_through_the_same_view(run_dir, tmp_path):
    directory = run_dir(rank_document(0, step_times=[0.1, 0.12, 0.11, 0.1] * 5),
                        rank_document(1, step_times=[0.1, 0.1, 0.13, 0.1] * 5))
    v3 = summary.summarize(directory)
    v2 = as_v2_summary(v3)
    results.validate(results.SUMMARY, v2)
    view = results.load(results.SUMMARY, write_json(tmp_path / "summary.json", v2))
    figures = view["throughput"]
    assert (figures["unit"], figures["total_per_sec"], figures["total_batch_means"], figures["per_rank"]) == (
        "images", v3["throughput"]["total_per_sec"], v3["throughput"]["total_batch_means"], v3["throughput"]["per_rank"])
    # Derived from the total: equal up to rounding.
    assert figures["per_device_per_sec"] == pytest.approx(v3["throughput"]["per_device_per_sec"])
    assert figures["per_device_batch_means"] == pytest.approx(v3["throughput"]["per_device_batch_means"])
    assert view["utilization"] is None and view["utilization_missing"] == results.V2_UNMEASURED
    assert view["memory"] == {"peak_bytes": None, "rank": None, "sources": [], "missing": results.V2_UNMEASURED}
    # The run page of a v2 summary reads like any other.
    summary.write_report(tmp_path, view, plots=False)
    page = (tmp_path / "report.md").read_text()
    assert f"throughput: {v3['throughput']['total_per_sec']:.1f} images/s (total over ranks)" in page
    assert f"utilization: none ({results.V2_UNMEASURED})" in page


def test_compare_puts_a_v2_run_beside_a_v3_run(run_dir, tmp_path, capsys):
    old = run_dir(*(rank_document(rank, run_id="old", step_times=[0.125] * 4) for rank in (0, 1)))
    new = run_dir(*(rank_document(rank, run_id="new", step_times=[0.1] * 4) for rank in (0, 1)))
    write_json(old / summary.SUMMARY_JSON, as_v2_summary(summary.summarize(old)))
    summary.write(new, plots=False)
    assert cli.main(["compare", str(old), str(new), "--results-dir", str(old.parent), "-o", str(tmp_path / "cmp")]) == 0
    assert "| small_cnn synthetic b32 32px | new / old | 2 | 1.250 |" in capsys.readouterr().out
