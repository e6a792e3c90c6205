import base64
import io
import json
import re

import pytest

from benchrunner import cli, gather


def answer(*files):
    return "".join(f"{name}\n{base64.b64encode(content.encode()).decode()}\n" for name, content in files)


def test_each_node_s_files_land_in_the_run_folder_as_sent(tmp_path):
    answers = {"node1": answer(("raw/rank-00000.json", '{"rank": 0}\n'), ("hostfile", "node1 slots=1\n")),
               "node2": answer(("raw/rank-00001.json", '{"rank": 1}\n')), "node3": ""}
    written = gather.write(tmp_path, answers, ("hostfile",), require_leaves=True)
    assert written == ["hostfile", "raw/rank-00000.json", "raw/rank-00001.json"]
    assert (tmp_path / "raw" / "rank-00001.json").read_text() == '{"rank": 1}\n'
    assert (tmp_path / "hostfile").read_text() == "node1 slots=1\n"


@pytest.mark.parametrize(("answers", "problem"), [
    ({"n1": answer(("../summary.json", "{}"))}, "n1: sent '../summary.json', which is neither a rank's result"),
    ({"n1": answer(("raw/rank-0.json", "{}")) + "raw/rank-1.json\n"}, "n1: a file name without its content"),
    ({"n1": "raw/rank-0.json\nnot base64!\n"}, "n1: raw/rank-0.json: not base64 of UTF-8 text"),
    ({"n1": answer(("raw/allreduce.json", "{}")), "n2": answer(("raw/allreduce.json", "[]"))},
     "raw/allreduce.json: n1 and n2 sent different files"),
    ({"n1": answer(("raw/rank-0.json", "{}"))}, "the launcher's host sent no job.sbatch"),
])
def test_anything_a_node_may_not_send_is_refused_naming_it(tmp_path, answers, problem):
    with pytest.raises(ValueError, match=re.escape(problem)):
        gather.write(tmp_path, answers, ("job.sbatch",), require_leaves=True)
    assert not (tmp_path / "raw").exists()


def test_a_failed_launch_keeps_what_came_without_its_leaves(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(
        {"node1": answer(("raw/rank-00000.json", "{}"))})))
    assert cli.main(["job", "gather", str(tmp_path), "--leaves", "job.sbatch"]) == 0
    assert "gathered 1 file(s) from 1 node(s): raw/rank-00000.json" in capsys.readouterr().out
    monkeypatch.setattr("sys.stdin", io.StringIO('["node1"]'))
    assert cli.main(["job", "gather", str(tmp_path)]) == 2
    assert "a JSON object of host -> what its command printed" in capsys.readouterr().err
