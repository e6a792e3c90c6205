"""The node validation table: v4 documents with their verdicts and counts, v3 documents with acceptance checks and
links, v2 documents still read."""

from __future__ import annotations

import copy
import json

import pytest

from benchrunner import cli, node_report, results


def judged(status, reason, measured=None, limit=None, fraction=None, threshold=None, unit="GB/s"):
    return {"status": status, "reason": reason, "measured": measured, "unit": unit, "limit": limit,
            "fraction": fraction, "threshold": threshold}


def node_v2():
    return {"roles": {"nvidia_driver": {"steps": "run", "reason": None}},
            "versions": {"driver": "580.95.05", "cuda": "13.0", "nccl": "2.27.7"},
            "checks": {"nvidia_smi": {"status": "pass", "detail": "8 GPU(s) answer"},
                       "ib_ports_active": {"status": "pass"}, "peermem_loaded": {"status": "pass"},
                       "reboot_pending": {"status": "pass"}}}


def document_v2():
    return {"kind": "node-validation", "schema_version": 2, "created": "2026-11-21T07:00:00Z", "status": "pass",
            "cluster": {"versions_uniform": {"status": "pass", "detail": {}},
                        "ib_write_bw_pair": {"status": "skip", "reason": "fewer than two nodes"}},
            "nodes": {"gpu01": node_v2()}}


LIMITS = {"intra_node_busbw_gbs": 450.0, "intra_node_basis": "NVLink4 x18 at 25 GB/s per direction",
          "per_nic_gbps": 400.0, "nic_count": 8, "inter_node_busbw_gbs": 400.0, "inter_node_basis": "8 NIC port(s)",
          "gpudirect": True, "reasons": {}}


def acceptance(all_reduce, pcie):
    return {"status": "fail" if "fail" in (all_reduce["status"], pcie["status"]) else "pass", "sku": "H100 x8",
            "sku_reason": None, "limits": LIMITS, "thresholds": {"all_reduce_busbw_gbs": 460.0},
            "min_fraction": 0.8, "links": [],
            "checks": {"nccl_all_reduce": all_reduce, "gpu_pcie_link": pcie,
                       "gpu_xid": judged("pass", "no fatal Xid and no other Xid", 0, unit="events")}}


def document_v3():
    document = document_v2()
    document.update(schema_version=3, status="fail", links=[
        {"a": "gpu01", "b": "gpu02", "test": "all_reduce", "status": "fail", "busbw_gbs": 300.0, "limit_gbs": 400.0,
         "fraction": 0.75, "threshold_gbs": 380.0,
         "reason": "300 GB/s at 16 GiB is below the H100 x8 threshold of 380 GB/s"}],
        actions=[{"node": "gpu02", "action": "drain", "reason": "PCIe link degraded", "done": True}])
    document["nodes"]["gpu01"]["acceptance"] = acceptance(
        judged("pass", "483.2 GB/s at 16 GiB", 483.2, 450.0, 1.074, 460.0),
        judged("skip", "check under load: GPU 0 at Gen1 of Gen5 while idle", 1, unit="GPUs"))
    document["nodes"]["gpu02"] = node_v2()
    document["nodes"]["gpu02"]["acceptance"] = acceptance(
        judged("pass", "470 GB/s at 16 GiB", 470.0, 450.0, 1.044, 460.0),
        judged("fail", "GPU 3 (00000000:9B:00.0): PCIe link degraded, x8 of x16 lanes", 1, unit="GPUs"))
    return document


def test_v3_and_v2_documents_validate():
    results.validate(results.NODE_VALIDATION, document_v3())
    results.validate(results.NODE_VALIDATION, document_v2())


def test_v3_needs_links_and_actions_and_v2_does_not_take_them():
    bare = document_v3()
    del bare["actions"]
    with pytest.raises(results.ResultError, match=r"node-validation v3 schema at .*'actions' is a required property"):
        results.validate(results.NODE_VALIDATION, bare)
    old = document_v2()
    old["links"] = []
    with pytest.raises(results.ResultError, match="node-validation v2 schema"):
        results.validate(results.NODE_VALIDATION, old)
    with pytest.raises(results.ResultError, match="schema_version 5 is not the supported 2, 3 or 4"):
        results.validate(results.NODE_VALIDATION, dict(document_v3(), schema_version=5))


def test_an_acceptance_check_without_its_numbers_or_a_failure_without_reason_is_refused():
    document = document_v3()
    del document["nodes"]["gpu01"]["acceptance"]["checks"]["gpu_xid"]["limit"]
    with pytest.raises(results.ResultError, match="checks/gpu_xid"):
        results.validate(results.NODE_VALIDATION, document)
    document = document_v3()
    document["links"][0]["reason"] = None
    with pytest.raises(results.ResultError, match="links/0/reason"):
        results.validate(results.NODE_VALIDATION, document)


def test_markdown_table_rows_are_nodes_and_links_cells_status_and_fraction():
    text = node_report.markdown(document_v3())
    lines = text.splitlines()
    assert lines[0] == "# Node validation 2026-11-21T07:00:00Z: FAIL: 15 of 17 checks ran (2 failed), 2 skipped"
    header = [c.strip() for c in lines[2].strip("|").split("|")]
    assert header[:3] == ["node / link", "versions_uniform", "ib_write_bw_pair"]
    assert {"nccl_all_reduce", "gpu_pcie_link", "gpu_xid", "nvidia_smi"} <= set(header)
    table = {row.split("|")[1].strip(): dict(zip(header, (c.strip() for c in row.strip("|").split("|"))))
             for row in lines[4:8]}
    assert list(table) == ["(cluster)", "gpu01", "gpu02", "gpu01 <-> gpu02"]
    assert table["gpu01"]["nccl_all_reduce"] == "pass 1.07"
    assert table["gpu02"]["gpu_pcie_link"] == "fail"
    assert table["gpu01 <-> gpu02"]["nccl_all_reduce"] == "fail 0.75"
    assert table["gpu01 <-> gpu02"]["gpu_xid"] == "-"
    failed = text[text.index("Failed:"):text.index("Skipped:")]
    assert "- gpu02 gpu_pcie_link: GPU 3 (00000000:9B:00.0): PCIe link degraded, x8 of x16 lanes" in failed
    assert "- gpu01 <-> gpu02 nccl_all_reduce: 300 GB/s at 16 GiB is below" in failed
    assert "- gpu01 gpu_pcie_link: check under load" in text
    assert text.rstrip().endswith("- gpu02: drain (done): PCIe link degraded")


def test_html_section_colours_and_escapes():
    document = document_v3()
    document["nodes"]["gpu02"]["acceptance"]["checks"]["gpu_pcie_link"]["reason"] = "<b>x8</b> & 'lanes'"
    section = node_report.html_section(document)
    assert section.startswith("<section class='node-validation'>")
    assert "<td class='fail' title='&lt;b&gt;x8&lt;/b&gt; &amp; &#x27;lanes&#x27;'>fail</td>" in section
    assert "<td class='pass' title='483.2 GB/s at 16 GiB'>pass 1.07</td>" in section
    assert "<b>x8</b>" not in section
    assert "<th>gpu01 &lt;-&gt; gpu02</th>" in section
    assert ("<h2 class='fail'>Node validation 2026-11-21T07:00:00Z: FAIL: 15 of 17 checks ran (2 failed), 2 skipped"
            "</h2>") in section


def test_html_section_lists_each_skip_with_its_reason_as_the_markdown_does():
    document = document_v3()
    section = node_report.html_section(document)
    skipped = section[section.index("<p>Skipped:</p>"):section.index("<p>Actions:</p>")]
    assert skipped == ("<p>Skipped:</p><ul><li>(cluster) ib_write_bw_pair: fewer than two nodes</li>"
                       "<li>gpu01 gpu_pcie_link: check under load: GPU 0 at Gen1 of Gen5 while idle</li></ul>\n")
    markdown = node_report.markdown(document)
    assert "- (cluster) ib_write_bw_pair: fewer than two nodes" in markdown
    assert "- gpu01 gpu_pcie_link: check under load: GPU 0 at Gen1 of Gen5 while idle" in markdown


def lab_node_v4(expected):
    """A node of the lab (no GPU, no RDMA adapter, the skips the role writes there) with its verdict."""
    no_gpudirect = {"status": "skip", "reason": "no NVIDIA GPU on this node"}
    node = {"roles": {}, "versions": {"driver": None, "cuda": None, "nccl": None},
            "checks": {"nvidia_smi": {"status": "skip", "reason": "no NVIDIA GPU found on the PCI bus (vendor 0x10de)"},
                       "ib_ports_active": {"status": "skip", "reason": "no RDMA adapter found on the PCI bus (vendor 0x15b3)"},
                       "peermem_loaded": no_gpudirect, "gpudirect_route": no_gpudirect, "gpu_nic_topology": no_gpudirect,
                       "reboot_pending": {"status": "pass", "detail": "no reboot pending"}}}
    incomplete = "node_checks_expect has gpu, but none of its 4 GPU checks ran (nvidia_smi: no NVIDIA GPU found ...)"
    node["verdict"] = {"status": "incomplete" if expected else "pass", "reason": incomplete if expected else None,
                       "expected": expected, "counts": {"total": 6, "ran": 1, "passed": 1, "failed": 0, "skipped": 5}}
    return node


def document_v4(expected=()):
    """Two lab nodes; with expected, the inventory expects what the nodes lack and the summary is incomplete."""
    document = {**document_v2(), "schema_version": 4, "status": "incomplete" if expected else "pass",
                "counts": {"total": 14, "ran": 2, "passed": 2, "failed": 0, "skipped": 12},
                "nodes": {name: lab_node_v4(list(expected)) for name in ("lab-node1", "lab-node2")},
                "links": [], "actions": []}
    document["cluster"] = {"versions_uniform": {"status": "skip", "reason": "no node has an NVIDIA GPU"},
                           "ib_write_bw_pair": {"status": "skip", "reason": "fewer than two nodes have an active RDMA port"}}
    return document


def test_a_v4_verdict_says_how_many_checks_ran_and_were_skipped():
    document = document_v4()
    results.validate(results.NODE_VALIDATION, document)
    text = node_report.markdown(document)
    assert text.splitlines()[0] == "# Node validation 2026-11-21T07:00:00Z: PASS: 2 of 14 checks ran, 12 skipped"
    assert "- lab-node1 nvidia_smi: no NVIDIA GPU found on the PCI bus (vendor 0x10de)" in text
    assert "Incomplete:" not in text
    # The document's counts are what is shown, not a recount.
    document["counts"] = {"total": 15, "ran": 1, "passed": 1, "failed": 0, "skipped": 14}
    assert node_report.verdict(document) == "PASS: 1 of 15 checks ran, 14 skipped"


def test_an_incomplete_v4_summary_names_each_unchecked_node_with_its_reason():
    document = document_v4(expected=["gpu"])
    results.validate(results.NODE_VALIDATION, document)
    text = node_report.markdown(document)
    assert text.splitlines()[0] == "# Node validation 2026-11-21T07:00:00Z: INCOMPLETE: 2 of 14 checks ran, 12 skipped"
    incomplete = text[text.index("Incomplete:"):text.index("Skipped:")].splitlines()
    assert incomplete[1:3] == [f"- {name}: node_checks_expect has gpu, but none of its 4 GPU checks ran "
                               "(nvidia_smi: no NVIDIA GPU found ...)" for name in ("lab-node1", "lab-node2")]
    section = node_report.html_section(document)
    assert "<h2 class='incomplete'>" in section and "<p>Incomplete:</p><ul><li>lab-node1: " in section


def write(tmp_path, document, name="latest.json"):
    path = tmp_path / "results" / "node-validation" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))
    return path


def test_cli_prints_the_table_and_strict_fails_on_a_failure(tmp_path, capsys):
    write(tmp_path, document_v3())
    results_dir = str(tmp_path / "results")
    assert cli.main(["validation", "--results-dir", results_dir]) == 0
    assert "| gpu01 <-> gpu02 |" in capsys.readouterr().out
    page = tmp_path / "v.html"
    assert cli.main(["validation", "--results-dir", results_dir, "--strict", "--html", str(page)]) == 1
    assert "<section class='node-validation'>" in page.read_text()


def test_cli_strict_passes_a_clean_v2_document_and_refuses_an_invalid_one(tmp_path, capsys):
    path = write(tmp_path, document_v2())
    assert cli.main(["validation", str(path), "--strict"]) == 0
    assert "| (cluster) | pass | skip | - | - | - | - |" in capsys.readouterr().out
    broken = copy.deepcopy(document_v2())
    broken["status"] = "maybe"
    path.write_text(json.dumps(broken))
    assert cli.main(["validation", str(path)]) == 2
    assert "does not match the node-validation v2 schema" in capsys.readouterr().err


def test_cli_strict_tells_incomplete_from_pass_and_fail(tmp_path, capsys):
    path = write(tmp_path, document_v4(expected=["gpu"]))
    assert cli.main(["validation", str(path)]) == 0
    assert cli.main(["validation", str(path), "--strict"]) == node_report.INCOMPLETE_EXIT == 3
    path.write_text(json.dumps(document_v4()))
    assert cli.main(["validation", str(path), "--strict"]) == 0
    assert "PASS: 2 of 14 checks ran, 12 skipped" in capsys.readouterr().out


def test_cli_given_the_folder_reads_its_latest_summary(tmp_path, capsys):
    folder = tmp_path / "results" / "node-validation"
    # The role's files: each run's <stamp>.json, latest.json a copy of the newest, and a folder of raw outputs.
    write(tmp_path, document_v2(), "20261121T070000Z.json")
    write(tmp_path, document_v3(), "20261122T070000Z.json")
    (folder / "20261122T070000Z").mkdir()
    write(tmp_path, document_v3())
    assert cli.main(["validation", str(folder), "--strict"]) == 1
    assert "FAIL: 15 of 17 checks ran (2 failed), 2 skipped" in capsys.readouterr().out
    # Without latest.json, the newest stamp.
    (folder / "latest.json").unlink()
    assert cli.main(["validation", str(folder)]) == 0
    assert "| gpu01 <-> gpu02 |" in capsys.readouterr().out


def test_cli_given_a_folder_without_a_summary_says_where_they_are(tmp_path, capsys):
    write(tmp_path, document_v3())
    assert cli.main(["validation", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'results'}: no latest.json or <stamp>.json summary in this folder" in err
    assert f"the results folder's summaries are in {tmp_path / 'results' / 'node-validation'}" in err
    (tmp_path / "empty").mkdir()
    assert cli.main(["validation", str(tmp_path / "empty")]) == 2
    assert "summaries are in" not in capsys.readouterr().err
