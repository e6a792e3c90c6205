"""Acceptance judging: GPU health counters from recorded `nvidia-smi -q -x`, Xid lines published in issues, NVLink
error counters, the node's physical limits from facts built with the project's own parsers, and the judge's rules."""

import json
import sys

import pytest

from ansible_collections.hpcml.cluster.plugins.module_utils import acceptance, dcgm, gpu, gpu_errors, limits, nccl, parsing, rdma

H100_NAME = "NVIDIA H100 80GB HBM3"
A100_NAME = "NVIDIA A100-SXM4-80GB"
# What judges an H100 x8 without thresholds of the inventory's: the default table's entry.
H100_THRESHOLDS = acceptance.sku_thresholds({}, "H100 x8")


def counters(fixture_text, name):
    return gpu.gpu_counters(fixture_text(name))


def gpu_facts(fixture_text, topo, name, count=None, nvswitches=0):
    """hpcml_gpu as gpu_facts builds it: the topology parsed from a recorded `topo -m`, a GPU per GPU column."""
    topology = gpu.parse_topo_matrix(fixture_text(topo))
    gpus = [d for d in topology["devices"] if d.startswith("GPU")]
    return {"present": True, "gpus": [{"name": name} for _ in range(count or len(gpus))], "topology": topology,
            "topology_error": None, "nvswitch_count": nvswitches}


def rdma_facts(fixture_text, name):
    """hpcml_rdma's devices from a recorded ibstat, as sysfs would show them (state in capitals, rate in Gb/s)."""
    devices = []
    for device, info in rdma.parse_ibstat(fixture_text(name)).items():
        ports = [{"port": number, "state": port["state"].upper(), "link_layer": port["link_layer"],
                  "rate_gbps": float(port["rate"])} for number, port in info["ports"].items()]
        devices.append({"name": device, "nvswitch_management": False, "ports": ports})
    return {"present": True, "devices": devices}


@pytest.fixture
def h100(fixture_text):
    return (gpu_facts(fixture_text, "nvidia-smi-topo-m.ml-engineering.h100-x8-nv18-cpu-numa.txt", H100_NAME),
            rdma_facts(fixture_text, "ibstat.gpud.47.0.h100.all.active.2.txt"))


# --- counters -------------------------------------------------------------------------------------------------


def test_counters_of_a_k80_that_lost_memory(fixture_text):
    first = counters(fixture_text, "nvidia-smi-q-x.openpai.k80-x4-minor-out-of-order.xml")[0]
    assert first["ecc"] == {"volatile_uncorrectable": 0, "aggregate_uncorrectable": 7, "volatile_correctable": 0,
                            "aggregate_correctable": 7}
    assert first["retired_pages"] == {"single_bit": 1, "double_bit": 1, "pending": False}
    # Kepler has no row remapper and its driver (430) no thermal slowdown reason: not reported, not zero.
    assert set(first["remapped_rows"].values()) == {None}
    assert first["clock_events"]["hw_thermal_slowdown"] is None
    assert first["clock_events"]["applications_clocks_setting"] is True


def test_counters_of_new_and_old_element_names(fixture_text):
    old = counters(fixture_text, "nvidia-smi-q-x.netdata.a100-sxm4-mig.xml")[0]  # clocks_throttle_reasons
    new = counters(fixture_text, "nvidia-smi-q-x.telegraf.a100-sxm4-mig-1-of-4.xml")[0]  # clocks_event_reasons
    assert old["clock_events"]["hw_slowdown"] is False and new["clock_events"]["hw_slowdown"] is False
    # Volatile counts are N/A in the older recording: aggregate alone is reported.
    assert old["ecc"]["volatile_uncorrectable"] is None and old["ecc"]["aggregate_uncorrectable"] == 0
    rtx = counters(fixture_text, "nvidia-smi-q-x.netdata.rtx-4090-driver-535.xml")[0]
    assert rtx["remapped_rows"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}
    assert rtx["pcie"] == {"current_gen": 1, "max_gen": 3, "current_width": 16, "max_width": 16}


def test_counters_refuse_a_value_that_is_no_count(fixture_text):
    text = fixture_text("nvidia-smi-q-x.netdata.tesla-p100.xml").replace(
        "<retired_count>0</retired_count>", "<retired_count>lots</retired_count>", 1)
    with pytest.raises(parsing.ParseError, match=r"retired_count.*'lots', not a count"):
        gpu.gpu_counters(text)


def test_ecc_fails_on_a_k80_with_uncorrectable_errors(fixture_text):
    result = acceptance.judge_ecc(counters(fixture_text, "nvidia-smi-q-x.openpai.k80-x4-minor-out-of-order.xml"))
    assert result["status"] == "fail"
    assert "GPU 0 (00001580:00:00.0): uncorrectable ECC errors, 0 since the driver loaded, 7 in its life" in \
        result["reason"]
    assert "GPU 1 (00002DF7:00:00.0)" in result["reason"] and "GPU 2" not in result["reason"]


def test_ecc_is_a_skip_where_the_gpu_has_none(fixture_text):
    result = acceptance.judge_ecc(counters(fixture_text, "nvidia-smi-q-x.netdata.rtx-4090-driver-535.xml"))
    assert result["status"] == "skip" and "not reported by GPU 0" in result["reason"]


def test_ecc_and_memory_repair_pass_on_a_healthy_p100(fixture_text):
    healthy = counters(fixture_text, "nvidia-smi-q-x.netdata.tesla-p100.xml")
    assert acceptance.judge_ecc(healthy)["status"] == "pass"
    assert acceptance.judge_memory_repair(healthy)["status"] == "pass"


def test_memory_repair_fails_on_a_pending_remap_and_a_remap_failure(fixture_text):
    text = fixture_text("nvidia-smi-q-x.netdata.rtx-4090-driver-535.xml")
    assert acceptance.judge_memory_repair(gpu.gpu_counters(text))["status"] == "pass"
    broken = text.replace("<remapped_row_pending>No", "<remapped_row_pending>Yes").replace(
        "<remapped_row_failure>No", "<remapped_row_failure>Yes")
    result = acceptance.judge_memory_repair(gpu.gpu_counters(broken))
    assert result["status"] == "fail"
    assert "row remapping failed" in result["reason"] and "a row remap is pending" in result["reason"]


def test_clock_events_fail_on_a_thermal_slowdown(fixture_text):
    text = fixture_text("nvidia-smi-q-x.telegraf.rtx-3080-driver-595.xml")
    assert acceptance.judge_clock_events(gpu.gpu_counters(text))["status"] == "pass"
    hot = text.replace("<clocks_event_reason_hw_thermal_slowdown>Not Active",
                       "<clocks_event_reason_hw_thermal_slowdown>Active")
    result = acceptance.judge_clock_events(gpu.gpu_counters(hot))
    assert result["status"] == "fail" and "clocks slowed by hw_thermal_slowdown" in result["reason"]


def test_clock_events_idle_and_application_clocks_do_not_fail_but_missing_reasons_skip(fixture_text):
    # The K80's application clocks reason is active, its thermal reason N/A: nothing failed, not everything read.
    result = acceptance.judge_clock_events(counters(fixture_text, "nvidia-smi-q-x.openpai.k80-x4-minor-out-of-order.xml"))
    assert result["status"] == "skip"
    assert "hw_thermal_slowdown, hw_power_brake_slowdown" in result["reason"]


def test_pcie_link_on_riser_cards_fails(fixture_text):
    # A mining rig's GTX 1070s on x1 risers, busy (P2): the width lost is a fault whatever the load.
    result = acceptance.judge_pcie_link(counters(fixture_text, "nvidia-smi-q-x.openpai.gtx-1070-2-of-6.xml"))
    assert result["status"] == "fail"
    assert "GPU 0 (00000000:01:00.0): PCIe link degraded, x1 of x16 lanes" in result["reason"]


def test_pcie_link_below_its_generation_while_idle_asks_for_a_check_under_load(fixture_text):
    text = fixture_text("nvidia-smi-q-x.netdata.rtx-4090-driver-535.xml")
    result = acceptance.judge_pcie_link(gpu.gpu_counters(text))
    assert result["status"] == "skip"
    assert result["reason"] == "check under load: GPU 0 (00000000:84:00.0) at Gen1 of Gen3 while idle"
    busy = text.replace("<clocks_event_reason_gpu_idle>Active", "<clocks_event_reason_gpu_idle>Not Active")
    assert acceptance.judge_pcie_link(gpu.gpu_counters(busy))["reason"] == \
        "GPU 0 (00000000:84:00.0): PCIe link degraded, Gen1 of Gen3"


def test_pcie_link_at_its_maximum_passes(fixture_text):
    assert acceptance.judge_pcie_link(counters(fixture_text, "nvidia-smi-q-x.telegraf.rtx-3080-driver-595.xml"))[
        "status"] == "pass"


# --- Xid ------------------------------------------------------------------------------------------------------

# Lines as published: journalctl -k lines of an NVLink failure
# (https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1150), where Xid 45 names the Xid that caused it.
XID_45 = ("kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149\n"
          "kernel: NVRM: Xid (PCI:0000:ed:00): 45, pid=1818992, name=python3, Ch 0000000c caused by previous Xid 145\n")
# dmesg --ctime from https://github.com/leptonai/gpud/pull/46: an application fault and a context switch timeout.
XID_APP = ("[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM "
           "Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter\n"
           "[Fri Aug 30 11:43:14 2024] NVRM: Xid (PCI:0000:cb:00): 109, pid=1797828, name=pt_main_thread, "
           "Ch 00000008, errorString CTX SWITCH TIMEOUT, Info 0x58005\n")
# https://github.com/NVIDIA/NVSentinel/issues/155: the Xid 79 line, and a driver 570 reporting the same without one.
XID_79 = "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus\n"
FALLEN = ("[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
          "               NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
          "               NVRM: fallen off the bus and is not responding to commands.\n"
          "[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s).\n")
# NVLink5 Xids carry their severity (https://github.com/leptonai/gpud/pull/1160).
XID_149 = ("NVRM: Xid (PCI:0000:01:00): 144, SAW_MVB Nonfatal XC0 i0 Link 0 (0x00000001 0x00000008 0x00000000 "
           "0x00000000 0x00000000 0x00000000)\n"
           "NVRM: Xid (PCI:0000:00:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x026001c6 0x00000000 0x00000000 "
           "0x00000000 0x00000000 0x00000000)\n")


def test_xid_45_is_not_fatal_and_the_xid_it_names_is_not_counted():
    parsed = gpu_errors.parse_xid(XID_45)
    assert [(e["pci"], e["xid"], e["fatal"]) for e in parsed["events"]] == [("0000:dc:00", 45, False),
                                                                             ("0000:ed:00", 45, False)]
    assert acceptance.judge_xid(parsed) | {"detail": None} == acceptance.check(
        "pass", "no fatal Xid; other Xids: 45 x2", 0, "events", detail=None) | {"detail": None}


def test_application_xids_pass_and_fallen_off_the_bus_fails():
    assert acceptance.judge_xid(gpu_errors.parse_xid(XID_APP))["reason"] == "no fatal Xid; other Xids: 13 x1, 109 x1"
    result = acceptance.judge_xid(gpu_errors.parse_xid(XID_APP + XID_79))
    assert result["status"] == "fail" and result["measured"] == 1
    assert result["reason"].startswith("Xid 79 (GPU has fallen off the bus) x1 on PCI 0000:44:00")
    silent = gpu_errors.parse_xid(FALLEN)
    assert [(e["pci"], e["xid"], e["fatal"]) for e in silent["events"]] == [("0000:b3:00.0", 79, True)]


def test_nvlink5_xids_fail_only_when_fatal():
    parsed = gpu_errors.parse_xid(XID_149)
    assert [(e["xid"], e["fatal"]) for e in parsed["events"]] == [(144, False), (149, True)]
    assert "Xid 149 (fatal NVLink error) x1" in acceptance.judge_xid(parsed)["reason"]


def test_an_empty_kernel_log_is_unreadable_not_clean():
    with pytest.raises(parsing.ParseError, match="kernel log printed nothing"):
        gpu_errors.parse_xid("\n")
    assert gpu_errors.parse_xid("[    0.000000] Linux version 6.8.0\n")["events"] == []


# --- NVLink errors --------------------------------------------------------------------------------------------

NVLINK_E = "nvidia-smi-nvlink-e.ml-engineering.h100-x18-elided.txt"


def test_nvlink_errors_refuse_the_authors_elision_and_read_the_rest(fixture_text):
    text = fixture_text(NVLINK_E)
    with pytest.raises(parsing.ParseError, match=r"unexpected line '\[\.\.\.\]' under GPU 0"):
        gpu_errors.parse_nvlink_errors(text)
    parsed = gpu_errors.parse_nvlink_errors(text.replace("         [...]\n", ""))
    assert parsed["gpus"][0]["name"] == H100_NAME
    assert sorted(parsed["gpus"][0]["links"]) == [0, 1, 17]
    assert parsed["gpus"][0]["links"][17] == {"Replay Errors": 0, "Recovery Errors": 0, "CRC Errors": 0}
    assert acceptance.judge_nvlink_errors(parsed)["reason"] == "no NVLink error on 3 link(s)"
    bad = gpu_errors.parse_nvlink_errors(text.replace("         [...]\n", "").replace(
        "Link 1: CRC Errors: 0", "Link 1: CRC Errors: 12"))
    result = acceptance.judge_nvlink_errors(bad)
    assert (result["status"], result["reason"], result["measured"]) == ("fail", "GPU 0 link 1: CRC Errors 12", 12)


def test_nvlink_errors_of_nothing_fail_loudly():
    with pytest.raises(parsing.ParseError, match="no 'GPU n:' line"):
        gpu_errors.parse_nvlink_errors("NVIDIA-SMI has failed\n")


# --- limits ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, expected", [
    (H100_NAME, "H100"), (A100_NAME, "A100"), ("NVIDIA A100-PCIE-40GB", "A100 PCIe"), ("NVIDIA H100 NVL", "H100 NVL"),
    ("Tesla V100-SXM2-32GB", "V100"), ("NVIDIA GeForce RTX 4090", "RTX 4090"), ("NVIDIA RTX A6000", "RTX A6000"),
])
def test_model_names(name, expected):
    assert limits.model(name) == expected


def test_h100_x8_limits(h100):
    facts, nics = h100
    result = limits.limits(facts, nics, {"ready": True, "nearest_nics": {}}, None)
    assert limits.sku(facts) == ("H100 x8", None)
    assert result["intra_node_busbw_gbs"] == 450.0
    assert result["intra_node_basis"] == "NVLink4 x18 at 25 GB/s per direction"
    # Eight NDR ports; the 200 Gb/s Ethernet bond is the slowest port, so without topology it sets the rate.
    assert (result["per_nic_gbps"], result["nic_count"]) == (200.0, 9)
    near = {f"GPU{i}": {"link": "PIX", "nics": [f"mlx5_{n}"]} for i, n in enumerate((0, 1, 4, 5, 6, 7, 8, 9))}
    result = limits.limits(facts, nics, {"ready": True, "nearest_nics": near}, None)
    assert (result["per_nic_gbps"], result["nic_count"], result["inter_node_busbw_gbs"]) == (400.0, 8, 400.0)
    assert result["gpudirect"] is True
    elsewhere = {"GPU0": {"link": "PIX", "nics": ["mlx5_2"]}}
    assert limits.limits(facts, nics, {"ready": True, "nearest_nics": elsewhere}, None)["reasons"]["inter_node"] == \
        "no active RDMA port on a NIC nearest to a GPU (mlx5_2)"


def test_a100_x8_and_dgx1_v100_limits(fixture_text):
    a100 = gpu_facts(fixture_text, "nvidia-smi-topo-m.xuesongtap-blog.a100-x8-nv12-17nic.txt", A100_NAME)
    assert limits.limits(a100, {}, None, None)["intra_node_basis"] == "NVLink3 x12 at 25 GB/s per direction"
    # DGX-1's hybrid cube mesh: NV1, NV1, NV2, NV2 to four peers, six links of NVLink2.
    v100 = gpu_facts(fixture_text, "nvidia-smi-topo-m.ucx-py.dgx1-v100-x8-mlx5-indented.txt", "Tesla V100-SXM2-32GB")
    result = limits.limits(v100, {}, None, None)
    assert (result["intra_node_busbw_gbs"], result["intra_node_basis"]) == (150.0,
                                                                          "NVLink2 x6 at 25 GB/s per direction")
    assert result["reasons"]["inter_node"] == "no active RDMA port"


def test_pcie_only_limits_come_from_the_counters(fixture_text):
    facts = gpu_facts(fixture_text, "nvidia-smi-topo-m.xuesongtap-blog.a10-x4-sys-2nic.txt", "NVIDIA A10")
    skip = {k: v for k, v in ALL_BUT_NCCL.items() if k != "nvlink_errors"}
    assert acceptance.judge(facts, {}, None, nccl=[nccl_run(20.0)], skip=skip)["checks"]["nvlink_errors"] == \
        acceptance.check("skip", "no NVLink between the GPUs (nvidia-smi topo -m)")
    without = limits.limits(facts, {}, None, None)
    assert without["intra_node_busbw_gbs"] is None
    assert "no NVLink between the GPUs; and the PCIe links are unknown" in without["reasons"]["intra_node"]
    # The A10s' own -q -x was not published: four copies of a Gen4 x16 card's counters stand in for it.
    four = counters(fixture_text, "nvidia-smi-q-x.telegraf.rtx-3080-driver-595.xml") * 4
    result = limits.limits(facts, {}, None, four)
    assert result["intra_node_busbw_gbs"] == 31.504
    assert result["intra_node_basis"] == "PCIe Gen4 x16 (no NVLink between the GPUs)"


def test_no_gpu_limits():
    result = limits.limits({"present": False, "gpus": []}, {}, None, None)
    assert result["intra_node_busbw_gbs"] is None and result["reasons"]["intra_node"] == "no NVIDIA GPU on this node"
    assert limits.sku({"present": False}) == (None, "no NVIDIA GPU on this node")


# --- the judge ------------------------------------------------------------------------------------------------


def nccl_run(busbw, size=acceptance.GIB16, test="all_reduce_perf", scope="node", peer=None, status="ok", rc=0,
             wrong=0, ranks=None, problems=()):
    """parse_nccl_tests's shape, by hand: one row at the size asked and a smaller one."""
    def row(size_bytes, value):
        return {"size_bytes": size_bytes, "count": size_bytes // 4, "type": "float", "redop": "sum", "root": -1,
                "out_of_place": {"time_us": 1.0, "algbw_gbs": value, "busbw_gbs": value, "wrong": wrong},
                "in_place": {"time_us": 1.0, "algbw_gbs": value, "busbw_gbs": value, "wrong": 0}}
    parsed = {"status": status, "test": test, "ranks": ranks or [], "rows": [row(1024, 1.0), row(size, busbw)],
              "avg_busbw_gbs": busbw / 2, "max_busbw_gbs": busbw, "errors": [], "problems": list(problems)}
    return {"test": test, "scope": scope, "peer": peer, "parsed": parsed, "rc": rc}


ALL_BUT_NCCL = {"dcgm_diag": "not asked", "smi_xml": "not asked", "gpu_xid": "not asked",
                "nvlink_errors": "not asked", "nccl_all_gather": "not asked", "nccl_reduce_scatter": "not asked",
                "nccl_alltoall": "not asked"}


def judged(h100, *runs, **kwargs):
    facts, nics = h100
    kwargs.setdefault("skip", ALL_BUT_NCCL)
    return acceptance.judge(facts, nics, {"ready": True}, nccl=list(runs), **kwargs)


def test_all_reduce_at_the_threshold_passes_and_below_it_fails_naming_both_numbers(h100):
    good = judged(h100, nccl_run(483.2))["checks"]["nccl_all_reduce"]
    assert good == acceptance.check("pass", "483.2 GB/s at 16 GiB, 1.07 of 450 GB/s (NVLink4 x18 at 25 GB/s per "
                                            "direction), threshold 460 GB/s (default table)", 483.2, "GB/s", 450.0,
                                    1.074, acceptance.Threshold(460.0, "H100 x8.all_reduce_busbw_gbs", "default"))
    bad = judged(h100, nccl_run(350.0))
    assert bad["status"] == "fail"
    assert bad["checks"]["nccl_all_reduce"]["reason"] == (
        "350 GB/s at 16 GiB is below the H100 x8 threshold of 460 GB/s (default table); 350 GB/s at 16 GiB is 0.778 of "
        "the limit 450 GB/s (NVLink4 x18 at 25 GB/s per direction), below 0.8")


def test_busbw_is_taken_at_the_largest_size_where_the_thresholds_size_was_not_run(h100):
    result = judged(h100, nccl_run(470.0, size=8 * 2**30))["checks"]["nccl_all_reduce"]
    assert result["reason"].startswith("470 GB/s at 8 GiB")


def test_a_sku_without_threshold_is_judged_by_fraction_alone(fixture_text):
    # Four H800 in a VM: NV8 to each peer is the 8 links each has (the export variant), not 24.
    facts = gpu_facts(fixture_text, "nvidia-smi-topo-m.awesome-ml-sys.h800-x4-vm-17nic-no-affinity.txt",
                      "NVIDIA H800")
    result = acceptance.judge(facts, {}, None, nccl=[nccl_run(180.0)], skip=ALL_BUT_NCCL)
    check = result["checks"]["nccl_all_reduce"]
    assert result["sku"] == "H800 x4" and check["threshold"] is None
    assert (check["threshold_key"], check["threshold_source"], result["min_fraction_source"]) == (None, "none", "global")
    assert (check["status"], check["limit"], check["fraction"]) == ("pass", 200.0, 0.9)
    assert check["reason"] == ("180 GB/s at 16 GiB, 0.90 of 200 GB/s (NVLink4 x8 at 25 GB/s per direction); no "
                               "threshold for this test on H800 x4: judged by the fraction of the limit alone")


def test_incomplete_output_wrong_results_and_a_failed_exit_fail(h100):
    cut = judged(h100, nccl_run(480.0, status="incomplete", problems=["no '# Avg bus bandwidth' line"]))
    assert cut["checks"]["nccl_all_reduce"]["reason"] == "all_reduce_perf: incomplete: no '# Avg bus bandwidth' line"
    wrong = judged(h100, nccl_run(480.0, wrong=3))["checks"]["nccl_all_reduce"]
    assert wrong["status"] == "fail" and "3 wrong at 1 KiB out-of-place" in wrong["reason"]
    exited = judged(h100, nccl_run(480.0, rc=1))["checks"]["nccl_all_reduce"]
    assert exited["reason"] == "all_reduce_perf: exited with 1 although its output reads as complete"
    unreadable = dict(nccl_run(480.0), parsed=parsing.ParseError("all_reduce_perf printed nothing"))
    assert judged(h100, unreadable)["checks"]["nccl_all_reduce"]["reason"] == \
        "all_reduce_perf: all_reduce_perf printed nothing"


def test_checks_not_run_are_skips_with_the_roles_reason_and_a_silent_gap_is_an_error(h100):
    result = judged(h100, nccl_run(480.0))
    assert result["checks"]["dcgm_diag"] == acceptance.check("skip", "not asked")
    assert result["checks"]["gpu_pcie_link"] == acceptance.check("skip", "not asked")
    with pytest.raises(ValueError, match="check nccl_all_reduce: no output to judge and no reason in skip"):
        judged(h100)
    with pytest.raises(ValueError, match="skip names checks that do not exist: nccl_broadcast"):
        judged(h100, nccl_run(480.0), skip=dict(ALL_BUT_NCCL, nccl_broadcast="x"))


def test_a_node_without_gpu_skips_everything_by_itself():
    result = acceptance.judge({"present": False, "gpus": []}, {}, {})
    assert result["status"] == "pass" and result["sku"] is None
    assert {c["status"] for c in result["checks"].values()} == {"skip"}
    assert list(result["checks"]) == list(acceptance.CHECKS)


def test_counters_xid_and_nvlink_judged_together(h100, fixture_text):
    facts, nics = h100
    result = acceptance.judge(
        facts, nics, {"ready": True}, nccl=[nccl_run(480.0)],
        counters=counters(fixture_text, "nvidia-smi-q-x.openpai.k80-x4-minor-out-of-order.xml"),
        xid=gpu_errors.parse_xid(XID_79), nvlink=parsing.ParseError("nvidia-smi nvlink -e printed nothing"),
        skip={k: v for k, v in ALL_BUT_NCCL.items() if k not in ("smi_xml", "gpu_xid", "nvlink_errors")})
    statuses = {name: c["status"] for name, c in result["checks"].items()}
    assert statuses["gpu_ecc"] == "fail" and statuses["gpu_xid"] == "fail"
    assert result["checks"]["nvlink_errors"] == acceptance.check(
        "fail", "nvidia-smi nvlink -e: nvidia-smi nvlink -e printed nothing")


def dcgm_run(status, tests, rc=0):
    return {"level": 2, "rc": rc, "parsed": {"status": status, "tests": tests, "errors": [], "problems": []}}


def test_dcgm_pass_warn_and_nothing_run(h100):
    passed = [{"name": "Memory", "result": "pass", "gpus": {"0": "pass"}, "messages": []}]
    assert acceptance.judge_dcgm(dcgm_run("pass", passed))["status"] == "pass"
    warned = [*passed, {"name": "PCIe", "result": "warn", "gpus": {"0": "pass", "3": "warn"},
                        "messages": ["PCIe replay count above threshold"]}]
    result = acceptance.judge_dcgm(dcgm_run("warn", warned))
    assert result["reason"] == "dcgmi diag -r 2: PCIe warn on GPU 3: PCIe replay count above threshold"
    failed = [{"name": "Diagnostic", "result": "fail", "gpus": {"0": "pass", "5": "fail"},
               "messages": ["GPU 5: Double-bit ECC error"]}]
    result = acceptance.judge_dcgm(dcgm_run("fail", failed, rc=226))
    assert (result["status"], result["measured"]) == ("fail", 1)
    assert result["reason"] == "dcgmi diag -r 2: Diagnostic fail on GPU 5: GPU 5: Double-bit ECC error"
    assert acceptance.judge_dcgm(dcgm_run("pass", passed, rc=1))["reason"] == \
        "dcgmi diag -r 2: exited with 1 although every test passed"
    cut = dict(dcgm_run("incomplete", passed), parsed={"status": "incomplete", "tests": [], "errors": [],
                                                       "problems": ["the JSON ends early"]})
    assert acceptance.judge_dcgm(cut)["reason"] == "dcgmi diag -r 2: incomplete: the JSON ends early"
    skipped = [{"name": "Memory", "result": "skip", "gpus": {}, "messages": []}]
    assert acceptance.judge_dcgm(dcgm_run("pass", skipped))["reason"] == \
        "dcgmi diag -r 2: no test passed (all skipped or not run)"


def test_links_between_two_h100_nodes(h100):
    facts, nics = h100
    near = {f"GPU{i}": {"link": "PIX", "nics": [f"mlx5_{n}"]} for i, n in enumerate((0, 1, 4, 5, 6, 7, 8, 9))}
    direct = {"ready": True, "nearest_nics": near}
    mine = limits.limits(facts, nics, direct, None)
    ranks = [{"rank": r, "host": "a" if r < 8 else "b"} for r in range(16)]
    run = nccl_run(372.0, scope="pair", peer="gpu02", ranks=ranks)
    link = acceptance.judge_link(run, mine, mine, H100_THRESHOLDS, "H100 x8")
    assert (link["status"], link["limit"], link["threshold"], link["fraction"]) == ("fail", 400.0, 380.0, 0.93)
    assert link["reason"].startswith("372 GB/s at 16 GiB is below the H100 x8 threshold of 380 GB/s (default table)")
    one_gpu = nccl_run(48.0, scope="pair", peer="gpu02", ranks=[{"rank": 0, "host": "a"}, {"rank": 1, "host": "b"}])
    single = acceptance.judge_link(one_gpu, mine, mine, H100_THRESHOLDS, "H100 x8")
    assert (single["status"], single["limit"], single["threshold"], single["fraction"]) == ("pass", 50.0, 47.5, 0.96)
    result = acceptance.judge(facts, nics, direct, nccl=[nccl_run(480.0), run], skip=ALL_BUT_NCCL, node="gpu01",
                              peers={"gpu02": mine})
    assert result["links"] == [{"a": "gpu01", "b": "gpu02", "test": "all_reduce", "status": "fail",
                                "busbw_gbs": 372.0, "limit_gbs": 400.0, "fraction": 0.93, "threshold_gbs": 380.0,
                                "threshold_key": "H100 x8.per_nic_gbps", "threshold_source": "default",
                                "reason": link["reason"]}]
    assert result["status"] == "fail"
    alone = acceptance.judge_link(run, mine, None, H100_THRESHOLDS, "H100 x8")
    assert alone["reason"].endswith("the peer's limits were not given: judged on this node's alone")


# --- thresholds -----------------------------------------------------------------------------------------------

VALID_KEYS = ("valid keys are all_reduce_busbw_gbs, all_gather_busbw_gbs, reduce_scatter_busbw_gbs, alltoall_busbw_gbs, "
              "message_bytes, per_nic_gbps, per_nic_rate_gbps, min_fraction")
SKU_RULE = ("write '<GPU model> x<GPU count>' as a node's acceptance sku gives it, e.g. 'H100 x8' or 'A100 PCIe x4' "
            "(the default table has H100 x8, H200 x8, A100 x8)")
# Each threshold that would judge nothing, and the refusal that names it.
REFUSED = {
    "misspelt test": ({"H100 x8": {"allreduce_busbw_gbs": 460}},
                      "thresholds['H100 x8'] has the unknown key 'allreduce_busbw_gbs' (did you mean "
                      f"'all_reduce_busbw_gbs'?): {VALID_KEYS}"),
    "SKU without its space": ({"H100x8": {"all_reduce_busbw_gbs": 460}},
                              f"thresholds key 'H100x8' is not a SKU (did you mean 'H100 x8'?): {SKU_RULE}"),
    "zero": ({"H100 x8": {"all_reduce_busbw_gbs": 0}},
             "thresholds['H100 x8'].all_reduce_busbw_gbs is 0: give a positive finite number (GB/s)"),
    "negative": ({"H100 x8": {"all_reduce_busbw_gbs": -460}},
                 "thresholds['H100 x8'].all_reduce_busbw_gbs is -460: give a positive finite number (GB/s)"),
    "NaN": ({"H100 x8": {"all_reduce_busbw_gbs": float("nan")}},
            "thresholds['H100 x8'].all_reduce_busbw_gbs is nan: give a positive finite number (GB/s)"),
    "NaN as text": ({"H100 x8": {"per_nic_gbps": "NaN"}},
                    "thresholds['H100 x8'].per_nic_gbps is 'NaN': give a positive finite number (Gb/s)"),
    "infinity": ({"H100 x8": {"all_gather_busbw_gbs": float("inf")}},
                 "thresholds['H100 x8'].all_gather_busbw_gbs is inf: give a positive finite number (GB/s)"),
    "a unit in the text": ({"H100 x8": {"all_reduce_busbw_gbs": "460 GB/s"}},
                           "thresholds['H100 x8'].all_reduce_busbw_gbs is '460 GB/s': give a positive finite number "
                           "(GB/s)"),
    "a boolean": ({"H100 x8": {"per_nic_rate_gbps": True}},
                  "thresholds['H100 x8'].per_nic_rate_gbps is True: give a positive finite number (Gb/s)"),
    "an int too long to print": ({"H100 x8": {"all_reduce_busbw_gbs": 10**5000}},
                                 "thresholds['H100 x8'].all_reduce_busbw_gbs is an int too long to print: give a "
                                 "positive finite number (GB/s)"),
    "a size in nccl-tests' words": ({"H100 x8": {"message_bytes": "16G"}},
                                    "thresholds['H100 x8'].message_bytes is '16G': give a positive whole number of "
                                    "bytes"),
    "per-SKU min_fraction above 1": ({"A100 x8": {"min_fraction": 1.5}},
                                     "thresholds['A100 x8'].min_fraction is 1.5: give a fraction in (0, 1]"),
    "per-SKU min_fraction of 0": ({"A100 x8": {"min_fraction": 0}},
                                  "thresholds['A100 x8'].min_fraction is 0: give a fraction in (0, 1]"),
    "an entry that is no mapping": ({"H100 x8": 460},
                                    "thresholds['H100 x8'] maps threshold keys (all_reduce_busbw_gbs, "
                                    "all_gather_busbw_gbs, reduce_scatter_busbw_gbs, alltoall_busbw_gbs, message_bytes, "
                                    "per_nic_gbps, per_nic_rate_gbps, min_fraction) to numbers, not a int"),
    "a table that is no mapping": ([{"H100 x8": {"all_reduce_busbw_gbs": 460}}],
                                   "thresholds maps SKUs to their thresholds, e.g. {'H100 x8': {'all_reduce_busbw_gbs': "
                                   "460}}, not a list"),
}


@pytest.mark.parametrize("thresholds, message", REFUSED.values(), ids=REFUSED)
def test_a_threshold_that_would_judge_nothing_is_refused_before_any_check_is_judged(h100, thresholds, message):
    assert acceptance.read_thresholds(thresholds)[1] == [message]
    with pytest.raises(ValueError) as refused:
        judged(h100, nccl_run(450.0), thresholds=thresholds)
    assert str(refused.value) == message


@pytest.mark.parametrize("value", [0, -0.5, 1.5, float("nan"), float("inf"), "most", None])
def test_the_global_min_fraction_outside_0_to_1_is_refused(h100, value):
    with pytest.raises(ValueError) as refused:
        judged(h100, nccl_run(450.0), min_fraction=value)
    assert str(refused.value) == f"min_fraction is {value!r}: give a fraction in (0, 1]"


def test_every_problem_is_named_at_once_with_the_roles_variable_names():
    problems = acceptance.threshold_problems({"H100 x8": {"allreduce_busbw_gbs": 460, "per_nic_gbps": -1}}, 2,
                                             prefix="node_acceptance_")
    assert [problem.split(":")[0] for problem in problems] == [
        "node_acceptance_thresholds['H100 x8'] has the unknown key 'allreduce_busbw_gbs' (did you mean "
        "'all_reduce_busbw_gbs'?)", "node_acceptance_thresholds['H100 x8'].per_nic_gbps is -1",
        "node_acceptance_min_fraction is 2"]


def test_a_threshold_given_as_text_is_read_as_its_number_and_judges(h100):
    """-e key=value and templated values arrive as strings: "460" is 460, as Ansible's own float options read it (before,
    comparing a float with it raised TypeError in the module)."""
    result = judged(h100, nccl_run(450.0), thresholds={"H100 x8": {"all_reduce_busbw_gbs": "460",
                                                                   "message_bytes": "17179869184"}})
    check = result["checks"]["nccl_all_reduce"]
    assert (check["status"], check["threshold"], check["threshold_source"]) == ("fail", 460.0, "inventory")
    assert check["reason"].startswith("450 GB/s at 16 GiB is below the H100 x8 threshold of 460 GB/s (inventory)")
    assert result["thresholds"]["message_bytes"] == acceptance.GIB16


def test_the_inventorys_thresholds_go_over_the_default_table_key_by_key_and_each_check_says_which_judged_it(h100):
    runs = [nccl_run(455.0), nccl_run(300.0, test="all_gather_perf")]
    skip = {k: v for k, v in ALL_BUT_NCCL.items() if k != "nccl_all_gather"}
    result = judged(h100, *runs, skip=skip, thresholds={"H100 x8": {"all_gather_busbw_gbs": 350}})
    checks = result["checks"]
    # Setting all_gather kept the default all_reduce figure: 455 GB/s fails Azure's 460 although 0.8 of 450 passes.
    assert {name: (checks[name]["status"], checks[name]["threshold"], checks[name]["threshold_key"],
                   checks[name]["threshold_source"]) for name in ("nccl_all_reduce", "nccl_all_gather")} == {
        "nccl_all_reduce": ("fail", 460.0, "H100 x8.all_reduce_busbw_gbs", "default"),
        "nccl_all_gather": ("fail", 350.0, "H100 x8.all_gather_busbw_gbs", "inventory")}
    assert checks["nccl_reduce_scatter"]["threshold_source"] == "none"  # skipped: nothing judged it
    assert checks["gpu_ecc"]["threshold_source"] == "none"
    assert result["thresholds"] == dict(acceptance.THRESHOLDS["H100 x8"], all_gather_busbw_gbs=350.0)
    # The inventory's figure replaces the default one for its key only.
    lower = judged(h100, nccl_run(455.0), thresholds={"H100 x8": {"all_reduce_busbw_gbs": 440}})
    assert lower["checks"]["nccl_all_reduce"]["status"] == "pass"
    assert lower["checks"]["nccl_all_reduce"]["threshold_source"] == "inventory"


def test_a_threshold_keyed_by_a_sku_no_node_has_is_named_with_the_skus_the_nodes_have(h100):
    facts, _ = h100
    nodes = {"gpu01": facts, "gpu02": facts, "login": {"present": False, "reason": "no NVIDIA GPU found on the PCI bus"}}
    assert acceptance.threshold_problems({"H100 x8": {"all_reduce_busbw_gbs": 470}}, nodes=nodes) == []
    assert acceptance.threshold_problems({"h100 x8": {"all_reduce_busbw_gbs": 470}}, nodes=nodes,
                                         prefix="node_acceptance_") == [
        "node_acceptance_thresholds['h100 x8'] matches no node of this play (did you mean 'H100 x8'?): its nodes are "
        "H100 x8 on 2 node(s), no SKU (no NVIDIA GPU on this node) on 1 node(s). Key the entry '<GPU model> x<GPU "
        "count>' as a node's acceptance sku gives it, e.g. 'H100 x8' or 'A100 PCIe x4', or leave it out of a run "
        "without such nodes"]


def test_the_filter_is_the_judges_own_check():
    from ansible_collections.hpcml.cluster.plugins.filter.threshold_problems import FilterModule  # noqa: PLC0415

    assert FilterModule().filters()["threshold_problems"] is acceptance.threshold_problems


# --- the document and the module ------------------------------------------------------------------------------


def test_a_judged_node_fits_the_v3_summary(h100, fixture_text):
    from benchrunner import results  # noqa: PLC0415 - the schema is benchrunner's

    facts, nics = h100
    verdict = acceptance.judge(facts, nics, {"ready": True}, nccl=[nccl_run(480.0), nccl_run(
        372.0, scope="pair", peer="gpu02")], counters=counters(fixture_text, "nvidia-smi-q-x.netdata.tesla-p100.xml"),
        xid=gpu_errors.parse_xid(XID_APP), skip={k: v for k, v in ALL_BUT_NCCL.items() if k not in (
            "smi_xml", "gpu_xid")}, node="gpu01")
    node = {"roles": {}, "versions": {"driver": None, "cuda": None, "nccl": None},
            "checks": {name: {"status": "pass"} for name in ("nvidia_smi", "ib_ports_active", "peermem_loaded",
                                                             "reboot_pending")}, "acceptance": verdict}
    results.validate(results.NODE_VALIDATION, {
        "kind": "node-validation", "schema_version": 3, "created": "2026-11-24T10:00:00Z", "status": "fail",
        "cluster": {"versions_uniform": {"status": "pass"}, "ib_write_bw_pair": {"status": "pass"}},
        "nodes": {"gpu01": node}, "links": verdict["links"], "actions": []})


@pytest.fixture
def node_acceptance(monkeypatch, capsys):
    """Runs the module in this process. Stand-ins that read a parser's result as JSON take the nccl-tests and
    DCGM parsers' place, so the module's own work is what is tested (the parsers have tests of their own)."""
    import importlib  # noqa: PLC0415
    import json  # noqa: PLC0415
    import types  # noqa: PLC0415

    from ansible.module_utils import basic  # noqa: PLC0415

    base = "ansible_collections.hpcml.cluster.plugins.module_utils"
    for name, function in (("nccl", "parse_nccl_tests"), ("dcgm", "parse_dcgmi_diag")):
        stand_in = types.ModuleType(f"{base}.{name}")
        setattr(stand_in, function, json.loads)
        monkeypatch.setitem(sys.modules, f"{base}.{name}", stand_in)
    monkeypatch.delitem(sys.modules, "ansible_collections.hpcml.cluster.plugins.modules.node_acceptance",
                        raising=False)
    module = importlib.import_module("ansible_collections.hpcml.cluster.plugins.modules.node_acceptance")

    def run(**args):
        monkeypatch.setattr(basic, "_ANSIBLE_ARGS", json.dumps({"ANSIBLE_MODULE_ARGS": args}).encode())
        monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy")
        with pytest.raises(SystemExit):
            module.main()
        return json.loads(capsys.readouterr().out)

    return run


def test_the_module_judges_and_fails_only_on_malformed_arguments(node_acceptance, h100, fixture_text):
    import json  # noqa: PLC0415

    facts, nics = h100
    run = nccl_run(350.0)
    result = node_acceptance(
        node="gpu01", gpu=facts, rdma=nics, gpudirect={"ready": True},
        nccl=[{"test": "all_reduce_perf", "scope": "node", "output": json.dumps(run["parsed"]), "rc": 0}],
        smi_xml=fixture_text("nvidia-smi-q-x.openpai.gtx-1070-2-of-6.xml"), kernel_log="",
        nvlink_errors=fixture_text(NVLINK_E), _ansible_check_mode=True,
        skip={k: v for k, v in ALL_BUT_NCCL.items() if k not in ("smi_xml", "gpu_xid", "nvlink_errors")})
    assert not result.get("failed") and result["changed"] is False
    checks = result["acceptance"]["checks"]
    assert checks["nccl_all_reduce"]["status"] == "fail" and checks["gpu_pcie_link"]["status"] == "fail"
    # Output its parser cannot read fails its check, with the parser's reason; the module itself does not fail.
    assert checks["gpu_xid"]["reason"] == "kernel log: kernel log printed nothing"
    assert checks["nvlink_errors"]["reason"].startswith("nvidia-smi nvlink -e: nvidia-smi nvlink -e: unexpected line")
    malformed = node_acceptance(gpu=facts, nccl=[{"test": "all_reduce", "scope": "node", "output": "{}"}])
    assert malformed["failed"] and "no output to judge and no reason in skip" in malformed["msg"]
    # A threshold as text is its number (before: a TypeError traceback); one that would judge nothing fails the
    # module with the key, before any check is judged.
    nccl_args = [{"test": "all_reduce_perf", "scope": "node", "output": json.dumps(run["parsed"]), "rc": 0}]
    as_text = node_acceptance(gpu=facts, rdma=nics, nccl=nccl_args, skip=ALL_BUT_NCCL,
                              thresholds={"H100 x8": {"all_reduce_busbw_gbs": "460"}})
    assert not as_text.get("failed") and as_text["acceptance"]["checks"]["nccl_all_reduce"]["threshold"] == 460.0
    misspelt = node_acceptance(gpu=facts, rdma=nics, nccl=nccl_args, skip=ALL_BUT_NCCL,
                               thresholds={"H100 x8": {"allreduce_busbw_gbs": 460}})
    assert misspelt["failed"] and "acceptance" not in misspelt
    assert misspelt["msg"] == f"node_acceptance: {REFUSED['misspelt test'][1]}"


# --- with the real parsers on recorded outputs --------------------------------------------------------------------


def test_recorded_a100_all_reduce_through_the_nccl_tests_parser(fixture_text):
    """superbench's 8 x A100 all_reduce_perf, validation off, up to 8 GiB: judged at 8 GiB against the A100 x8
    threshold (measured at 16 GiB by Azure) and NVLink3's 300 GB/s."""
    facts = gpu_facts(fixture_text, "nvidia-smi-topo-m.xuesongtap-blog.a100-x8-nv12-17nic.txt", A100_NAME)
    run = {"test": "all_reduce_perf", "scope": "node", "rc": 0,
           "parsed": nccl.parse_nccl_tests(fixture_text("nccl-tests.superbench.allreduce.txt"))}
    check = acceptance.judge(facts, {}, None, nccl=[run], skip=ALL_BUT_NCCL)["checks"]["nccl_all_reduce"]
    assert (check["status"], check["measured"], check["limit"], check["threshold"]) == ("pass", 235.26, 300.0, 228.0)
    assert check["reason"] == ("235.26 GB/s at 8 GiB, 0.78 of 300 GB/s (NVLink3 x12 at 25 GB/s per direction), "
                               "threshold 228 GB/s (default table); results not validated (-c 0): wrong data would have "
                               "gone unseen")
    assert check["fraction"] == 0.784
    # The global 0.8 would fail this healthy node: the A100 entry carries its own 0.7.
    passed = acceptance.judge(facts, {}, None, nccl=[run], skip=ALL_BUT_NCCL)
    assert (passed["min_fraction"], passed["min_fraction_source"]) == (0.7, "default")
    strict = {"A100 x8": {"min_fraction": 0.8}}
    failed = acceptance.judge(facts, {}, None, nccl=[run], skip=ALL_BUT_NCCL, thresholds=strict)
    assert failed["checks"]["nccl_all_reduce"]["reason"].startswith(
        "235.26 GB/s at 8 GiB is 0.784 of the limit 300 GB/s (NVLink3 x12 at 25 GB/s per direction), below 0.8")
    assert (failed["min_fraction"], failed["min_fraction_source"]) == (0.8, "inventory")
    # The inventory's entry set min_fraction only: the default all_reduce threshold still judges, and says so.
    assert (failed["checks"]["nccl_all_reduce"]["threshold"],
            failed["checks"]["nccl_all_reduce"]["threshold_source"]) == (228.0, "default")


def test_recorded_dcgm_pcie_failure_through_the_dcgm_parser(fixture_text):
    parsed = dcgm.parse_dcgmi_diag(fixture_text("dcgmi-diag.dcgm-253.v4.4.1-r2-b200x8-pcie-fail.txt"))
    result = acceptance.judge_dcgm({"level": 2, "rc": 226, "parsed": parsed})
    assert result["status"] == "fail"
    assert result["reason"].startswith("dcgmi diag -r 2: pcie fail: Warning: There was an internal error")


def test_recorded_two_node_h100_all_reduce_as_a_link(h100, fixture_text):
    """Issue 309's 16 H100 on two HGX nodes, 469 GB/s at 16 GiB: above the ring's bound of eight NDR NICs (a tree
    moves less across the nodes than busbw's formula counts), so the fraction exceeds 1 and the link passes."""
    facts, nics = h100
    near = {f"GPU{i}": {"link": "PIX", "nics": [f"mlx5_{n}"]} for i, n in enumerate((0, 1, 4, 5, 6, 7, 8, 9))}
    mine = limits.limits(facts, nics, {"ready": True, "nearest_nics": near}, None)
    run = {"test": "all_reduce_perf", "scope": "pair", "peer": "bm-h100-02", "rc": 0,
           "parsed": nccl.parse_nccl_tests(fixture_text("nccl-tests.issue-309.h100-x16-2node-mpi-noise.txt"))}
    link = acceptance.judge_link(run, mine, mine, H100_THRESHOLDS, "H100 x8")
    assert (link["status"], link["measured"], link["limit"], link["fraction"], link["threshold"]) == (
        "pass", 469.21, 400.0, 1.173, 380.0)


def test_one_h100_judged_from_what_it_printed(fixture_text):
    """This project's lent H100 (fixtures/gpu-record-h100-20261124/README.md): its facts as the modules found them,
    nccl-tests as the role built and ran it, its counters; no DCGM there (no package source), no NVLink."""
    record = "gpu-record-h100-20261124"
    facts = {name: json.loads(fixture_text(f"{record}/facts-{name}_facts.json")) for name in ("gpu", "rdma", "gpudirect")}
    runs = [{"test": test, "scope": "node", "peer": None, "rc": 0,
             "parsed": nccl.parse_nccl_tests(fixture_text(f"{record}/nccl-tests-{test}.txt"))}
            for test in ("all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "alltoall_perf")]
    result = acceptance.judge(facts["gpu"], facts["rdma"], facts["gpudirect"], nccl=runs,
                              counters=gpu.gpu_counters(fixture_text(f"{record}/nvidia-smi-q-x.xml")),
                              xid=gpu_errors.parse_xid("kernel: Linux version 6.18.44\n"),
                              skip={"dcgm_diag": "no DCGM package source", "nvlink_errors": "no NVLink here"})
    assert (result["status"], result["sku"]) == ("pass", "H100 x1")
    assert result["limits"]["pcie"] == {"generation": 5, "width": 16, "gbs": 63.008}
    # One GPU has no collective within the node: each nccl-tests run is measured (0 GB/s) and skipped, saying why.
    for name in ("nccl_all_reduce", "nccl_all_gather", "nccl_reduce_scatter", "nccl_alltoall"):
        check = result["checks"][name]
        assert (check["status"], check["measured"]) == ("skip", 0.0), name
        assert check["reason"].endswith("(1 GPU(s) described by nvidia-smi: no collective within the node)"), name
    assert {name: result["checks"][name]["status"] for name in ("gpu_ecc", "gpu_memory_repair", "gpu_clock_events",
                                                                "gpu_pcie_link", "gpu_xid")} == dict.fromkeys(
        ("gpu_ecc", "gpu_memory_repair", "gpu_clock_events", "gpu_pcie_link", "gpu_xid"), "pass")
