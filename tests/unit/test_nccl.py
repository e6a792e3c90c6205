"""nccl-tests results, read from outputs recorded on real machines (fixtures/ORIGINS.md) and from variants of them."""

import json

import pytest

from ansible_collections.hpcml.cluster.plugins.module_utils import nccl, parsing
from unit_paths import FIXTURES

# fixture: status, test, ranks, rows, "# Avg bus bandwidth", largest out-of-place busbw, out-of-bounds count
RECORDED = {
    "nccl-tests.a3mega-ztan.h100-x16-2node-hashes-lost.txt": ("ok", None, 16, 31, 70.742, 338.82, 0),
    "nccl-tests.aws-efa-eks.a100-x16-2node-efa-tagged.txt": ("ok", None, 16, 30, 11.2432, 43.81, 0),
    "nccl-tests.coreweave.gb200-nvl72-rank-line-only.txt": ("incomplete", None, 1, 5, 745.53, 839.16, 0),
    "nccl-tests.coreweave.gb200-x1440-20rack-rank-line-only.txt": ("incomplete", None, 1, 6, 297.808, 405.74, 0),
    "nccl-tests.issue-287.rtx5090-x1-busbw-zero.txt": ("ok", "all_reduce_perf", 1, 25, 0.0, 0.0, 0),
    "nccl-tests.issue-287.rtx5090-x2-debug-info-nccl-warn.txt": ("failed", "all_reduce_perf", 2, 0, None, None, None),
    "nccl-tests.issue-287.rtx5090-x2-unhandled-cuda-error.txt": ("failed", "all_reduce_perf", 2, 0, None, None, None),
    "nccl-tests.issue-309.h100-x16-2node-mpi-noise.txt": ("ok", "all_reduce_perf", 16, 32, 139.56, 469.21, 0),
    "nccl-tests.issue-355.h800-x16-2node-alltoall-illegal-access.txt": ("failed", "alltoall_perf", 16, 0, None, None,
                                                                        None),
    "nccl-tests.sigma2-olivia.gh200-x16-4node-wrong-cut.txt": ("failed", "all_reduce_perf", 16, 28, None, 89.85, None),
    "nccl-tests.superbench.allgather.txt": ("ok", None, 8, 34, 58.2651, 223.39, 0),
    "nccl-tests.superbench.allreduce.txt": ("ok", None, 8, 34, 68.4048, 235.26, 0),
    "nccl-tests.superbench.alltoall.txt": ("ok", None, 8, 34, 58.6481, 224.31, 0),
    "nccl-tests.superbench.broadcast.txt": ("ok", None, 8, 34, 64.8653, 232.81, 0),
    "nccl-tests.superbench.reducescatter.txt": ("ok", None, 8, 34, 60.168, 231.52, 0),
}
CLEAN = "nccl-tests.issue-309.h100-x16-2node-mpi-noise.txt"


def parse(name: str) -> dict:
    return nccl.parse_nccl_tests((FIXTURES / name).read_text())


def test_every_recorded_output_has_its_expectation():
    assert sorted(path.name for path in FIXTURES.glob("nccl-tests.*")) == sorted(RECORDED)


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_recorded_output(name):
    status, test, ranks, rows, average, largest, out_of_bounds = RECORDED[name]
    result = parse(name)
    assert result["status"] == status
    assert result["test"] == test
    assert len(result["ranks"]) == ranks
    assert len(result["rows"]) == rows
    assert result["avg_busbw_gbs"] == average
    assert result["max_busbw_gbs"] == largest
    assert result["out_of_bounds"] == out_of_bounds
    # Whatever is not ok says why; an ok run has nothing to say.
    assert bool(result["problems"]) == (status != "ok")
    assert bool(result["errors"]) == (status == "failed")


def test_wrong_elements_fail_a_run_published_without_its_summary():
    result = parse("nccl-tests.sigma2-olivia.gh200-x16-4node-wrong-cut.txt")
    assert (result["nccl_tests_version"], result["nccl_version"]) == ("2.17.9", "2.29.2")
    assert result["ranks"][4] == {"rank": 4, "group": 0, "pid": 215832, "host": "gpu-1-47", "device": 0,
                                  "bus_id": "0009:01:00", "name": "NVIDIA GH200 120GB"}
    corrupted = result["rows"][21]
    assert (corrupted["size_bytes"], corrupted["count"], corrupted["type"], corrupted["redop"], corrupted["root"]) == (
        2097152, 2097152, "int8", "sum", None)
    assert corrupted["out_of_place"] == {"time_us": 6249.20, "algbw_gbs": 0.34, "busbw_gbs": 0.63, "wrong": 18134}
    assert corrupted["in_place"]["wrong"] == 9609
    # Eleven blocks of six rows carry wrong elements; the 64 MiB in-place block does not.
    assert len(result["errors"]) == 11
    assert result["rows"][26]["in_place"]["wrong"] == 0
    assert "cut at the bottom" in result["problems"][-1]


def test_a_failure_glued_to_a_row_is_a_failure_not_a_cut_row():
    result = parse("nccl-tests.issue-355.h800-x16-2node-alltoall-illegal-access.txt")
    assert (result["nccl_tests_version"], result["nccl_version"]) == ("2.17.6", "2.28.7")
    assert "Test CUDA failure common.cu:389 'an illegal memory access was encountered'" in result["errors"][0]
    assert len(result["errors"]) == 7
    assert not any("cut short" in problem for problem in result["problems"])


def test_nccl_warnings_and_the_test_failure_are_reported():
    result = parse("nccl-tests.issue-287.rtx5090-x2-debug-info-nccl-warn.txt")
    assert result["nccl_version"] == "2.25.1"
    assert sum("NCCL WARN" in error for error in result["errors"]) == 5
    assert any("Test NCCL failure common.cu:392 'unhandled cuda error" in error for error in result["errors"])


def test_failure_before_any_row():
    result = parse("nccl-tests.issue-287.rtx5090-x2-unhandled-cuda-error.txt")
    assert result["errors"][0].startswith("GENOA-06: Test NCCL failure common.cu:392")
    assert [error.split(": ", 1)[1] for error in result["errors"][1:]] == [
        "Test failure common.cu:590", "Test failure all_reduce.cu:90", "Test failure common.cu:623",
        "Test failure common.cu:1078", "Test failure common.cu:891"]


def test_validation_off_is_not_a_clean_run():
    result = parse("nccl-tests.superbench.allreduce.txt")
    assert result["errors"] == []
    assert result["validated"] is False
    assert result["rows"][0]["out_of_place"] == {"time_us": 35.20, "algbw_gbs": 0.0, "busbw_gbs": 0.0, "wrong": None}


def test_operation_columns_of_the_old_tables():
    alltoall = parse("nccl-tests.superbench.alltoall.txt")["rows"][-1]
    assert (alltoall["size_bytes"], alltoall["type"], alltoall["redop"], alltoall["root"]) == (
        8589934592, "float", None, None)
    broadcast = parse("nccl-tests.superbench.broadcast.txt")["rows"][-1]
    assert (broadcast["count"], broadcast["redop"], broadcast["root"]) == (2147483648, None, 0)
    allgather = parse("nccl-tests.superbench.allgather.txt")["rows"][-1]
    assert (allgather["count"], allgather["redop"], allgather["in_place"]["busbw_gbs"]) == (268435456, None, 230.07)
    assert parse("nccl-tests.superbench.reducescatter.txt")["rows"][-1]["redop"] == "sum"


def test_mpirun_tags_and_the_deviation_column_before_2_13():
    result = parse("nccl-tests.aws-efa-eks.a100-x16-2node-efa-tagged.txt")
    assert result["nccl_version"] == "2.9.9"
    assert result["ranks"][15] == {"rank": 15, "group": None, "pid": 40, "host": "nccl-tests-efa-16-worker-1",
                                   "device": 7, "bus_id": "0xa0", "name": "A100-SXM4-40GB"}
    # The `error` column held the largest deviation, not a count: the out-of-bounds line judges it.
    assert result["rows"][0]["out_of_place"]["wrong"] is None
    assert result["rows"][-1]["in_place"] == {"time_us": 184216.0, "algbw_gbs": 23.31, "busbw_gbs": 43.72,
                                              "wrong": None}


def test_paste_that_lost_the_hashes_of_its_header():
    result = parse("nccl-tests.a3mega-ztan.h100-x16-2node-hashes-lost.txt")
    assert result["ranks"][0]["host"] == "ztan-mig-235z"
    assert result["ranks"][8]["host"] == "ztan-mig-gq73"


def test_mpi_messages_and_the_library_version_line():
    result = parse(CLEAN)
    assert (result["test"], result["nccl_version"], result["nccl_tests_version"]) == (
        "all_reduce_perf", "2.26.2", None)
    assert [rank["host"] for rank in result["ranks"]] == ["bm-h100-01"] * 8 + ["bm-h100-02"] * 8


def test_cells_wider_than_their_column():
    result = parse("nccl-tests.issue-287.rtx5090-x1-busbw-zero.txt")
    assert result["rows"][-1]["in_place"]["algbw_gbs"] == 1777718.25
    assert result["ranks"][0]["bus_id"] == "0x21"


# Variants of a clean recording, cut where published logs are cut.
def clean_lines() -> list:
    return (FIXTURES / CLEAN).read_text().splitlines(keepends=True)


def test_clean_recording_is_ok():
    assert parse(CLEAN)["status"] == "ok"


def test_cut_at_the_top():
    lines = clean_lines()
    first_row = next(i for i, line in enumerate(lines) if line.startswith("           8 "))
    result = nccl.parse_nccl_tests("".join(lines[first_row:]))
    assert result["status"] == "incomplete"
    assert result["rows"] and not result["ranks"]
    assert any("cut at the top" in problem for problem in result["problems"])


def test_cut_at_the_bottom():
    lines = clean_lines()
    result = nccl.parse_nccl_tests("".join(lines[:-3]))
    assert result["status"] == "incomplete"
    assert len(result["rows"]) == 32
    assert result["problems"] == ['the output is cut at the bottom: no "# Avg bus bandwidth" summary']


def test_cut_in_the_middle_of_a_row():
    lines = clean_lines()
    last_row = next(i for i, line in enumerate(lines) if line.startswith(" 17179869184 "))
    result = nccl.parse_nccl_tests("".join(lines[:last_row]) + lines[last_row][:70])
    assert result["status"] == "incomplete"
    assert len(result["rows"]) == 31
    assert any("cut short" in problem for problem in result["problems"])


def test_out_of_bounds_and_bandwidth_check_failures():
    text = (FIXTURES / CLEAN).read_text()
    out_of_bounds = nccl.parse_nccl_tests(text.replace("# Out of bounds values : 0 OK",
                                                       "# Out of bounds values : 3 FAILED"))
    assert (out_of_bounds["status"], out_of_bounds["out_of_bounds"]) == ("failed", 3)
    # -G asks for a minimum average; below 90 % of it the summary says FAILED.
    slow = nccl.parse_nccl_tests(text.replace("# Avg bus bandwidth    : 139.56",
                                              "# Avg bus bandwidth    : 139.56 FAILED"))
    assert slow["status"] == "failed"
    assert slow["errors"] == ["# Avg bus bandwidth    : 139.56 FAILED"]


@pytest.mark.parametrize("text", ["", "   \n", "hello world\n", "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n",
                                  "1 2 3 4 5 6 7 8 9 10 11 12 13\n", "{", "[1, 2]", '{"results": [1'])
def test_what_is_not_nccl_tests_output_raises(text):
    with pytest.raises(parsing.ParseError):
        nccl.parse_nccl_tests(text)


def test_nccl_version_codes():
    assert nccl.nccl_version(2708) == "2.7.8"
    assert nccl.nccl_version(22105) == "2.21.5"
    assert nccl.nccl_version(23007) == "2.30.7"


# No -J document recorded on a real machine was found. This one has the layout src/util.cu writes at
# NVIDIA/nccl-tests a0b82b2260cf5152b9f8c061bbf7eaf0ba096432 (2.19.6): booleans as the strings "true"/"false", the root
# as "%6i" text, nwrong a double (null without validation), errors [""] after a clean run; 2.17.3 to 2.17.8 spelt the
# average "average_bus_bandwidith"/"bandwidith".
def document(nwrong=0.0, errors=("",), average_key=("average_bus_bandwidth", "bandwidth"), finished=True) -> str:
    def place(time, busbw):
        return {"time": time, "alg_bw": busbw / 2, "bus_bw": busbw, "nwrong": nwrong}

    body = {
        "version": 3, "start_time": "2026-07-09 10:00:00", "args": ["./build/all_reduce_perf", "-b", "8", "-J", "r.json"],
        "env": ["NCCL_DEBUG=WARN"], "nccl_version": 22905,
        "config": {"nthreads": 1, "ngpus": 2, "minimum_bytes": 8, "maximum_bytes": 16, "step_factor": 2,
                   "warmup_iters": 5, "iterations": 20, "aggregated_iterations": 1, "validation": 1, "graph": 0,
                   "blocking_collectives": "false", "per_iter_timing": "false", "per_iter_skip": 0,
                   "parallel_init": "false",
                   "devices": [{"rank": rank, "group": 0, "pid": 4242, "hostname": "node1", "device": rank,
                                "device_hex": f"0000:{rank + 0x19:02x}:00", "device_info": "NVIDIA H100 80GB HBM3"}
                               for rank in range(2)]},
        "results": [{"size": size, "count": size // 4, "type": "float", "redop": "sum", "root": "    -1",
                     "out_of_place": place(20.5, busbw), "in_place": place(20.25, busbw), "actual_iterations": 20,
                     "experiment_name": "all_reduce_perf"} for size, busbw in ((8, 0.000390), (16, 0.000781))],
    }
    if finished:
        body.update({"out_of_bounds": {"count": 0, "okay": "true"},
                     average_key[0]: {average_key[1]: 0.000586, "okay": "unchecked"},
                     "errors": list(errors), "end_time": "2026-07-09 10:00:01"})
    return json.dumps(body, separators=(",", ":"))


def test_json_document():
    result = nccl.parse_nccl_tests(document())
    assert (result["status"], result["test"], result["nccl_version"]) == ("ok", "all_reduce_perf", "2.29.5")
    assert result["ranks"][1] == {"rank": 1, "group": 0, "pid": 4242, "host": "node1", "device": 1,
                                  "bus_id": "0000:1a:00", "name": "NVIDIA H100 80GB HBM3"}
    assert result["rows"][1] == {"size_bytes": 16, "count": 4, "type": "float", "redop": "sum", "root": None,
                                 "out_of_place": {"time_us": 20.5, "algbw_gbs": 0.0003905, "busbw_gbs": 0.000781,
                                                  "wrong": 0},
                                 "in_place": {"time_us": 20.25, "algbw_gbs": 0.0003905, "busbw_gbs": 0.000781,
                                              "wrong": 0}}
    assert (result["avg_busbw_gbs"], result["max_busbw_gbs"], result["out_of_bounds"]) == (0.000586, 0.000781, 0)


def test_json_document_of_2_17_3_to_2_17_8():
    result = nccl.parse_nccl_tests(document(average_key=("average_bus_bandwidith", "bandwidith")))
    assert (result["status"], result["avg_busbw_gbs"]) == ("ok", 0.000586)


@pytest.mark.parametrize(("variant", "problem"), [
    ({"nwrong": 3.0}, "3 wrong elements out-of-place at 8 bytes"),
    ({"errors": ["unhandled system error"]}, "unhandled system error"),
])
def test_json_document_that_failed(variant, problem):
    result = nccl.parse_nccl_tests(document(**variant))
    assert result["status"] == "failed"
    assert problem in result["problems"]


def test_json_document_run_without_checks_is_ok_but_not_validated():
    result = nccl.parse_nccl_tests(document(nwrong=None))
    assert (result["status"], result["validated"], result["errors"]) == ("ok", False, [])


def test_json_document_left_unfinished():
    # Since 2.18.5 an early error still closes the document; it then lacks the summary.
    result = nccl.parse_nccl_tests(document(finished=False))
    assert result["status"] == "incomplete"
    assert result["problems"] == ["the document has no average bus bandwidth"]


def test_json_document_with_nan_and_without_out_of_place():
    body = json.loads(document())
    body["average_bus_bandwidth"]["bandwidth"] = "nan"
    body["results"][0]["out_of_place"] = None
    body["args"][0] = "/opt/nccl-tests/build/all_reduce_perf_mpi"
    result = nccl.parse_nccl_tests(json.dumps(body))
    assert (result["status"], result["test"], result["max_busbw_gbs"]) == ("incomplete", "all_reduce_perf", 0.000781)
    assert result["problems"] == ["the document has no average bus bandwidth"]


# nccl-tests 2.17.6 built by node_acceptance's own tasks and run by them on this project's lent H100
# (fixtures/gpu-record-h100-20261124/README.md): one GPU, -b 8 -e 16G -f 2 -n 20 -w 5 -g 1.
H100_RUNS = ("all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "alltoall_perf")


@pytest.mark.parametrize("test", H100_RUNS)
def test_h100_one_gpu_runs_read_whole_and_checked(test):
    result = parse(f"gpu-record-h100-20261124/nccl-tests-{test}.txt")
    assert (result["status"], result["test"], result["problems"], result["errors"]) == ("ok", test, [], [])
    assert (result["nccl_tests_version"], result["nccl_version"]) == ("2.17.6", "2.28.3")
    assert [(r["host"], r["name"]) for r in result["ranks"]] == [("vm", "NVIDIA H100 80GB HBM3")]
    assert result["rows"][-1]["size_bytes"] == 16 * 2 ** 30
    # One rank: nothing crosses a link, so every bus bandwidth is 0 while the local copy runs at ~1.5 TB/s.
    assert result["max_busbw_gbs"] == 0.0 and result["rows"][-1]["out_of_place"]["algbw_gbs"] > 1000
    # alltoall's in-place #wrong is N/A (nccl-tests checks no in-place alltoall); out-of-place was checked.
    assert result["validated"] is True


def test_a_run_whose_out_of_place_results_were_not_checked_is_not_validated():
    text = (FIXTURES / "gpu-record-h100-20261124/nccl-tests-alltoall_perf.txt").read_text()
    # Derived: the out-of-place #wrong cells of every row read N/A, as with -c 0.
    def unchecked(line: str) -> str:
        cells = line.split()
        return "  " + "  ".join([*cells[:8], "N/A", *cells[9:]])

    derived = "\n".join(unchecked(line) if line[:12].strip().isdigit() else line for line in text.splitlines())
    assert derived.count("N/A") == 2 * text.count("N/A")
    assert nccl.parse_nccl_tests(derived)["validated"] is False
