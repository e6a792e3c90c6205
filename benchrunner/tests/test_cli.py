import argparse
import subprocess
import sys

import jsonschema
import pytest

from benchrunner import cli, results, summary
from documents import write_json


def test_summarize_prints_the_table_and_succeeds(run_dir, make_rank, capsys):
    directory = run_dir(make_rank(0), make_rank(1))
    assert cli.main(["summarize", str(directory)]) == 0
    assert "| total |  | 640.0 |" in capsys.readouterr().out
    assert (directory / "summary.json").is_file()


def test_summarize_fails_a_run_that_failed_its_checks(run_dir, make_rank, capsys):
    directory = run_dir(make_rank(0, size=3), make_rank(1, size=3))
    assert cli.main(["summarize", str(directory)]) == 1
    assert "not to be trusted" in capsys.readouterr().err


def test_report_reads_latest(run_dir, make_rank, capsys):
    directory = run_dir(make_rank(0), make_rank(1))
    summary.write(directory)
    capsys.readouterr()
    assert cli.main(["report", "--results-dir", str(directory.parent)]) == 0
    assert capsys.readouterr().out.startswith("# Run run-1")


def test_schema_check_reports_each_file(tmp_path, make_rank, capsys):
    good = write_json(tmp_path / "good.json", make_rank())
    broken = make_rank()
    broken["host"] = ""
    bad = write_json(tmp_path / "bad.json", broken)
    assert cli.main(["schema-check", str(good), str(bad)]) == 1
    captured = capsys.readouterr()
    assert f"{good}: ok" in captured.out
    assert "at host" in captured.err


def test_errors_become_messages_not_tracebacks(tmp_path, capsys):
    assert cli.main(["report", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("benchrunner: ")


def test_extra_vars_are_parsed_as_json_when_they_can_be():
    assert cli._extravars(["a=1", "b=text", "c=[1, 2]", "d={\"x\": true}"]) == {
        "a": 1, "b": "text", "c": [1, 2], "d": {"x": True}}
    with pytest.raises(ValueError, match="-e takes NAME=VALUE, got 'novalue'"):
        cli._extravars(["novalue"])


def test_train_rejects_unknown_model_before_importing_tensorflow(tmp_path, capsys):
    assert cli.main(["train", "--run-id", "r", "--output-dir", str(tmp_path), "--model", "resnet9000"]) == 2
    assert "model 'resnet9000' is not one of densenet121_chexnet, inception_v3" in capsys.readouterr().err


def test_train_rejects_real_data_without_a_folder_before_importing_tensorflow(tmp_path, capsys):
    assert cli.main(["train", "--run-id", "r", "--output-dir", str(tmp_path), "--data", "images"]) == 2
    assert "data 'images' needs a data directory" in capsys.readouterr().err


def test_help_lists_every_command(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    for command in ("train", "allreduce", "dataset", "launch", "campaign", "summarize", "report", "compare",
                    "schema-check", "models", "deploy", "bench"):
        assert command in out


@pytest.mark.parametrize("kind", [results.RANK_RESULT, results.SUMMARY])
def test_training_result_schemas_are_valid_json_schemas_at_every_readable_version(kind):
    assert results.readable_versions(kind) == (2, 3)
    for version in results.readable_versions(kind):
        document = results.schema(kind, version)
        jsonschema.Draft202012Validator.check_schema(document)
        assert document["$id"] == f"benchrunner/{kind}.v{version}.json"


def _bad_inputs(tmp_path, run_dir, make_rank):
    """(argv, what the one error line must name) for inputs that used to end in a traceback."""
    array = write_json(tmp_path / "array.json", [1, 2])
    not_yaml = tmp_path / "broken.yaml"
    not_yaml.write_text("kind: [Pod\n")
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    # Nested far deeper than the json parser's recursion goes (it raised RecursionError).
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    run = run_dir(make_rank(0), make_rank(1))
    summary.write(run)
    return [
        (["job", "launch", str(deep)], f"{deep}: arrays and objects nested more than 64 deep, far deeper than any "
                                       "document benchrunner reads"),
        (["schema-check", str(deep)], f"{deep}: arrays and objects nested more than 64 deep"),
        (["launch", "--dry-run", "--framework", "pytorch-ddp", "--launcher", "torchrun", "--run-id", "r1", "--ranks", "1",
          "--hosts", "n1", "--data", "images", "--data-dir", "/d", "--dataloader-workers", "1000000"],
         "dataloader workers must be an integer from 0 to 256 per rank, each a process of its own on every rank "
         "(got 1000000)"),
        (["schema-check", str(array)], f"{array}: expected a JSON object with a 'kind', got a JSON list"),
        (["validate-manifests", str(not_yaml)], f"FAIL {not_yaml}: not YAML: while parsing a flow sequence"),
        (["compare", str(run), str(run), "-o", str(a_file)], f"{a_file}"),
        (["dataset", str(a_file)], f"{a_file}: exists and is not a folder"),
        (["dataset", str(tmp_path / "d"), "--image-size", "-1"], "--image-size must be 8 to 4096 pixels (got -1)"),
        (["dataset", str(tmp_path / "d"), "--images", "0"], "--images must be at least 1 (got 0)"),
        (["dataset", str(tmp_path / "d"), "--tfrecord-shards", "2"], "--tfrecord-shards needs TensorFlow"),
    ]


def test_every_bad_input_is_one_line_naming_it_not_a_traceback(tmp_path, run_dir, make_rank, capsys):
    for argv, named in _bad_inputs(tmp_path, run_dir, make_rank):
        capsys.readouterr()
        assert cli.main(argv) != 0, argv
        err = capsys.readouterr().err
        assert named in err, (argv, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, (argv, err)
    # Refused before anything was written.
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize(("argv", "abbreviated"), [
    (["launch", "--dry-run", "--run-id", "r1", "--results-dir", "/o", "--ranks", "1", "--image-s", "64"], "--image-s"),
    (["train", "--run-id", "r1", "--output-dir", "/o", "--measured", "5"], "--measured"),
    (["dataset", "/tmp/d", "--image", "8"], "--image"),
])
def test_an_abbreviated_option_is_refused(argv, abbreviated, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    assert f"unrecognized arguments: {abbreviated}" in capsys.readouterr().err


def test_no_command_takes_abbreviations():
    parser = cli.build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert parser.allow_abbrev is False
    assert {name for name, sub in commands.choices.items() if sub.allow_abbrev} == set()


@pytest.mark.parametrize("timeout", ["0", "-5", "nan"])
def test_a_timeout_that_never_ends_or_never_starts_is_refused(timeout, capsys):
    with pytest.raises(SystemExit):
        cli.main(["launch", "--dry-run", "--launcher", "mpijob", "--stack", "k8s", "--run-id", "r1", "--results-dir",
                  "/o", "--ranks", "1", "--image", "i:1", "--timeout", timeout])
    assert f"--timeout: must be a number of seconds > 0, got '{timeout}'" in capsys.readouterr().err


def test_a_kubernetes_release_the_validator_does_not_know_is_one_line(capsys):
    assert cli.main(["launch", "--dry-run", "--launcher", "mpijob", "--stack", "k8s", "--run-id", "r1", "--results-dir",
                     "/o", "--ranks", "1", "--image", "i:1", "--kubernetes-version", "1.99.0"]) == 2
    err = capsys.readouterr().err
    assert "Kubernetes 1.99.0: the offline validator knows 1.25.0 to" in err and len(err.splitlines()) == 1


def test_a_launchers_option_given_to_a_launcher_that_does_not_read_it_is_refused(capsys):
    # mpirun reads no Slurm settings: the partition would be dropped without a word.
    assert cli.main(["launch", "--dry-run", "--launcher", "mpirun", "--run-id", "r1", "--results-dir", "/o",
                     "--ranks", "1", "--hosts", "n1", "--partition", "gpu"]) == 2
    assert ("slurm holds the settings of srun, torchrun, not of launcher mpirun (which takes no settings)"
            in capsys.readouterr().err)
    # Left out, another launcher's options stay out of the job: the same job without them is printed.
    assert cli.main(["launch", "--dry-run", "--launcher", "mpirun", "--run-id", "r1", "--results-dir", "/o",
                     "--ranks", "1", "--hosts", "n1"]) == 0
    assert "mpirun" in capsys.readouterr().out


LEAVE = """
import atexit, sys
from benchrunner import cli
cli.cmd_train = cli.cmd_summarize = lambda args: print("done", end="") or 0
atexit.register(lambda: print(" and shut down", end=""))
sys.argv = ["benchrunner"] + sys.argv[1:]
cli.main()
print(" and on", end="")
"""


@pytest.mark.parametrize(("argv", "out"), [(["train", "--run-id", "r", "--output-dir", "/o"], "done and shut down"),
                                           (["summarize", "/r"], "done and on and shut down")])
def test_a_rank_that_is_done_leaves_without_the_interpreter_s_teardown(argv, out):
    # A rank's process: its exit handlers run (the frameworks' own shutdown), its output is flushed, status 0, and
    # nothing after that; any other command returns as usual.
    done = subprocess.run([sys.executable, "-c", LEAVE, *argv], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout) == (0, out), done.stderr


def test_a_rank_program_called_as_a_function_returns(monkeypatch):
    # main() given arguments (tests, callers) never leaves the process, even for a rank program.
    seen = []
    monkeypatch.setattr(cli, "cmd_train", lambda args: seen.append(args) or 0)
    assert cli.main(["train", "--run-id", "r", "--output-dir", "/o"]) == 0
    assert len(seen) == 1
