"""make bench's parts that run without the lab: the plain DDP and FSDP2 loops as two ranks on this host (Gloo on the
loopback, placed by the variables Open MPI or torchrun gives their ranks), the launch lines the peers run under, the
order of a trial's measurements, and what the ratios and intervals print as, from stub measurements."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import socket
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import benchrunner
from benchrunner import results
from unit_paths import PROJECT

BENCHMARKS = PROJECT / "benchmarks"
SRC = str(Path(benchrunner.__file__).resolve().parents[1])
HOSTS = ["node1", "node2"]
SWEEP_MIB = 256 * 1024 * 1024


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    # Registered first: dataclasses look their module up by name.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


peer_baselines = load("peer_baselines")


def arguments(tmp_path: Path, *more: str) -> Any:
    return peer_baselines.parser().parse_args(["--hosts", ",".join(HOSTS), "--workdir", str(tmp_path), *more])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def two_ranks(script: str, options: list[str], launcher: str) -> list[dict[str, Any]]:
    """The plain loop as two ranks on this host, each given what `launcher` gives its ranks and the rendezvous address
    benchrunner's mpirun line exports; one thread per rank on a 2-core host, and Gloo on the loopback. Each rank's
    last line, parsed; the outputs joined as mpirun interleaves them (rank 1's first) under "merged"."""
    port = str(free_port())
    variables = {
        "mpirun": lambda rank: {"OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": "2",
                                "OMPI_COMM_WORLD_LOCAL_RANK": str(rank), "OMPI_COMM_WORLD_LOCAL_SIZE": "2"},
        "torchrun": lambda rank: {"RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank),
                                  "LOCAL_WORLD_SIZE": "2"},
    }[launcher]
    processes = [subprocess.Popen([sys.executable, str(BENCHMARKS / script), *options, "--device", "cpu"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={
        "PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp"), "PYTHONPATH": SRC,
        "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
        **variables(rank)}) for rank in (0, 1)]
    outputs = []
    for process in processes:
        stdout, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr[-4000:]
        outputs.append(stdout)
    lasts = [json.loads(stdout.strip().splitlines()[-1]) for stdout in outputs]
    for rank, last in enumerate(lasts):
        assert (last["rank"], last["size"]) == (rank, 2)
    return [*lasts, {"merged": outputs[1] + outputs[0]}]


def test_plain_ddp_loop_as_two_ranks_prints_each_ranks_images_per_sec():
    *lasts, merged = two_ranks("pytorch_ddp_plain.py", ["--model", "small_cnn", "--image-size", "8", "--batch-size",
                                                        "2", "--warmup-steps", "1", "--measured-steps", "2"], "mpirun")
    for last in lasts:
        assert math.isfinite(last["images_per_sec"]) and last["images_per_sec"] > 0
    # mpirun interleaves the ranks' lines: rank 0's is found wherever it is.
    assert peer_baselines.rank0_rate(merged["merged"], "images_per_sec") == lasts[0]["images_per_sec"]


def test_plain_fsdp_loop_as_two_torchrun_ranks_prints_each_ranks_tokens_per_sec_and_loss():
    *lasts, merged = two_ranks("pytorch_fsdp_plain.py", ["--model", "llama-tiny", "--batch-size", "2",
                                                         "--sequence-length", "16", "--warmup-steps", "1",
                                                         "--measured-steps", "2"], "torchrun")
    for last in lasts:
        assert math.isfinite(last["tokens_per_sec"]) and last["tokens_per_sec"] > 0
        # A random model's next-token loss starts near ln(vocabulary), ln 4096 = 8.3 for llama-tiny; three AdamW steps
        # on the same 32 tokens (rate 0.01) bring it down, never to 0.
        assert 0.5 < last["loss"] < 8.3
    # Each rank trains its own tokens (seeded by rank), so their losses differ.
    assert lasts[0]["loss"] != lasts[1]["loss"]
    assert peer_baselines.rank0_rate(merged["merged"], "tokens_per_sec") == lasts[0]["tokens_per_sec"]


def test_a_plain_loop_whose_rank_0_printed_no_figure_stops_the_run_saying_what_it_printed():
    with pytest.raises(SystemExit, match=r"rank 0 printed no tokens_per_sec: .*Traceback"):
        peer_baselines.rank0_rate('{"rank": 1, "size": 2, "tokens_per_sec": 3.0}\nTraceback (most recent call last)\n',
                                  "tokens_per_sec")


def test_a_plain_loop_started_by_no_launcher_names_the_variables_it_looks_for():
    plain_ranks = load("plain_ranks")
    assert plain_ranks.place({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1"}) == (3, 4, 1)
    assert plain_ranks.place({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2",
                              "OMPI_COMM_WORLD_LOCAL_RANK": "0"}) == (1, 2, 0)
    with pytest.raises(SystemExit, match="torchrun: RANK, WORLD_SIZE, LOCAL_RANK; mpirun: OMPI_COMM_WORLD_RANK"):
        plain_ranks.place({"RANK": "0"})


def test_the_plain_loop_runs_under_benchrunners_mpirun_line_with_the_same_workload(tmp_path, monkeypatch):
    args = arguments(tmp_path, "--torch-model", "small_cnn", "--torch-batch-size", "4", "--torch-precision",
                     "mixed_bfloat16")
    seen = []

    def run(argv: list[str]) -> str:
        seen.append(argv)
        return '{"rank": 1, "size": 2, "images_per_sec": 9.0}\n{"rank": 0, "size": 2, "images_per_sec": 7.5}\n'

    monkeypatch.setattr(peer_baselines, "run", run)
    assert peer_baselines.plain_ddp(args, 3) == 7.5
    (argv,) = seen
    script = argv.index(str(BENCHMARKS / "pytorch_ddp_plain.py"))
    launch, options = argv[:script - 1], argv[script + 1:]
    assert launch[:3] == ["mpirun", "-np", "2"] and launch[-1] != peer_baselines.BENCHRUNNER
    # Where benchrunner's launcher tells pytorch-ddp ranks to meet: rank 0's host.
    assert {"MASTER_ADDR=node1", "MASTER_PORT=29500"} <= set(launch)
    assert (tmp_path / "hostfile").read_text() == "node1 slots=1\nnode2 slots=1\n"
    given = dict(zip(options[::2], options[1::2]))
    assert given == {"--model": "small_cnn", "--batch-size": "4", "--image-size": "32", "--num-classes": "10",
                     "--warmup-steps": "2", "--measured-steps": "10", "--precision": "mixed_bfloat16",
                     "--lr": "0.01", "--momentum": "0.9", "--device": "cpu"}
    # benchrunner's side trains the same workload at the same, unscaled, rate.
    workload = peer_baselines.torch_workload(args)
    assert (workload.framework, workload.learning_rate, workload.lr_scaling) == ("pytorch-ddp", 0.01, "none")


def test_the_plain_fsdp_loop_runs_under_benchrunners_mpirun_line_with_the_same_workload(tmp_path, monkeypatch):
    args = arguments(tmp_path, "--fsdp-batch-size", "2", "--fsdp-sequence-length", "64", "--fsdp-precision",
                     "mixed_bfloat16", "--fsdp-measured-steps", "5")
    seen = []

    def run(argv: list[str]) -> str:
        seen.append(argv)
        return ('{"rank": 0, "size": 2, "tokens_per_sec": 640.5, "loss": 8.3}\n'
                '{"rank": 1, "size": 2, "tokens_per_sec": 650.0, "loss": 8.2}\n')

    monkeypatch.setattr(peer_baselines, "run", run)
    assert peer_baselines.plain_fsdp(args, 2) == 640.5
    (argv,) = seen
    script = argv.index(str(BENCHMARKS / "pytorch_fsdp_plain.py"))
    launch, options = argv[:script - 1], argv[script + 1:]
    assert launch[:3] == ["mpirun", "-np", "2"] and {"MASTER_ADDR=node1", "MASTER_PORT=29500"} <= set(launch)
    given = dict(zip(options[::2], options[1::2]))
    assert given == {"--model": "llama-tiny", "--batch-size": "2", "--sequence-length": "64", "--warmup-steps": "2",
                     "--measured-steps": "5", "--precision": "mixed_bfloat16", "--lr": "0.01", "--beta1": "0.9",
                     "--weight-decay": "0.0", "--device": "cpu"}
    # benchrunner's side: pytorch-fsdp, AdamW at the same unscaled rate, the same shape, uncompiled like the loop.
    workload = peer_baselines.fsdp_workload(args)
    assert (workload.framework, workload.optimizer, workload.learning_rate, workload.lr_scaling, workload.kind,
            workload.units_per_step(), workload.settings.compile) == (
        "pytorch-fsdp", "adamw", 0.01, "none", "text", 2 * 64, False)
    assert workload.to_argv() == ["--framework", "pytorch-fsdp", "--model", "llama-tiny", "--batch-size", "2",
                                  "--sequence-length", "64", "--precision", "mixed_bfloat16", "--warmup-steps", "2",
                                  "--measured-steps", "5", "--optimizer", "adamw", "--lr-scaling", "none"]


def test_a_compiled_fsdp_workload_compiles_the_plain_loops_blocks_too():
    workload = peer_baselines.Workload.from_mapping({"framework": "pytorch-fsdp", "model": "llama-1b",
                                                     "optimizer": "adamw", "compile": True, "weight_decay": 0.1})
    options = peer_baselines.plain_fsdp_options(workload)
    assert options[-1] == "--compile" and options[options.index("--weight-decay") + 1] == "0.1"


def sweep(busbw: float, reduce_scatter: dict[str, Any]) -> dict[str, Any]:
    point = {"bytes": SWEEP_MIB, "busbw_bytes_per_s": busbw}
    return {"points": [{"bytes": SWEEP_MIB // 2, "busbw_bytes_per_s": 1.0}, point],
            "collectives": {"all_gather": {"points": [{**point, "busbw_bytes_per_s": busbw / 2}]},
                            "reduce_scatter": reduce_scatter}}


def test_a_trial_alternates_which_side_goes_first_and_keeps_the_link_beside_both_sweeps(tmp_path, monkeypatch):
    args = arguments(tmp_path)
    order = []
    link = {"kind": results.RAW_BANDWIDTH, "schema_version": results.SCHEMA_VERSION, "tool": "iperf 3.12",
            "hosts": HOSTS, "bytes_per_s": 1e9, "streams": 1, "duration_s": 5, "measured_at": "2025-01-01T00:00:00+00:00"}

    def stub(name: str, value: Any) -> Any:
        return lambda *given: order.append(name) or value

    def benchrunner(args: Any, run_id: str, workload: Any) -> float:
        order.append(workload.framework)
        return {"pytorch-ddp": 100.0, "pytorch-fsdp": 1990.0}.get(workload.framework, 50.0)

    def sweep_document(args: Any, run_id: str, options: list[str]) -> dict[str, Any]:
        order.append(run_id)
        return sweep(4e8, {"skipped": "Backend gloo does not support reduce_scatter"}) if options else sweep(6e8, {})

    for name, value in (("peer", 49.0), ("plain_ddp", 101.0), ("plain_fsdp", 2000.0), ("tcp_bandwidth", link),
                        ("mpi_busbw_bytes_per_s", 7e8)):
        monkeypatch.setattr(peer_baselines, name, stub(name, value))
    monkeypatch.setattr(peer_baselines, "benchrunner", benchrunner)
    monkeypatch.setattr(peer_baselines, "sweep_document", sweep_document)
    trial = peer_baselines.measure(args, 0)
    first = ["peer", "tensorflow-horovod", "plain_ddp", "pytorch-ddp", "plain_fsdp", "pytorch-fsdp", "tcp_bandwidth",
             "mpi_busbw_bytes_per_s", "allreduce-0", "torch-allreduce-0"]
    assert order == first
    assert trial == peer_baselines.Trial(
        peer=49.0, benchrunner=50.0, plain_ddp=101.0, benchrunner_torch=100.0, plain_fsdp=2000.0,
        benchrunner_fsdp=1990.0, link=1e9, mpi_busbw=7e8,
        horovod_busbw=6e8, torch_busbw=4e8,
        torch_others={"all_gather": 2e8, "reduce_scatter": "Backend gloo does not support reduce_scatter"})
    order.clear()
    peer_baselines.measure(args, 1)
    assert order == [name.replace("-0", "-1") for name in reversed(first)]
    for run_id in ("allreduce-0", "torch-allreduce-1"):
        assert results.load(results.RAW_BANDWIDTH, tmp_path / run_id / "raw" / results.RAW_BANDWIDTH_JSON) == link


def stub_trial(ratio: float, **more: Any) -> Any:
    """Every ratio of the trial is `ratio`; the link carries 1 GB/s."""
    return peer_baselines.Trial(**{
        "peer": 100.0, "benchrunner": 100.0 * ratio, "plain_ddp": 10.0, "benchrunner_torch": 10.0 * ratio,
        "plain_fsdp": 1000.0, "benchrunner_fsdp": 1000.0 * ratio,
        "link": 1e9, "mpi_busbw": 1e9 * ratio, "horovod_busbw": 1e9 * ratio, "torch_busbw": 1e9 * ratio,
        "torch_others": {"all_gather": 5e8 * ratio, "reduce_scatter": "Backend gloo does not support reduce_scatter"},
        **more})


def test_the_summary_prints_each_ratio_with_its_interval_and_the_other_collectives(tmp_path):
    lines = peer_baselines.summary(arguments(tmp_path), [stub_trial(0.99), stub_trial(0.97)])
    # mean 0.98, half-width t(1 dof) 12.706 x stdev 0.01414 / sqrt(2)
    ci = "0.980 (95% CI 0.853 to 1.107, n=2)"
    assert lines == [
        "small_cnn, batch 32, 32px, 2 ranks on node1, node2, 2 interleaved trials",
        f"(a) benchrunner / Horovod synthetic benchmark method: {ci}; goal >= 0.98",
        f"(b) allreduce busbw (256 MiB) / iperf3 TCP: {ci}; goal >= 0.8",
        f"    of which Open MPI's own MPI_Allreduce / iperf3 TCP: {ci}",
        f"(c) torch.distributed all_reduce busbw (256 MiB, Gloo) / iperf3 TCP: {ci}; goal >= 0.8",
        "    busbw at 256 MiB: all_gather 0.490 (95% CI 0.426 to 0.554, n=2) GB/s; "
        "reduce_scatter skipped (Backend gloo does not support reduce_scatter)",
        "(d) benchrunner pytorch-ddp / plain DDP loop (resnet50, batch 8, 32px, fp32, 2 warmup + 10 measured steps): "
        f"{ci}; goal >= 0.98",
        "(e) benchrunner pytorch-fsdp / plain FSDP2 loop (llama-tiny, batch 4, sequence 128, fp32, AdamW, 2 warmup + "
        f"10 measured steps): {ci}; goal >= 0.98",
    ]


def test_a_collective_skipped_in_some_trials_only_says_so_beside_its_figure():
    line = peer_baselines.other_collective("reduce_scatter", [2e9, "no reduce_scatter here", 2e9])
    assert line == "reduce_scatter 2.000 (95% CI 2.000 to 2.000, n=2) GB/s, skipped in 1 (no reduce_scatter here)"


def test_each_trial_prints_both_frameworks_measurements():
    first, second, third = peer_baselines.trial_lines(1, stub_trial(0.5))
    assert first == ("trial 1: peer    100.0 img/s  benchrunner     50.0 img/s  ratio 0.500 | iperf3  1.000 GB/s  "
                     "MPI_Allreduce busbw  0.500 GB/s  benchrunner allreduce busbw  0.500 GB/s  ratio 0.500")
    assert second == ("  plain DDP     10.0 img/s  benchrunner pytorch-ddp      5.0 img/s  ratio 0.500 | torch all_reduce "
                      "busbw  0.500 GB/s  ratio 0.500  all_gather busbw  0.250 GB/s  reduce_scatter busbw skipped "
                      "(Backend gloo does not support reduce_scatter)")
    assert third == "  plain FSDP2   1000.0 tokens/s  benchrunner pytorch-fsdp    500.0 tokens/s  ratio 0.500"


@pytest.mark.parametrize(("option", "model"), [("--torch-model", "densenet121_chexnet"),
                                               ("--torch-model", "no_such_model"), ("--torch-model", "llama-tiny"),
                                               ("--fsdp-model", "resnet50"), ("--fsdp-precision", "mixed_float16")])
def test_models_the_plain_loop_cannot_train_alike_are_refused(tmp_path, option, model, capsys):
    with pytest.raises(SystemExit):
        arguments(tmp_path, option, model)
    assert option in capsys.readouterr().err
