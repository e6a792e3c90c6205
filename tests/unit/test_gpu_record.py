"""make gpu-record (tools/gpu_record.py): its dry run on this machine's CPU (the ResNet-50 path with small_cnn, the
transformer's with llama-tiny, eager, and make bench's PyTorch peers), which presets it trains on a GPU,
and the loud stops on a machine that has no nvidia-smi or no CUDA device."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchrunner.models import llama
from unit_paths import PROJECT

SCRIPT = PROJECT / "tools" / "gpu_record.py"
BENCHRUNNER_SRC = PROJECT / "benchrunner" / "src"
H100 = PROJECT / "tests" / "unit" / "fixtures" / "gpu-record-h100-20261124"


def load_record():
    spec = importlib.util.spec_from_file_location("gpu_record", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gpu_record = load_record()


def record(out: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(out), *args], capture_output=True, text=True,
                          env=env or dict(os.environ), timeout=900, check=False)


def torch_imports() -> bool:
    return subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, check=False).returncode == 0


needs_torch = pytest.mark.skipif(not torch_imports(), reason="PyTorch does not import in this Python")


@needs_torch
def test_a_cpu_dry_run_records_everything_but_the_gpu(tmp_path):
    out = tmp_path / "record"
    done = record(out, "--cpu", "--facts-runner", "stand-in")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    commands = {c["name"]: c for c in json.loads((out / "commands.json").read_text())}
    for name in ("nvidia-smi-q-x", "nvidia-smi-q", "nvidia-smi-topo-m", "nvidia-smi-version"):
        assert commands[name]["skipped"].startswith("--cpu dry run"), name
        assert (out / f"{name}.skipped").read_text().startswith("--cpu dry run")
    # The facts modules ran on this machine, through the stand-in for AnsibleModule, and the validation play itself
    # judged the node.
    for module in ("gpu_facts", "rdma_facts", "gpudirect_facts"):
        assert commands[f"facts-{module}"]["rc"] == 0
    assert json.loads((out / "facts-gpu_facts.json").read_text())["present"] is False
    checks = json.loads((out / "validate.json").read_text())["checks"]
    assert set(checks) >= {"nvidia_smi", "peermem_loaded", "gpudirect_route", "gpu_nic_topology", "reboot_pending"}
    assert commands["validate-play"]["rc"] == 0
    assert checks["nvidia_smi"]["status"] == "skip"

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["mode"] == "cpu" and manifest["facts_runner"] == "stand-in" and manifest["problems"] == []
    assert manifest["torch"] and manifest["hostname"] and manifest["date"] and "driver_version" in manifest
    described = subprocess.run(["git", "-C", str(PROJECT), "describe", "--always", "--dirty"], capture_output=True,
                               text=True, check=False).stdout.strip()
    assert manifest["git_describe"] == (described or None)
    points = manifest["points"]
    assert [(p["model"], p["precision"], p["batch_size"]) for p in points] == [("small_cnn", "fp32", 8),
                                                                               ("small_cnn", "fp32", 16)]
    for point in points:
        assert point["status"] == "ok" and point["samples_per_sec"] > 0 and point["window"].startswith("window:")
        assert point["unit"] == "images"
        rank = json.loads((out / "runs" / point["id"] / "raw" / "rank-00000.json").read_text())
        # Started by torchrun, and recorded as such; its start is kept by stage.
        assert (rank["provenance"]["launcher"], rank["provenance"]["torch"]["launched_by"]) == ("torchrun", "torchrun")
        assert list(rank["metrics"]["startup_s"]) >= ["first_step"]
        assert (out / "runs" / point["id"] / "summary.json").is_file()
    numbers = (out / "numbers.md").read_text()
    rows = [line for line in numbers.splitlines() if line.startswith("| small_cnn |")]
    assert len(rows) == 2 and all(" | ok" in row for row in rows)
    assert "| model | precision | batch | per second | 95% CI |" in numbers
    assert all(" images | " in row for row in rows)

    # The transformer's path: llama-tiny through pytorch-fsdp, eager, one sequence length (Inductor's compile takes
    # minutes on two shared cores; the GPU's grid, compiled and not at two lengths, is text_points', tested below).
    texts = manifest["text_points"]
    assert [(p["model"], p["sequence_length"], p["batch_size"], p["compile"]) for p in texts] == [
        ("llama-tiny", 32, 4, False)]
    for point in texts:
        assert point["status"] == "ok" and point["unit"] == "tokens" and point["samples_per_sec"] > 0, point
        rank = json.loads((out / "runs" / point["id"] / "raw" / "rank-00000.json").read_text())
        assert (rank["framework"], rank["model"]["kind"], rank["workload"]["compile"]) == (
            "pytorch-fsdp", "text", point["compile"])
        assert rank["workload"]["sequence_length"] == point["sequence_length"]
        assert point["peak_memory_bytes"] == rank["memory"]["peak_bytes"] > 0
        # On a CPU there is no datasheet peak: the MFU against it is missing with benchrunner's reason, never 0; the
        # GEMM probe's is the only one, its interval the throughput's scaled.
        assert point["mfu"] is None and "no GPU" in point["peak_missing"]
        vs_probe = point["mfu_vs_probe"]
        # A few seconds' steps on shared cores: the interval may reach below 0, the mean may not.
        assert vs_probe["ci95_low"] <= vs_probe["mean"] <= vs_probe["ci95_high"] and vs_probe["mean"] > 0
        assert vs_probe["ci95_low"] / vs_probe["mean"] == pytest.approx(point["ci95_low"] / point["samples_per_sec"])
        assert point["probe_tflops"] > 0 and point["model_tflops_per_device"] > 0
    text_rows = [line for line in numbers.splitlines() if line.startswith("| llama-tiny |")]
    assert len(text_rows) == 1 and all(re.search(r"\| ok \|$", row) for row in text_rows)
    assert all("| - (rank 0: no GPU" in row for row in text_rows)
    assert "Presets on one device: 16 bytes of training state a parameter against 75% of its memory: not judged " \
           "(no GPU)." in numbers

    # make bench's two PyTorch peers, each side's figure from its own output, interleaved.
    peers = {pair["pair"]: pair for pair in manifest["peers"]}
    assert sorted(peers) == ["ddp", "fsdp"]
    assert (peers["ddp"]["model"], peers["fsdp"]["model"]) == ("small_cnn", "llama-tiny")
    for name, pair in peers.items():
        assert len(pair["trials"]) == 2 and pair["ratio"]["n"] == 2
        ratios = [t["benchrunner"] / t["plain"] for t in pair["trials"]]
        assert pair["ratio"]["mean"] == pytest.approx(sum(ratios) / 2)
        assert pair["ratio"]["ci95_low"] <= pair["ratio"]["mean"] <= pair["ratio"]["ci95_high"]
        for trial, figures in enumerate(pair["trials"]):
            folder = out / "peers" / f"{name}-{trial}"
            rank = json.loads((folder / "raw" / "rank-00000.json").read_text())
            assert figures["benchrunner"] == rank["metrics"]["samples_per_sec"]
            key = "tokens_per_sec" if name == "fsdp" else "images_per_sec"
            assert figures["plain"] == json.loads((folder / "plain.out").read_text().strip().splitlines()[-1])[key]
    # The side that goes first alternates between trials.
    order = [c["name"] for c in json.loads((out / "commands.json").read_text()) if c["name"].startswith("peers/fsdp")]
    assert order == ["peers/fsdp-0/benchrunner", "peers/fsdp-0/plain", "peers/fsdp-1/plain", "peers/fsdp-1/benchrunner"]
    assert re.search(r"\| pytorch-fsdp \| llama-tiny \| fp32 \| 4 \| no \| [0-9.]+ / [0-9.]+, [0-9.]+ / [0-9.]+ \| "
                     r"[0-9.]+ \([0-9.-]+ - [0-9.]+, n=2\) \|", numbers)


def h100_memory_bytes() -> int:
    """The recorded H100's memory as its driver reported it (nvidia-smi -q -x: fb_memory_usage/total, in MiB)."""
    total = re.search(r"<fb_memory_usage>\s*<total>(\d+) MiB</total>", (H100 / "nvidia-smi-q-x.xml").read_text())
    return int(total.group(1)) * 2**20


def test_on_an_80_gb_h100_llama_8b_does_not_fit_so_llama_125m_trains_beside_llama_1b():
    counts = {name: llama.parameters(config) for name, config in llama.CONFIGS.items()}
    fits = gpu_record.fitting(counts, h100_memory_bytes())
    # 8.03 billion parameters x 16 bytes = 128 GB of weights, gradients and AdamW moments; 75% of 81,559 MiB is 64 GB.
    assert fits["llama-8b"]["fits"] is False and fits["llama-8b"]["state_bytes"] == counts["llama-8b"] * 16
    assert fits["llama-8b"]["state_bytes"] > 128e9 and fits["llama-8b"]["room_bytes"] == int(0.75 * 81559 * 2**20)
    assert fits["llama-1b"]["fits"] and fits["llama-1b"]["state_bytes"] == 16 * 1_235_814_400
    assert gpu_record.text_models("gpu", fits) == ["llama-1b", "llama-125m"]
    points = gpu_record.text_points("gpu", ["llama-1b"])
    assert [(p["sequence_length"], p["batch_size"], p["compile"], p["precision"]) for p in points] == [
        (2048, 4, False, "mixed_bfloat16"), (2048, 4, True, "mixed_bfloat16"), (4096, 2, False, "mixed_bfloat16"),
        (4096, 2, True, "mixed_bfloat16")]
    argv = gpu_record.train_argv("python", points[1], Path("/r"))
    assert argv[argv.index("--framework") + 1] == "pytorch-fsdp" and "--compile" in argv
    assert argv[argv.index("--optimizer") + 1] == "adamw" and "--channels-last" not in argv


def test_a_gpu_that_holds_llama_8bs_state_trains_it_beside_llama_1b():
    counts = {name: llama.parameters(config) for name, config in llama.CONFIGS.items()}
    # 180 GiB: a B200's order of memory; 75% of it holds llama-8b's 128 GB.
    assert gpu_record.text_models("gpu", gpu_record.fitting(counts, 180 * 2**30)) == ["llama-1b", "llama-8b"]


def test_the_gpu_peers_train_the_ddp_pair_at_amp_batch_256_and_the_plain_loops_alike():
    ddp, fsdp = gpu_record.PEERS["gpu"]["ddp"], gpu_record.PEERS["gpu"]["fsdp"]
    assert (ddp["model"], ddp["precision"], ddp["batch_size"]) == ("resnet50", "mixed_float16", 256)
    plain = gpu_record.plain_argv("python", {**fsdp, "id": "x"}, "cuda")
    given = plain[plain.index(str(PROJECT / "benchmarks" / "pytorch_fsdp_plain.py")) + 1:]
    assert given == ["--model", "llama-1b", "--batch-size", "4", "--sequence-length", "2048", "--compile",
                     "--precision", "mixed_bfloat16", "--warmup-steps", "10", "--measured-steps", "30",
                     "--device", "cuda"]
    bench = gpu_record.train_argv("python", {**fsdp, "id": "x"}, Path("/r"))
    assert bench[bench.index("--sequence-length") + 1] == "2048" and "--compile" in bench


def test_no_nvidia_smi_stops_the_record_saying_so(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "bash").symlink_to("/bin/bash")
    done = record(tmp_path / "record", env=dict(os.environ, PATH=str(bin_dir)))
    assert done.returncode == 2
    assert "nvidia-smi is not on PATH" in done.stderr and "--cpu" in done.stderr
    assert (tmp_path / "record" / "FAILED.txt").read_text().startswith("nvidia-smi is not on PATH")


@needs_torch
def test_no_cuda_device_stops_the_record_after_keeping_what_nvidia_smi_said(tmp_path):
    """A machine whose nvidia-smi answers but whose PyTorch sees no GPU (here: a stand-in nvidia-smi, a CPU torch)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\n[ \"$1\" = topo ] && { echo 'topo: no GPU' >&2; exit 9; }\necho \"nvidia-smi $*\"\n")
    smi.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", CUDA_VISIBLE_DEVICES="")
    out = tmp_path / "record"
    done = record(out, env=env)
    assert done.returncode == 2
    assert "sees no CUDA device" in done.stderr
    commands = {c["name"]: c for c in json.loads((out / "commands.json").read_text())}
    assert commands["nvidia-smi-q"]["rc"] == 0 and (out / "nvidia-smi-q.out").read_text() == "nvidia-smi -q\n"
    # A failing command keeps its exit code and what it said.
    assert commands["nvidia-smi-topo-m"]["rc"] == 9 and (out / "nvidia-smi-topo-m.err").read_text() == "topo: no GPU\n"
    assert not (out / "manifest.json").exists()


def test_an_unknown_part_is_refused_naming_the_parts(tmp_path):
    done = record(tmp_path / "record", "--cpu", "--parts", "text,nccl")
    assert done.returncode == 2 and "parts nccl not among text, peers, image" in done.stderr
    assert not (tmp_path / "record").exists()


def test_an_output_folder_in_use_is_refused(tmp_path):
    (tmp_path / "record").mkdir()
    (tmp_path / "record" / "numbers.md").write_text("an earlier record\n")
    done = record(tmp_path / "record", "--cpu")
    assert done.returncode == 2 and "is not empty" in done.stderr


@needs_torch
def test_benchrunner_that_cannot_import_its_needs_stops_the_record_naming_what_failed(tmp_path):
    """The GPU machine's Python has torch but not every package benchrunner needs (jsonschema, there)."""
    shadow = tmp_path / "shadow" / "jsonschema"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('no jsonschema in this Python')\n")
    done = record(tmp_path / "record", "--cpu", env=dict(os.environ, PYTHONPATH=str(shadow.parent)))
    assert done.returncode == 2
    assert "benchrunner does not start here (ImportError: no jsonschema in this Python)" in done.stderr
    assert "predates" not in done.stderr
