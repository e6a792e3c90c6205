"""Hostile input to every parser of the collection (issue 36): whatever a tool, a paste or a forger hands it, a parser
returns its data, with an explicit status where it gives one, or raises its own ParseError naming the line or JSON path.
Never another exception, and never a clean status for a value no run measures.

First the inputs the issue found, one test each; then Hypothesis over arbitrary text, arbitrary JSON and mutations of
the real recorded outputs (fixtures/ORIGINS.md): lines dropped or doubled, numbers replaced by hostile values."""

import copy
import json
import re
from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_dcgm import dcgm4_document
from test_nccl import document as nccl_document

from ansible_collections.hpcml.cluster.plugins.module_utils import (
    acceptance,
    dcgm,
    gpu,
    gpu_errors,
    gpudirect,
    horovod,
    limits,
    nccl,
    parsing,
    rdma,
)
from unit_paths import FIXTURES

# Modest and deterministic: the same examples on every run and machine, the whole file in seconds on one core.
HOSTILE = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
# Values no tool prints where a number belongs: negative, non-finite, beyond float or int, non-ASCII digits, a
# number long enough to pass float() as infinity or to break int(), and the empty cell.
HOSTILE_NUMBERS = ("-400", "-0.5", "nan", "NaN", "inf", "-inf", "1e999", "9" * 5000, "18446744073709551616" * 2,
                   "²", "٣", "1.2.3", "0x10", "", "N/A")
NCCL_STATUSES = ("ok", "incomplete", "failed")
DCGM_STATUSES = ("pass", "warn", "incomplete", "fail")
CLEAN_NCCL = "gpu-record-h100-20261124/nccl-tests-all_reduce_perf.txt"
SMI_XML = "gpu-record-h100-20261124/nvidia-smi-q-x.xml"


@cache
def recorded(pattern: str) -> tuple:
    """The recorded outputs whose names match, as (name, text)."""
    return tuple((path.name, path.read_text()) for path in sorted(FIXTURES.glob(pattern)))


def reads(parse, text, kind=dict, statuses=None):
    """What a parser must do with any input: return its data (of `kind`, with one of `statuses`) or raise ParseError.
    Any other exception fails the test with its traceback. Returns the data, or None after a ParseError."""
    try:
        result = parse(text)
    except parsing.ParseError as error:
        assert str(error), "a ParseError must say what it could not read"
        return None
    assert isinstance(result, kind)
    if statuses is not None:
        assert result["status"] in statuses
    return result


def table_with(cell: str, column: int = 7, size: str = "17179869184", text: str | None = None) -> str:
    """The clean H100 all_reduce run with one cell of its row of `size` bytes replaced (7: out-of-place busbw)."""
    lines = (text or (FIXTURES / CLEAN_NCCL).read_text()).splitlines()
    [row] = [number for number, line in enumerate(lines) if line.split()[:1] == [size]]
    cells = lines[row].split()
    cells[column] = cell
    lines[row] = "  ".join(cells)
    return "\n".join(lines) + "\n"


def clean_row_line(size: str = "17179869184") -> int:
    lines = (FIXTURES / CLEAN_NCCL).read_text().splitlines()
    return next(number for number, line in enumerate(lines, start=1) if line.split()[:1] == [size])


# ---------------------------------------------------------------------------------------------- what the issue found

def test_the_clean_run_is_ok():
    assert nccl.parse_nccl_tests((FIXTURES / CLEAN_NCCL).read_text())["status"] == "ok"


@pytest.mark.parametrize(("cell", "said"), [
    ("-400", "busbw is -400.0, not a finite number of 0 or more"),
    ("1e999", "busbw is inf, not a finite number of 0 or more"),
    ("250000", "busbw is 250000, above 100000, which no hardware reaches"),
    ("9" * 5_000_000, "busbw is a number of 5000000 characters"),
])
def test_a_busbw_no_link_carries_fails_the_run_naming_its_line(cell, said):
    result = nccl.parse_nccl_tests(table_with(cell))
    assert result["status"] == "failed"
    [problem] = result["problems"]
    assert problem.startswith(f"line {clean_row_line()}: the out-of-place ") and said in problem
    # The row is not kept: nothing of it reaches the judge as a measurement.
    assert 17179869184 not in [row["size_bytes"] for row in result["rows"]]
    assert len(problem) < 400, "the message quotes the line's start, not all 5 MB of it"


@pytest.mark.parametrize("cell", ["nan", "inf", "²", "٣٣"])
def test_a_busbw_cell_that_is_no_number_is_not_ok(cell):
    text = table_with(cell)
    result = nccl.parse_nccl_tests(text)
    assert result["status"] == "incomplete"
    assert result["problems"] == [f"a result row could not be read: {parsing.excerpt(text.splitlines()[clean_row_line() - 1])}"]


def test_a_negative_time_or_algbw_fails_the_run_too():
    assert nccl.parse_nccl_tests(table_with("-1.5", column=5))["status"] == "failed"
    assert nccl.parse_nccl_tests(table_with("-1.5", column=6))["status"] == "failed"


def test_a_size_of_5000_digits_fails_the_run_naming_its_line():
    result = nccl.parse_nccl_tests(table_with("9" * 5000, column=0))
    assert result["status"] == "failed"
    assert result["problems"][0].startswith(f"line {clean_row_line()}: the size is '99999")


def test_two_runs_in_one_output_are_refused():
    text = (FIXTURES / CLEAN_NCCL).read_text()
    second = table_with("40.00", text=text)
    with pytest.raises(parsing.ParseError, match=r"several runs in one output: a second nccl-tests version line at "
                                                 r"line 47 \(the first at line 1\)"):
        nccl.parse_nccl_tests(table_with("400.00") + second)


def test_a_second_runs_rows_without_their_header_are_refused():
    lines = table_with("400.00").splitlines()
    row = clean_row_line() - 1
    # The 16 GiB row again, from a second run, after the 8 GiB one: no sweep measures a size twice.
    eight = lines[row - 1].split()
    again = [*lines[:row + 1], "  ".join(eight), table_with("40.00").splitlines()[row], *lines[row + 1:]]
    with pytest.raises(parsing.ParseError, match=rf"a second row of 8589934592 bytes, float at line {row + 2}"):
        nccl.parse_nccl_tests("\n".join(again))


def test_repeated_zero_byte_rows_of_a_sweep_from_one_byte_stay_one_run():
    # superbench's runs from -b 1 print 0 bytes twice (fixtures/ORIGINS.md); that is one run, read ok.
    assert nccl.parse_nccl_tests((FIXTURES / "nccl-tests.superbench.allreduce.txt").read_text())["status"] == "ok"


@pytest.mark.parametrize(("change", "path"), [
    (lambda doc: doc.update(config=[]), "config is an array, not an object"),
    (lambda doc: doc["config"].update(devices={"0": {}}), "config.devices is an object, not an array"),
    (lambda doc: doc["config"]["devices"].__setitem__(1, "node1"), r"config.devices\[1\] is a string, not an object"),
    (lambda doc: doc["results"].__setitem__(0, 8), r"results\[0\] is a number, not an object"),
    (lambda doc: doc["results"][1]["out_of_place"].update(bus_bw="400"),
     r"results\[1\].out_of_place.bus_bw is a string, not a number"),
    (lambda doc: doc["results"][1].update(size=True), r"results\[1\].size is a boolean, not a number"),
    (lambda doc: doc.update(errors="none"), "errors is a string, not an array"),
    (lambda doc: doc.update(out_of_bounds=0), "out_of_bounds is a number, not an object"),
])
def test_a_json_document_of_the_wrong_types_raises_naming_the_path(change, path):
    body = json.loads(nccl_document())
    change(body)
    with pytest.raises(parsing.ParseError, match=rf"^nccl-tests: the document's {path}"):
        nccl.parse_nccl_tests(json.dumps(body))


@pytest.mark.parametrize("value", [-400, 1e300, float("inf"), float("nan")])
def test_a_json_busbw_no_link_carries_fails_the_run_naming_the_path(value):
    body = json.loads(nccl_document())
    body["results"][1]["out_of_place"]["bus_bw"] = value
    result = nccl.parse_nccl_tests(json.dumps(body))
    assert result["status"] == "failed"
    assert result["problems"][0].startswith("the results[1].out_of_place busbw is ")
    assert [row["size_bytes"] for row in result["rows"]] == [8]


def test_dcgm_json_whose_metadata_is_a_string_raises_naming_it():
    document = dcgm4_document()
    document["metadata"] = "4.2.3"
    for given_as in (json.dumps(document), document):
        with pytest.raises(parsing.ParseError, match=r"^dcgmi diag: the document's metadata is a string, not an object"):
            dcgm.parse_dcgmi_diag(given_as)


def test_dcgm_json_with_a_gpu_id_in_unicode_digits_raises_naming_the_path():
    document = dcgm4_document()
    document["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["results"][0]["entity_id"] = "²"
    with pytest.raises(parsing.ParseError, match=r'test_categories\[0\].tests\[0\].results\[0\].entity_id holds '
                                                 r"'²', not a GPU id"):
        dcgm.parse_dcgmi_diag(document)


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(("parse", "text"), [
    (nccl.parse_nccl_tests, '{"config": {}, "results": ' + nested(100_000) + "}"),
    (nccl.parse_nccl_tests, '{"results": ' + "[" * 100_000),
    (dcgm.parse_dcgmi_diag, '{"DCGM Diagnostic": ' + nested(100_000) + "}"),
    (dcgm.parse_dcgmi_diag, '{"DCGM Diagnostic": ' + "[" * 100_000),
])
def test_json_nested_100000_deep_raises_parse_error(parse, text):
    with pytest.raises(parsing.ParseError, match=f"the JSON nests deeper than {parsing.MAX_JSON_DEPTH} levels at line 1"):
        parse(text)


def test_loaded_json_nested_100000_deep_raises_parse_error():
    document = value = {}
    for _ in range(100_000):
        value["DCGM Diagnostic"] = {}
        value = value["DCGM Diagnostic"]
    with pytest.raises(parsing.ParseError, match=f"nests deeper than {parsing.MAX_JSON_DEPTH} levels"):
        dcgm.parse_dcgmi_diag(document)


def test_a_loaded_document_that_json_cannot_hold_raises_parse_error():
    document = dcgm4_document()
    document["metadata"]["gpus"] = {0, 1}
    with pytest.raises(parsing.ParseError, match="the document given is not JSON"):
        dcgm.parse_dcgmi_diag(document)
    document = dcgm4_document()
    document["metadata"]["self"] = document
    with pytest.raises(parsing.ParseError, match="nests deeper than"):
        dcgm.parse_dcgmi_diag(document)


def test_the_json_bounds_are_far_above_the_real_documents():
    dcgm_text = recorded("dcgmi-diag.*.json")[0][1]
    for text in (nccl_document(), dcgm_text[dcgm_text.index("{"):], json.dumps(dcgm4_document())):
        assert parsing.json_nesting("test", text) == (0, False)
        assert len(text) * 100 < parsing.MAX_OUTPUT_CHARS
    # Depth of the real documents: a quarter of the bound at most.
    assert max(depth(json.loads(nccl_document())), depth(dcgm4_document())) * 4 <= parsing.MAX_JSON_DEPTH


def depth(value) -> int:
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
    return 0 if children is None else 1 + max((depth(child) for child in children), default=0)


def test_output_beyond_any_runs_size_raises_parse_error():
    with pytest.raises(parsing.ParseError, match="more than the 16777216 any run prints"):
        nccl.parse_nccl_tests(" " * (parsing.MAX_OUTPUT_CHARS + 1))


@pytest.mark.parametrize(("value", "said"), [
    ("²", r"<attached_gpus> is '²', not a count"),
    ("٣", r"<attached_gpus> is '٣', not a count"),
    ("9" * 5000, r"<attached_gpus> is '9999.*' \.\.\., not a count"),
])
def test_an_attached_gpu_count_in_unicode_or_endless_digits_raises_parse_error(value, said):
    text = re.sub(r"<attached_gpus>[^<]*</attached_gpus>", f"<attached_gpus>{value}</attached_gpus>",
                  (FIXTURES / SMI_XML).read_text())
    for parse in (gpu.parse_smi_xml, gpu.gpu_counters):
        with pytest.raises(parsing.ParseError, match=said):
            parse(text)


def test_an_ecc_count_of_5000_digits_raises_parse_error():
    text = (FIXTURES / SMI_XML).read_text()
    assert "<dram_uncorrectable>0</dram_uncorrectable>" in text
    text = text.replace("<dram_uncorrectable>0</dram_uncorrectable>",
                        f"<dram_uncorrectable>{'9' * 5000}</dram_uncorrectable>", 1)
    with pytest.raises(parsing.ParseError, match=r"dram_uncorrectable> of GPU .* is '9999.*' \.\.\., not a count"):
        gpu.gpu_counters(text)


@pytest.mark.parametrize(("parse", "text", "said"), [
    (gpu_errors.parse_xid, f"[ 1.0] NVRM: Xid (PCI:0000:44:00): {'7' * 5000}, pid=1, name=x, text", "line 1: the Xid"),
    (gpu_errors.parse_nvlink_errors, f"GPU {'1' * 30}: NVIDIA H100 (UUID: GPU-x)\n", "line 1: the GPU index"),
    (rdma.parse_ibstat, f"CA 'mlx5_0'\n\tPort {'1' * 30}:\n\t\tState: Active\n", "line 2: the port number"),
    (rdma.parse_ibv_devinfo, f"hca_id:\tmlx5_0\n\tport:\t{'1' * 30}\n", "line 2: the port number"),
])
def test_counts_of_other_tools_beyond_any_counter_raise_parse_error_naming_the_line(parse, text, said):
    with pytest.raises(parsing.ParseError, match=said):
        parse(text)


def test_the_guards():
    assert parsing.count("0123", "x") == 123
    for value in ("²", "٣", "9" * 21, "-1", "", " 1", None, 1):
        with pytest.raises(parsing.BadValue):
            parsing.count(value, "x")
    assert parsing.decimal("1.04858e+06", "x") == 1048580.0 and parsing.decimal("N/A", "x") is None
    with pytest.raises(parsing.BadValue, match="a number of 41 characters"):
        parsing.decimal("1" * 41, "x")
    assert parsing.measure(3, "x", 4) == 3.0
    for value in (-1, float("nan"), float("inf"), 5, True, "3", 10 ** 30):
        with pytest.raises(parsing.BadValue):
            parsing.measure(value, "x", 4)
    assert gpudirect.kernel_version("6.8.0-45-generic") == (6, 8) and gpudirect.kernel_version("٦.٨") is None
    assert rdma._rate_gbps("1.2.3 Gb/sec (4X HDR)") is None and rdma._rate_gbps("400 Gb/sec (4X NDR)") == 400.0
    with pytest.raises(parsing.ParseError, match="no 'NVRM version"):
        gpudirect.kernel_modules_flavour("garbage")


# ---------------------------------------------------------------------------------------------- Hypothesis

# Arbitrary text, mostly printable with the odd control or non-ASCII digit, sometimes a whole line of a tool's words.
WORDS = ("# nThread 1 nGpus 8 minBytes 8 maxBytes 8", "#  size  count  type redop root time algbw busbw #wrong time "
         "algbw busbw #wrong", "# Avg bus bandwidth : ", "# Out of bounds values : ", "#  Rank  0 on h device  0 [0x1]",
         "| Diagnostic | Result |", "+---------------------------+", "GPU0", "NV18", "\t", "hca_id:", "CA 'x'",
         "  port:", "  Port 1:", "NVRM: Xid (PCI:0000:44:00): ", "Link 0: ", "<nvidia_smi_log>", "{", "[", '"', "²")
text_strategy = st.lists(st.one_of(st.text(max_size=40), st.sampled_from(WORDS), st.sampled_from(HOSTILE_NUMBERS)),
                         max_size=30).map(" ".join) | st.text()
json_scalars = (st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
                | st.sampled_from(HOSTILE_NUMBERS) | st.sampled_from((10 ** 30, -1, "true", "false", "nan")))
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)


def paths(value, prefix=()):
    """Every path into a loaded document, its root included."""
    yield prefix
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        yield from paths(child, (*prefix, key))


@st.composite
def mutated_json(draw, original):
    """A real document with up to three of its values (or whole branches) replaced by arbitrary JSON."""
    document = copy.deepcopy(original)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(list(paths(document))))
        value = draw(json_values)
        if not path:
            return value
        parent = document
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = value
    return document


NUMBER = re.compile(r"(?<![0-9A-Za-z.])-?[0-9][0-9.eE+-]*")


@st.composite
def mutated_text(draw, pattern):
    """A recorded output with up to four lines dropped, doubled, or with one number replaced by a hostile value."""
    _, text = draw(st.sampled_from(recorded(pattern)))
    lines = text.splitlines()
    for _ in range(draw(st.integers(1, 4))):
        if not lines:
            break
        number = draw(st.integers(0, len(lines) - 1))
        change = draw(st.sampled_from(("drop", "double", "number", "number")))
        if change == "drop":
            del lines[number]
        elif change == "double":
            lines.insert(number, lines[number])
        else:
            found = list(NUMBER.finditer(lines[number]))
            if found:
                match = draw(st.sampled_from(found))
                line = lines[number]
                lines[number] = line[:match.start()] + draw(st.sampled_from(HOSTILE_NUMBERS)) + line[match.end():]
    return "\n".join(lines) + draw(st.sampled_from(("\n", "")))


TEXT_PARSERS = [
    (nccl.parse_nccl_tests, "nccl-tests.*", dict, NCCL_STATUSES),
    (dcgm.parse_dcgmi_diag, "dcgmi-diag.*", dict, DCGM_STATUSES),
    (gpu.parse_smi_xml, "nvidia-smi-q-x.*", dict, None),
    (gpu.gpu_counters, "nvidia-smi-q-x.*", list, None),
    (gpu.parse_topo_matrix, "nvidia-smi-topo-m.*", dict, None),
    (gpu_errors.parse_nvlink_errors, "nvidia-smi-nvlink-e.*", dict, None),
    (rdma.parse_ibv_devinfo, "ibv_devinfo.*", dict, None),
    (rdma.parse_ibstat, "ibstat.*", dict, None),
    (horovod.parse_check_build, "horovodrun-check-build.*", dict, None),
]
IDS = [parse.__module__.rsplit(".", 1)[-1] + "." + parse.__name__ for parse, *_ in TEXT_PARSERS]


@pytest.mark.parametrize(("parse", "pattern", "kind", "statuses"), TEXT_PARSERS, ids=IDS)
@HOSTILE
@given(text=text_strategy)
def test_arbitrary_text_is_data_or_a_parse_error(parse, pattern, kind, statuses, text):
    reads(parse, text, kind, statuses)


@pytest.mark.parametrize(("parse", "pattern", "kind", "statuses"), TEXT_PARSERS, ids=IDS)
@HOSTILE
@given(data=st.data())
def test_mutated_recorded_output_is_data_or_a_parse_error(parse, pattern, kind, statuses, data):
    assert recorded(pattern), f"no recorded output matches {pattern}"
    reads(parse, data.draw(mutated_text(pattern)), kind, statuses)


@HOSTILE
@given(text=st.text(), data=st.data())
def test_kernel_logs_with_xid_lines_of_any_number_are_data_or_a_parse_error(text, data):
    xid = data.draw(st.sampled_from(HOSTILE_NUMBERS) | st.integers(0, 10 ** 30).map(str))
    log = f"{text}\n[ 12.5] NVRM: Xid (PCI:0000:44:00): {xid}, pid=1, name=python, GPU has fallen off the bus.\n"
    result = reads(gpu_errors.parse_xid, log)
    if result is not None and parsing.is_count(xid):
        assert int(xid) in [event["xid"] for event in result["events"]]


@HOSTILE
@given(text=st.text())
def test_proc_version_and_kernel_release_are_read_or_refused(text):
    try:
        assert gpudirect.kernel_modules_flavour(text) in ("open", "proprietary")
    except parsing.ParseError:
        pass
    version = gpudirect.kernel_version(text)
    assert version is None or all(isinstance(part, int) for part in version)


@HOSTILE
@given(name=st.none() | st.text())
def test_any_product_name_gives_a_model_or_none(name):
    assert limits.model(name) is None or isinstance(limits.model(name), str)


@HOSTILE
@given(data=st.data())
def test_nvlink_limits_of_mutated_topologies_are_a_figure_or_a_reason(data):
    topology = reads(gpu.parse_topo_matrix, data.draw(mutated_text("nvidia-smi-topo-m.*")))
    if topology is not None:
        figure, reason = limits.nvlink_limit("NVIDIA H100 80GB HBM3", topology, 0)
        assert (figure is None) != (reason is None)


@HOSTILE
@given(document=json_values)
def test_arbitrary_json_is_data_or_a_parse_error(document):
    text = json.dumps(document)
    reads(nccl.parse_nccl_tests, "{" + text if not text.startswith("{") else text, dict, NCCL_STATUSES)
    reads(dcgm.parse_dcgmi_diag, text, dict, DCGM_STATUSES)
    if isinstance(document, dict):
        reads(dcgm.parse_dcgmi_diag, document, dict, DCGM_STATUSES)


@HOSTILE
@given(data=st.data())
def test_mutated_json_documents_are_data_or_a_parse_error(data):
    document = data.draw(mutated_json(json.loads(nccl_document())))
    reads(nccl.parse_nccl_tests, json.dumps(document), dict, NCCL_STATUSES)
    for original in (dcgm4_document(), json.loads(recorded("dcgmi-diag.*.json")[0][1].split("\n", 1)[1])):
        document = data.draw(mutated_json(original))
        reads(dcgm.parse_dcgmi_diag, json.dumps(document), dict, DCGM_STATUSES)
        if isinstance(document, dict):
            reads(dcgm.parse_dcgmi_diag, document, dict, DCGM_STATUSES)


@HOSTILE
@given(cell=st.sampled_from(HOSTILE_NUMBERS[:-1]) | st.floats(max_value=-1e-9) | st.floats(min_value=1e5 + 1),
       size=st.sampled_from(("8", "1048576", "17179869184")), column=st.sampled_from((7, 11)))
def test_a_hostile_busbw_is_never_ok(cell, size, column):
    """Never a pass: whatever stands in a busbw cell that no link can have measured, the run is not ok."""
    reads_as = reads(nccl.parse_nccl_tests, table_with(str(cell), column=column, size=size), dict, NCCL_STATUSES)
    assert reads_as is None or reads_as["status"] != "ok"


@HOSTILE
@given(value=st.sampled_from((-400, -1e-3, 1e300, float("inf"), float("nan"), "400", True, [], {})),
       index=st.sampled_from((0, 1)), block=st.sampled_from(("out_of_place", "in_place")))
def test_a_hostile_json_busbw_is_never_ok(value, index, block):
    body = json.loads(nccl_document())
    body["results"][index][block]["bus_bw"] = value
    reads_as = reads(nccl.parse_nccl_tests, json.dumps(body), dict, NCCL_STATUSES)
    assert reads_as is None or reads_as["status"] != "ok"


@HOSTILE
@given(value=st.sampled_from(HOSTILE_NUMBERS), element=st.sampled_from(("dram_uncorrectable", "sram_correctable",
                                                                        "remapped_row_unc", "max_link_width",
                                                                        "performance_state")))
def test_a_hostile_gpu_counter_is_never_read_as_a_count(value, element):
    text = (FIXTURES / SMI_XML).read_text()
    found = re.search(rf"<{element}>([^<]*)</{element}>", text)
    assert found, element
    value = "P" + value if element == "performance_state" else value
    counters = reads(gpu.gpu_counters, text.replace(found.group(0), f"<{element}>{value}</{element}>"), list)
    # N/A (or nothing) is what the driver writes where it reports nothing: None, never a number.
    assert counters is None or value in ("N/A", "")


@HOSTILE
@given(data=st.data())
def test_the_judges_read_whatever_the_parsers_return(data):
    """The judges of acceptance read a parser's data as it is: a parser's output never crashes its judge."""
    statuses = ("pass", "fail", "skip")
    counters = reads(gpu.gpu_counters, data.draw(mutated_text("nvidia-smi-q-x.*")), list)
    for judge in (acceptance.judge_ecc, acceptance.judge_memory_repair, acceptance.judge_clock_events,
                  acceptance.judge_pcie_link):
        assert counters is None or judge(counters)["status"] in statuses
    nvlink = reads(gpu_errors.parse_nvlink_errors, data.draw(mutated_text("nvidia-smi-nvlink-e.*")))
    assert nvlink is None or acceptance.judge_nvlink_errors(nvlink)["status"] in statuses
    diagnostic = reads(dcgm.parse_dcgmi_diag, data.draw(mutated_text("dcgmi-diag.*")), dict, DCGM_STATUSES)
    assert diagnostic is None or acceptance.judge_dcgm({"parsed": diagnostic, "level": 2, "rc": 0})["status"] in statuses
