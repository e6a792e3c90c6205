"""The dcgmi diag parser on outputs recorded on real machines; fixtures/ORIGINS.md names where each was published."""

import copy
import json

import pytest

from ansible_collections.hpcml.cluster.plugins.module_utils import dcgm, parsing
from unit_paths import FIXTURES

DEPLOYMENT_3X = ["Denylist", "NVML Library", "CUDA Main Library", "Permissions and OS Blocks", "Persistence Mode",
                 "Environment Variables", "Page Retirement/Row Remap", "Graphics Processes", "Inforom"]
DEPLOYMENT_2X = ["Blacklist", *DEPLOYMENT_3X[1:]]
EIGHT = [str(gpu) for gpu in range(8)]

# fixture: (status, format, level, DCGM version, driver, GPUs, [(test, category, result, {gpu: result})]).
RECORDED = {
    "dcgmi-diag.gcm.v2-r4-blacklist-all-pass.txt": (
        "pass", "text", 4, None, None, [],
        [(name, "Deployment", "pass", {}) for name in DEPLOYMENT_2X]
        + [("PCIe", "Integration", "pass", {}), ("GPU Memory", "Hardware", "pass", {}),
           ("Diagnostic", "Hardware", "pass", {}), ("Pulse Test", "Hardware", "pass", {}),
           ("SM Stress", "Stress", "pass", {}), ("Targeted Stress", "Stress", "pass", {}),
           ("Targeted Power", "Stress", "pass", {}), ("Memory Bandwidth", "Stress", "pass", {}),
           ("Memtest", "Stress", "pass", {})]),
    "dcgmi-diag.uber-prof.v2-r1-blacklist-pass-1gpu.txt": (
        "pass", "text", None, None, None, [],
        [(name, "Deployment", "pass", {}) for name in DEPLOYMENT_2X]),
    "dcgmi-diag.awsome-distributed-training.v3.3.3-r2-a100x8-pass.txt": (
        "pass", "text", 2, "3.3.3", "535.104.12", [],
        [(name, "Deployment", "pass", {}) for name in DEPLOYMENT_3X]
        + [("PCIe", "Integration", "pass", {}), ("GPU Memory", "Hardware", "pass", {})]),
    "dcgmi-diag.nccl-tests-264.v3.3.8-r3-h100x8-cuinit-fail.txt": (
        "fail", "text", 3, "3.3.8", "560.35.03", [],
        [(name, "Deployment", "pass", {}) for name in DEPLOYMENT_3X]
        + [("PCIe", "Integration", "skip", {}), ("GPU Memory", "Hardware", "fail", {}),
           ("Memory Bandwidth", "Stress", "skip", {}), ("EUD Test", "Stress", "skip", {})]),
    "dcgmi-diag.slurm-on-aws.v3.3.9-r3-2gpu-skips-printed-twice.txt": (
        "warn", "text", None, "3.3.9", "570.172.08", [],
        [(name, "Deployment", "pass", {}) for name in DEPLOYMENT_3X]
        + [("PCIe", "Integration", "skip", {}), ("GPU Memory", "Hardware", "skip", {}),
           ("Targeted Stress", "Stress", "skip", {}), ("Targeted Power", "Stress", "skip", {}),
           ("Memory Bandwidth", "Stress", "skip", {}), ("EUD Test", "Stress", "skip", {})]),
    "dcgmi-diag.dcgm-124.v4.4.2-r2-1gpu-pass.txt": (
        "pass", "text", 2, "4.4.2", "580.105.08", [0],
        [("software", "Deployment", "pass", {"0": "pass"}), ("memory", "Hardware", "pass", {"0": "pass"}),
         ("pcie", "Integration", "pass", {"0": "pass"})]),
    "dcgmi-diag.dcgm-253.v4.2.3-r2-4gpu-pcie-fail-cut.txt": (
        "fail", "text", None, "4.2.3", "570.148.08", [0, 1, 2, 3],
        [("software", "Deployment", "pass", dict.fromkeys("0123", "pass")),
         ("memory", "Hardware", "pass", dict.fromkeys("0123", "pass")),
         ("pcie", "Integration", "fail", dict.fromkeys("0123", "pass"))]),
    "dcgmi-diag.dcgm-253.v4.4.1-r2-b200x8-pcie-fail.txt": (
        "fail", "text", None, "4.4.1", "570.172.08", list(range(8)),
        [("software", "Deployment", "pass", dict.fromkeys(EIGHT, "pass")),
         ("memory", "Hardware", "pass", dict.fromkeys(EIGHT, "pass")),
         ("pcie", "Integration", "fail", dict.fromkeys(EIGHT, "pass"))]),
    "dcgmi-diag.dcgm-254.v4.4.1-r3-plugin-dir-error.txt": ("fail", "text", 3, None, None, [], []),
    # Excerpts a guide quoted: the head of a table whose Deployment shows an Error row, and a middle cut mid-row.
    "dcgmi-diag.ml-engineering.deployment-error-row-remap-excerpt.txt": ("fail", "text", None, None, None, [], []),
    "dcgmi-diag.ml-engineering.r2-gpu0-thermal-fail-excerpt.txt": (
        "fail", "text", None, None, None, list(range(8)),
        [("GPU Memory", None, "fail", {**dict.fromkeys(EIGHT[1:], "pass"), "0": "fail"})]),
    "dcgmi-diag.dcgm-jsonresulttests.v3.1.0-8gpu-warning-preamble-nulls.json": (
        "warn", "json", None, "3.1.0", None, list(range(8)),
        [(name, "Deployment", "pass", dict.fromkeys(EIGHT, "pass"))
         for name in ["Denylist", "NVML Library", "CUDA Main Library", "Permissions and OS-related Blocks",
                      "Persistence Mode", "Environmental Variables", "Page Retirement/Row Remap",
                      "Graphics Processes", "Inforom"]]
        + [("software", "Custom", "pass", dict.fromkeys(EIGHT, "pass"))]),
}


def parse(name, **kwargs):
    return dcgm.parse_dcgmi_diag((FIXTURES / name).read_text(), **kwargs)


def test_every_recorded_output_has_expectations():
    assert sorted(path.name for path in FIXTURES.glob("dcgmi-diag.*")) == sorted(RECORDED)


@pytest.mark.parametrize("name", RECORDED)
def test_recorded_output(name):
    status, fmt, level, version, driver, gpus, tests = RECORDED[name]
    report = parse(name)
    assert report["status"] == status
    assert report["format"] == fmt
    assert report["level"] == level
    assert report["dcgm_version"] == version
    assert report["driver_version"] == driver
    assert report["gpus"] == gpus
    assert [(test["name"], test["category"], test["result"], test["gpus"]) for test in report["tests"]] == tests
    # Only a pass explains nothing; every other status says why.
    assert (report["problems"] == []) == (status == "pass")


def test_cuinit_failure_names_every_gpu_and_keeps_info_apart():
    report = parse("dcgmi-diag.nccl-tests-264.v3.3.8-r3-h100x8-cuinit-fail.txt")
    memory = next(test for test in report["tests"] if test["name"] == "GPU Memory")
    assert len(memory["messages"]) == 8
    # The message is glued back from its 45-character pieces, the blank that began a piece kept.
    assert memory["messages"][0] == (
        "Warning: GPU 0 Error using CUDA API cuInit Check DCGM and system logs for errors. Reset GPU. Restart DCGM. "
        "Rerun diagnostics. Unable to initialize CUDA library: 'system not yet initialized'. . Please check if a CUDA "
        "sample program can be run successfully on this host. Refer to https://github.com/nvidia/cuda-samples")
    assert len(report["errors"]) == 8
    assert all("cuInit" in error for error in report["errors"])
    assert report["problems"][0] == "failed: GPU Memory"
    persistence = next(test for test in report["tests"] if test["name"] == "Persistence Mode")
    assert persistence["result"] == "pass"
    assert persistence["messages"][0].startswith("Info: Persistence mode for GPU 0 is disabled. Enable persistence")
    assert persistence["messages"][0].endswith("Persistence mode for GPU 4 is disabled. Enable pers")
    assert not any("Persistence" in error for error in report["errors"])


def test_4x_pcie_failure_with_passing_gpus_is_a_failure():
    report = parse("dcgmi-diag.dcgm-253.v4.4.1-r2-b200x8-pcie-fail.txt")
    assert report["errors"] == [
        "pcie: Warning: There was an internal error during the test: 'Output of child process (11167) couldn't be "
        "parsed: '* Line 1, Column 1   Syntax error: value, object or array expected. '' Check DCGM and system logs "
        "for errors. Reset GPU. Restart DCGM. Rerun diagnostics."]


def test_cut_table_that_failed_still_says_it_was_cut():
    report = parse("dcgmi-diag.dcgm-253.v4.2.3-r2-4gpu-pcie-fail-cut.txt")
    assert report["status"] == "fail"
    assert len(report["errors"]) == 4
    assert "the table has no closing border: the output was cut short" in report["problems"]


def test_dcgmi_errors_without_a_table_fail():
    report = parse("dcgmi-diag.dcgm-254.v4.4.1-r3-plugin-dir-error.txt")
    assert report["tests"] == []
    assert report["errors"] == [
        "Error: Unable to complete diagnostic for entities 0,1,2,3. Return: (-30) : DCGM GPU Diagnostic returned an "
        "error",
        "Error: Cannot load plugins. Unable to change to the plugin dir "
        "'/usr/libexec/datacenter-gpu-manager-4/plugins/cuda12/': 'No such file or directory'"]


def test_error_row_above_every_test_fails_the_run():
    report = parse("dcgmi-diag.ml-engineering.deployment-error-row-remap-excerpt.txt")
    assert report["errors"] == ["Error: GPU 3 has uncorrectable memory errors and row remappings are pending"]
    assert "the table has no closing border: the output was cut short" in report["problems"]


def test_thermal_failure_of_one_gpu_in_a_pasted_middle():
    report = parse("dcgmi-diag.ml-engineering.r2-gpu0-thermal-fail-excerpt.txt")
    assert report["errors"] == [
        "GPU Memory: Warning: GPU 0 Thermal violations totaling 13.3 seconds started at 9.7 seconds into the test "
        "for GPU 0 Verify that the cooling on this machine is functional, including external, thermal material "
        "interface, fans, and any other components."]
    assert report["problems"][2:] == [
        "the table has no heading row: the output's start is missing",
        "the table's last row breaks off in the middle: '|                           | ts.'",
        "the table has no closing border: the output was cut short",
        "the table has no Deployment section, which every run level prints"]


def test_all_skipped_past_deployment_is_no_pass():
    report = parse("dcgmi-diag.slurm-on-aws.v3.3.9-r3-2gpu-skips-printed-twice.txt", level=3)
    assert report["level"] == 3
    assert report["status"] == "warn"
    assert report["problems"] == ["every test past Deployment was skipped: PCIe, GPU Memory, Targeted Stress, "
                                  "Targeted Power, Memory Bandwidth, EUD Test"]


def test_stray_warning_before_the_json_is_a_warning():
    report = parse("dcgmi-diag.dcgm-jsonresulttests.v3.1.0-8gpu-warning-preamble-nulls.json")
    assert report["problems"] == ["dcgmi printed 'WARNING: THIS SHOULD NOT HAPPEN' outside its results"]


def test_json_already_loaded_reads_as_its_text():
    text = (FIXTURES / "dcgmi-diag.dcgm-jsonresulttests.v3.1.0-8gpu-warning-preamble-nulls.json").read_text()
    document = json.loads(text[text.index("{"):])
    report = dcgm.parse_dcgmi_diag(document)
    # Without the stray line, the same run passes.
    assert report["status"] == "pass"
    assert len(report["tests"]) == 10


# Variants cut from clean recordings: the parser must not read what is left as a pass.

def lines_of(name):
    return (FIXTURES / name).read_text().splitlines(keepends=True)


@pytest.mark.parametrize("name", ["dcgmi-diag.gcm.v2-r4-blacklist-all-pass.txt",
                                  "dcgmi-diag.awsome-distributed-training.v3.3.3-r2-a100x8-pass.txt",
                                  "dcgmi-diag.dcgm-124.v4.4.2-r2-1gpu-pass.txt",
                                  "dcgmi-diag.uber-prof.v2-r1-blacklist-pass-1gpu.txt"])
@pytest.mark.parametrize("cut", [1, 3, 6])
def test_bottom_cut_is_incomplete(name, cut):
    report = dcgm.parse_dcgmi_diag("".join(lines_of(name)[:-cut]))
    assert report["status"] == "incomplete"
    assert any("cut short" in problem or "missing" in problem for problem in report["problems"])


def test_bottom_cut_that_drops_whole_sections_names_them():
    # The level-4 run without its Stress section and closing border: the level says what is missing.
    lines = lines_of("dcgmi-diag.gcm.v2-r4-blacklist-all-pass.txt")
    report = dcgm.parse_dcgmi_diag("".join(lines[:lines.index(next(line for line in lines if "Stress  " in line))]))
    assert report["status"] == "incomplete"
    assert "level 4 prints the sections Deployment, Integration, Hardware, Stress; missing: Stress" in report[
        "problems"]


def test_caller_level_finds_missing_sections_of_a_closed_table():
    # dcgm 124 ran level 2; asked as level 3 its table lacks Stress.
    report = parse("dcgmi-diag.dcgm-124.v4.4.2-r2-1gpu-pass.txt", level=3)
    assert report["status"] == "incomplete"


@pytest.mark.parametrize("name", ["dcgmi-diag.gcm.v2-r4-blacklist-all-pass.txt",
                                  "dcgmi-diag.dcgm-124.v4.4.2-r2-1gpu-pass.txt"])
def test_top_cut_is_incomplete(name):
    lines = lines_of(name)
    # Drop everything up to and including the first section heading: the table lost its head and Deployment.
    first_section = next(index for index, line in enumerate(lines) if line.startswith("|-----"))
    report = dcgm.parse_dcgmi_diag("".join(lines[first_section + 2:]))
    assert report["status"] == "incomplete"
    assert "the table has no heading row: the output's start is missing" in report["problems"]


def test_elided_rows_are_incomplete():
    lines = lines_of("dcgmi-diag.dcgm-124.v4.4.2-r2-1gpu-pass.txt")
    report = dcgm.parse_dcgmi_diag("".join([*lines[:12], "...\n", *lines[12:]]))
    assert report["status"] == "incomplete"
    assert "the table breaks off at a line that is no table row: '...'" in report["problems"]


def test_json_cut_short_is_incomplete():
    text = (FIXTURES / "dcgmi-diag.dcgm-jsonresulttests.v3.1.0-8gpu-warning-preamble-nulls.json").read_text()
    start = text.index("{")
    for end in (len(text) - 5, len(text) // 2, start + 40):
        report = dcgm.parse_dcgmi_diag(text[start:end])
        assert report["status"] == "incomplete", end
        assert report["problems"] == ["the JSON document ends before it closes: the output was cut short"]


def test_json_cut_after_a_failure_fails():
    text = (FIXTURES / "dcgmi-diag.dcgm-jsonresulttests.v3.1.0-8gpu-warning-preamble-nulls.json").read_text()
    start = text.index("{")
    failing = text.replace('"status" : "PASS"', '"status" : "FAIL"', 1)
    report = dcgm.parse_dcgmi_diag(failing[start:len(failing) // 2])
    assert report["status"] == "fail"


# DCGM 4.x JSON: no recording was found (ORIGINS.md); these documents follow Diag.cpp of v4.6.0
# (HelperJsonBuildOutput), built here from the values of the dcgm 124 table.

def dcgm4_document(pcie="Pass"):
    def test(name, status, warnings=None):
        result = {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0, "status": status}
        summary = {"status": status}
        if warnings:
            result["warnings"] = summary["warnings"] = [{"warning": warnings, "error_id": 99, "error_category": 1,
                                                         "error_severity": 1}]
        return {"name": name, "results": [result], "test_summary": summary}

    return {
        "DCGM Diagnostic": {"test_categories": [
            {"category": "Deployment", "tests": [test("software", "Pass")]},
            {"category": "Hardware", "tests": [test("memory", "Pass")]},
            {"category": "Integration", "tests": [test("pcie", pcie, "PCIe replay rate exceeded"
                                                        if pcie != "Pass" else None)]},
        ]},
        "entity_groups": [{"entity_group": "GPU", "entity_group_id": 1,
                           "entities": [{"entity_id": 0, "device_id": "2237", "serial_num": "1234"}]}],
        "metadata": {"version": "4.4.2", "Driver Version Detected": "580.105.08"},
    }


def test_dcgm4_json_pass():
    # The level comes from the command line recorded above the document.
    report = dcgm.parse_dcgmi_diag("$ dcgmi diag -r 2 -j\n" + json.dumps(dcgm4_document(), indent=4))
    assert (report["status"], report["level"]) == ("pass", 2)
    assert (report["dcgm_version"], report["driver_version"], report["gpus"]) == ("4.4.2", "580.105.08", [0])
    assert [(test["name"], test["result"], test["gpus"]) for test in report["tests"]] == [
        ("software", "pass", {"0": "pass"}), ("memory", "pass", {"0": "pass"}), ("pcie", "pass", {"0": "pass"})]


def test_dcgm4_json_failure_carries_its_warning():
    report = dcgm.parse_dcgmi_diag(dcgm4_document(pcie="Fail"))
    assert report["status"] == "fail"
    assert report["errors"] == ["pcie: Warning (GPU 0): PCIe replay rate exceeded"]


def test_dcgm4_json_warn():
    report = dcgm.parse_dcgmi_diag(dcgm4_document(pcie="Warn"))
    assert report["status"] == "warn"
    assert report["problems"][0] == "warned: pcie"


def test_dcgm4_json_runtime_error_fails():
    # What dcgmi -j prints when the run could not start (Diag::HelperDisplayFailureMessage).
    document = {"DCGM Diagnostic": {"version": "4.4.1", "runtime_error": "Error: Diagnostic could not be run while "
                                                                           "DCGM is paused."}}
    report = dcgm.parse_dcgmi_diag(document)
    assert report["status"] == "fail"
    assert report["dcgm_version"] == "4.4.1"
    assert report["errors"] == ["runtime_error: Error: Diagnostic could not be run while DCGM is paused."]


def test_dcgm4_json_missing_category_for_level_is_incomplete():
    document = dcgm4_document()
    document["DCGM Diagnostic"]["test_categories"].pop()
    assert dcgm.parse_dcgmi_diag(copy.deepcopy(document), level=2)["status"] == "incomplete"
    assert dcgm.parse_dcgmi_diag(document)["status"] == "pass"


@pytest.mark.parametrize("text", ["", "   \n", "Successfully ran diagnostic for group.\n", "hello world",
                                  "{not json at all}", '{"something": "else"}', "[1, 2, 3]"])
def test_input_it_does_not_understand_raises(text):
    with pytest.raises(parsing.ParseError):
        dcgm.parse_dcgmi_diag(text)


def test_unknown_result_word_raises():
    text = (FIXTURES / "dcgmi-diag.dcgm-124.v4.4.2-r2-1gpu-pass.txt").read_text()
    with pytest.raises(parsing.ParseError, match="Maybe"):
        dcgm.parse_dcgmi_diag(text.replace("| Pass      ", "| Maybe     ", 1))


def test_unknown_json_status_raises():
    document = dcgm4_document()
    document["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["test_summary"]["status"] = "Maybe"
    with pytest.raises(parsing.ParseError, match="Maybe"):
        dcgm.parse_dcgmi_diag(document)


def test_tables_that_disagree_raise():
    text = (FIXTURES / "dcgmi-diag.slurm-on-aws.v3.3.9-r3-2gpu-skips-printed-twice.txt").read_text()
    second = text.rindex("| PCIe ")
    with pytest.raises(parsing.ParseError, match="disagree"):
        dcgm.parse_dcgmi_diag(text[:second] + text[second:].replace("Skip - All", "Fail - All", 1))
