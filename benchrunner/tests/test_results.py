import json

import pytest

from benchrunner import results
from documents import write_json


def test_valid_rank_document_round_trips(tmp_path, make_rank):
    path = tmp_path / "rank-00000.json"
    results.save(results.RANK_RESULT, make_rank(), path)
    assert results.load(results.RANK_RESULT, path) == make_rank()
    assert oct(path.stat().st_mode & 0o777) == "0o644"


def test_missing_field_is_named(tmp_path, make_rank):
    document = make_rank()
    del document["metrics"]["samples_per_sec"]
    with pytest.raises(results.ResultError, match="at metrics: 'samples_per_sec' is a required property"):
        results.load(results.RANK_RESULT, write_json(tmp_path / "r.json", document))


def test_wrong_type_is_named_with_its_path(tmp_path, make_rank):
    document = make_rank()
    document["workload"]["batch_size"] = "32"
    with pytest.raises(results.ResultError, match="at workload/batch_size"):
        results.validate(results.RANK_RESULT, document)


def test_other_schema_version_is_refused(make_rank):
    document = make_rank()
    document["schema_version"] = 1
    with pytest.raises(results.ResultError, match="schema_version 1 is not the supported 2"):
        results.validate(results.RANK_RESULT, document)


def test_invalid_document_is_not_written(tmp_path, make_rank):
    document = make_rank()
    document["rank"] = -1
    with pytest.raises(results.ResultError):
        results.save(results.RANK_RESULT, document, tmp_path / "r.json")
    assert list(tmp_path.iterdir()) == []


def test_unreadable_and_non_json_files(tmp_path):
    with pytest.raises(results.ResultError, match="cannot read"):
        results.load(results.SUMMARY, tmp_path / "absent.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(results.ResultError, match="not JSON"):
        results.load(results.SUMMARY, tmp_path / "bad.json")
    with pytest.raises(results.ResultError, match="expected a JSON object"):
        results.load(results.SUMMARY, write_json(tmp_path / "list.json", [1]))


def test_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "summary.json"
    target.write_text('{"old": true}')

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(results.os, "replace", broken_replace)
    with pytest.raises(OSError):
        results.write_atomic(target, json.dumps({"new": True}))
    assert json.loads(target.read_text()) == {"old": True}
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]


def test_kind_of():
    assert results.kind_of({"kind": "summary"}) == results.SUMMARY
    with pytest.raises(results.ResultError, match="unknown result kind"):
        results.kind_of({"kind": "other"})


def node_validation(check):
    return {"kind": "node-validation", "schema_version": 2, "created": "2026-11-21T07:00:00Z", "status": "pass",
            "cluster": {"versions_uniform": {"status": "skip", "reason": "no node has an NVIDIA GPU"},
                        "ib_write_bw_pair": {"status": "pass", "detail": "gpu01 <-> gpu02", "gbps": 392.4}},
            "nodes": {"gpu01": {"roles": {"nvidia_driver": {"steps": "run", "reason": None, "version": "580.95.05"}},
                                "versions": {"driver": "580.95.05", "cuda": "13.0", "nccl": "2.27.7"},
                                "checks": {"nvidia_smi": check, "ib_ports_active": {"status": "pass"},
                                           "peermem_loaded": {"status": "pass"}, "reboot_pending": {"status": "pass"}}}}}


def test_node_validation_summary_is_checked_like_every_result():
    results.validate(results.NODE_VALIDATION, node_validation({"status": "pass", "detail": "8 GPU(s) answer"}))


def test_a_skipped_or_failed_check_must_say_why():
    with pytest.raises(results.ResultError, match="node-validation v2 schema at nodes/gpu01/checks/nvidia_smi"):
        results.validate(results.NODE_VALIDATION, node_validation({"status": "skip"}))
