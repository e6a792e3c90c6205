"""The node validation summary's verdicts (hpcml.cluster.validation_verdict): how many checks ran and were skipped,
and a node whose expected hardware was never checked is incomplete, not pass."""

import copy

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.hpcml.cluster.plugins.filter.validation_verdict import validation_verdict
from ansible_collections.hpcml.cluster.plugins.module_utils import pci, rdma
from benchrunner import node_report, results

# The skips a node without GPU or RDMA adapter gets (the lab's), with the facts modules' own reasons.
NO_GPU = f"no NVIDIA GPU found on the PCI bus (vendor {pci.NVIDIA_VENDOR})"
NO_RDMA = f"no RDMA adapter found on the PCI bus (vendor {', '.join(rdma.RDMA_VENDORS)})"
NO_GPUDIRECT = "no NVIDIA GPU on this node"


def skip(reason):
    return {"status": "skip", "reason": reason}


def bare_node():
    return {"roles": {}, "versions": {"driver": None, "cuda": None, "nccl": None},
            "checks": {"nvidia_smi": skip(NO_GPU), "ib_ports_active": skip(NO_RDMA),
                       "peermem_loaded": skip(NO_GPUDIRECT), "gpudirect_route": skip(NO_GPUDIRECT),
                       "gpu_nic_topology": skip(NO_GPUDIRECT),
                       "reboot_pending": {"status": "pass", "detail": "no reboot pending"}}}


def gpu_node():
    node = bare_node()
    node["checks"].update(nvidia_smi={"status": "pass", "detail": "8 GPU(s) answer, driver 580.95.05"},
                          ib_ports_active={"status": "pass", "detail": "8 of 8 port(s) active"},
                          peermem_loaded=skip("GPUDirect RDMA goes through dmabuf here, not nvidia-peermem"),
                          gpudirect_route={"status": "pass", "detail": {"route": "dmabuf"}},
                          gpu_nic_topology={"status": "pass", "detail": {}})
    return node


def summary(**nodes):
    return {"kind": "node-validation", "schema_version": 4, "created": "2026-11-27T12:00:00Z",
            "cluster": {"versions_uniform": skip("no node has an NVIDIA GPU"),
                        "ib_write_bw_pair": skip("fewer than two nodes have an active RDMA port")},
            "nodes": nodes, "links": [], "actions": []}


def test_nothing_expected_passes_on_what_ran_and_counts_every_skip():
    # The lab: two nodes without GPU or RDMA, the inventory expects neither; only reboot_pending runs.
    judged = validation_verdict(summary(**{"lab-node1": bare_node(), "lab-node2": bare_node()}),
                                {"lab-node1": [], "lab-node2": []})
    results.validate(results.NODE_VALIDATION, judged)
    assert judged["status"] == "pass"
    assert judged["counts"] == {"total": 14, "ran": 2, "passed": 2, "failed": 0, "skipped": 12}
    assert judged["nodes"]["lab-node1"]["verdict"] == {
        "status": "pass", "reason": None, "expected": [],
        "counts": {"total": 6, "ran": 1, "passed": 1, "failed": 0, "skipped": 5}}
    assert node_report.markdown(judged).splitlines()[0] == (
        "# Node validation 2026-11-27T12:00:00Z: PASS: 2 of 14 checks ran, 12 skipped")


def test_a_node_expected_to_have_gpus_where_no_gpu_check_ran_is_incomplete_with_every_skip_reason():
    judged = validation_verdict(summary(gpu01=gpu_node(), gpu02=bare_node()),
                                {"gpu01": ["gpu", "rdma"], "gpu02": ["gpu", "rdma"]})
    results.validate(results.NODE_VALIDATION, judged)
    assert judged["status"] == "incomplete"
    assert judged["nodes"]["gpu01"]["verdict"]["status"] == "pass"
    verdict = judged["nodes"]["gpu02"]["verdict"]
    assert verdict["status"] == "incomplete"
    assert verdict["reason"] == (
        f"node_checks_expect has gpu, but none of its 4 GPU checks ran (nvidia_smi: {NO_GPU}; peermem_loaded, "
        f"gpudirect_route, gpu_nic_topology: {NO_GPUDIRECT}); node_checks_expect has rdma, but none of its 4 RDMA "
        f"checks ran (ib_ports_active: {NO_RDMA}; peermem_loaded, gpudirect_route, gpu_nic_topology: {NO_GPUDIRECT})")
    # reboot_pending passed: something ran, but none of what the inventory asked for.
    assert verdict["counts"]["ran"] == 1
    text = node_report.markdown(judged)
    assert text.splitlines()[0] == "# Node validation 2026-11-27T12:00:00Z: INCOMPLETE: 6 of 14 checks ran, 8 skipped"
    assert f"Incomplete:\n- gpu02: {verdict['reason']}\n" in text


def test_one_gpu_check_that_ran_is_enough_and_acceptance_checks_count_as_gpu_checks():
    node = bare_node()
    node["acceptance"] = {"checks": {"gpu_ecc": {"status": "pass", "reason": "no uncorrectable ECC error"}}}
    judged = validation_verdict(summary(gpu01=node), {"gpu01": ["gpu"]})
    assert judged["nodes"]["gpu01"]["verdict"]["status"] == "pass"
    assert judged["nodes"]["gpu01"]["verdict"]["counts"] == {"total": 7, "ran": 2, "passed": 2, "failed": 0,
                                                             "skipped": 5}
    node["acceptance"]["checks"]["gpu_ecc"] = skip(f"ansible_facts.hpcml_gpu.present is false: {NO_GPU}")
    judged = validation_verdict(summary(gpu01=node), {"gpu01": ["gpu"]})
    assert judged["nodes"]["gpu01"]["verdict"]["reason"].startswith(
        "node_checks_expect has gpu, but none of its 5 GPU checks ran (")


def test_a_failure_wins_over_incomplete_and_a_failed_link_fails_the_summary():
    node = bare_node()
    node["checks"]["reboot_pending"] = {"status": "fail", "reason": "the installed driver needs a reboot to load"}
    judged = validation_verdict(summary(gpu01=node), {"gpu01": ["gpu"]})
    assert judged["status"] == "fail"
    assert judged["nodes"]["gpu01"]["verdict"]["status"] == "fail"
    assert judged["nodes"]["gpu01"]["verdict"]["reason"].startswith(
        "failed: reboot_pending; node_checks_expect has gpu, but none of its 4 GPU checks ran")
    document = summary(gpu01=gpu_node())
    document["links"] = [{"a": "gpu01", "b": "gpu02", "test": "all_reduce", "status": "fail", "busbw_gbs": 300.0,
                          "limit_gbs": 400.0, "fraction": 0.75, "threshold_gbs": 380.0,
                          "reason": "300 GB/s at 16 GiB is below the H100 x8 threshold of 380 GB/s"}]
    judged = validation_verdict(document, {"gpu01": ["gpu", "rdma"]})
    results.validate(results.NODE_VALIDATION, judged)
    assert (judged["status"], judged["nodes"]["gpu01"]["verdict"]["status"]) == ("fail", "pass")
    assert judged["counts"] == {"total": 9, "ran": 6, "passed": 5, "failed": 1, "skipped": 3}


def test_the_input_is_left_as_it_was():
    document = summary(gpu01=bare_node())
    before = copy.deepcopy(document)
    validation_verdict(document, {"gpu01": ["gpu"]})
    assert document == before


@pytest.mark.parametrize(("expected", "message"), [
    ({}, "no expected hardware given for node gpu01"),
    ({"gpu01": ["gpus"]}, "node gpu01: node_checks_expect has gpus; valid: gpu, rdma"),
])
def test_a_node_without_a_valid_expectation_is_refused(expected, message):
    with pytest.raises(AnsibleFilterError, match=message):
        validation_verdict(summary(gpu01=bare_node()), expected)


def test_a_v4_summary_needs_its_counts_and_verdicts_and_a_reason_for_incomplete():
    judged = validation_verdict(summary(gpu01=bare_node()), {"gpu01": ["gpu"]})
    for broken, where in (({k: v for k, v in judged.items() if k != "counts"}, "'counts' is a required property"),
                          ({**judged, "status": "unchecked"}, "at status")):
        with pytest.raises(results.ResultError, match=where):
            results.validate(results.NODE_VALIDATION, broken)
    judged["nodes"]["gpu01"]["verdict"]["reason"] = None
    with pytest.raises(results.ResultError, match="nodes/gpu01/verdict/reason"):
        results.validate(results.NODE_VALIDATION, judged)
    del judged["nodes"]["gpu01"]["verdict"]
    with pytest.raises(results.ResultError, match="'verdict' is a required property"):
        results.validate(results.NODE_VALIDATION, judged)
