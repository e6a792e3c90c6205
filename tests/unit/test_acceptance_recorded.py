"""The acceptance table as an admin reads it, judged from outputs recorded on other people's machines (the fixtures'
origins are in fixtures/ORIGINS.md) with the real parsers, and rendered by benchrunner's report: docs/acceptance.md
shows exactly this rendering, so the example there cannot drift from what the code says."""

import re

from test_acceptance import A100_NAME, H100_NAME, gpu_facts, rdma_facts

from ansible_collections.hpcml.cluster.plugins.module_utils import acceptance, dcgm, gpu, limits, nccl
from benchrunner import node_report, results
from unit_paths import PROJECT

DOC = PROJECT / "docs" / "acceptance.md"
BLOCK = re.compile(r"<!-- recorded-example -->\n```text\n(?P<table>.*?)```\n", re.S)
NOT_RECORDED = "not in this recording"


def not_recorded(*names):
    return dict.fromkeys(names, NOT_RECORDED)


def recorded_document(fixture_text) -> dict:
    """Three nodes and one link, each judged on what its recording shows; what it does not show is a skip."""
    a100 = gpu_facts(fixture_text, "nvidia-smi-topo-m.xuesongtap-blog.a100-x8-nv12-17nic.txt", A100_NAME)
    collectives = {"all_reduce": "allreduce", "all_gather": "allgather", "reduce_scatter": "reducescatter",
                   "alltoall": "alltoall"}
    a100_runs = [{"test": f"{test}_perf", "scope": "node", "rc": 0,
                  "parsed": nccl.parse_nccl_tests(fixture_text(f"nccl-tests.superbench.{name}.txt"))}
                 for test, name in collectives.items()]
    nodes = {"a100x8-superbench": acceptance.judge(
        a100, {}, None, nccl=a100_runs, node="a100x8-superbench",
        skip=not_recorded("dcgm_diag", "smi_xml", "gpu_xid", "nvlink_errors"))}

    b200 = {"present": True, "gpus": [{"name": "NVIDIA B200"}] * 8, "topology": None, "topology_error": None}
    dcgm_run = {"level": 2, "rc": 226, "parsed": dcgm.parse_dcgmi_diag(
        fixture_text("dcgmi-diag.dcgm-253.v4.4.1-r2-b200x8-pcie-fail.txt"))}
    nodes["b200x8-dcgm-253"] = acceptance.judge(
        b200, {}, None, dcgm=dcgm_run, node="b200x8-dcgm-253",
        skip=not_recorded(*(f"nccl_{test}" for test in acceptance.NODE_TESTS), "smi_xml", "gpu_xid",
                          "nvlink_errors"))

    k80_xml = fixture_text("nvidia-smi-q-x.openpai.k80-x4-minor-out-of-order.xml")
    k80 = {"present": True, "gpus": [{"name": "Tesla K80"}] * 4, "topology": None, "topology_error": None}
    nodes["k80x4-openpai"] = acceptance.judge(
        k80, {}, None, counters=gpu.gpu_counters(k80_xml), node="k80x4-openpai",
        skip=not_recorded(*(f"nccl_{test}" for test in acceptance.NODE_TESTS), "dcgm_diag", "gpu_xid",
                          "nvlink_errors"))

    h100, nics = gpu_facts(fixture_text, "nvidia-smi-topo-m.ml-engineering.h100-x8-nv18-cpu-numa.txt", H100_NAME), \
        rdma_facts(fixture_text, "ibstat.gpud.47.0.h100.all.active.2.txt")
    near = {f"GPU{i}": {"link": "PIX", "nics": [f"mlx5_{n}"]} for i, n in enumerate((0, 1, 4, 5, 6, 7, 8, 9))}
    h100_limits = limits.limits(h100, nics, {"ready": True, "nearest_nics": near}, None)
    pair = {"test": "all_reduce_perf", "scope": "pair", "peer": "h100-node2", "rc": 0,
            "parsed": nccl.parse_nccl_tests(fixture_text("nccl-tests.issue-309.h100-x16-2node-mpi-noise.txt"))}
    link = acceptance.link_record("h100-node1", pair, acceptance.judge_link(
        pair, h100_limits, h100_limits, acceptance.THRESHOLDS, "H100 x8"))

    failed = any(check["status"] == "fail" for node in nodes.values() for check in node["checks"].values())
    document = {"kind": "node-validation", "schema_version": 3, "created": "recorded outputs",
                "status": "fail" if failed else "pass", "cluster": {},
                "nodes": {name: {"roles": {}, "versions": {"driver": None, "cuda": None, "nccl": None}, "checks": {},
                                 "acceptance": verdict} for name, verdict in nodes.items()},
                "links": [link], "actions": []}
    return document


def test_recorded_outputs_make_a_valid_summary_that_fails_where_the_machines_failed(fixture_text):
    document = recorded_document(fixture_text)
    # The validation play's own checks are not in these recordings: skips, so the whole summary can be validated.
    skipped = {"status": "skip", "reason": NOT_RECORDED}
    node_checks = dict.fromkeys(("nvidia_smi", "ib_ports_active", "peermem_loaded", "reboot_pending"), skipped)
    results.validate(results.NODE_VALIDATION, {
        **document, "created": "2026-11-24T00:00:00Z",
        "cluster": dict.fromkeys(("versions_uniform", "ib_write_bw_pair"), skipped),
        "nodes": {name: {**node, "checks": node_checks} for name, node in document["nodes"].items()}})
    checks = {name: node["acceptance"]["checks"] for name, node in document["nodes"].items()}
    assert checks["a100x8-superbench"]["nccl_all_reduce"]["status"] == "pass"
    assert checks["b200x8-dcgm-253"]["dcgm_diag"]["status"] == "fail"
    assert checks["k80x4-openpai"]["gpu_ecc"]["status"] == "fail"
    assert document["links"][0]["status"] == "pass"
    assert document["status"] == "fail"


def test_the_docs_show_the_table_the_code_renders(fixture_text):
    shown = BLOCK.search(DOC.read_text())
    assert shown, f"{DOC.name} has no '<!-- recorded-example -->' text block"
    rendered = node_report.markdown(recorded_document(fixture_text))
    assert shown["table"] == rendered, f"update the block in {DOC.name} to:\n{rendered}"
