#!/usr/bin/env python3
"""Records one NVIDIA GPU machine for the project (make gpu-record): what the driver says, what the collection's facts
modules and the validation play's GPU checks make of it, benchrunner's PyTorch ResNet-50 throughput on one GPU, its
FSDP2 transformer's tokens/s and MFU (llama-1b and the largest other preset whose training state fits the GPU, bf16,
with and without torch.compile, sequence 2048 and 4096), and make bench's two PyTorch peers on the same GPU.

Runs offline with the Python and PyTorch already on the machine: benchrunner comes from this checkout
(PYTHONPATH=benchrunner/src), nothing is installed. Everything lands in one folder (default
build/gpu-record/<date>-<hostname>/):
  nvidia-smi-*.out/.err   each nvidia-smi command's output, its exit code in commands.json (a failure is recorded, and
                          fails the run at the end, never skipped)
  facts-*.json            gpu_facts, rdma_facts, gpudirect_facts as run on the machine (through ansible-core when it
                          is importable, else through tools/gpu_record_module.py's stand-in for AnsibleModule)
  validate.json           playbooks/validate.yml's checks of this node, from the play itself run here (connection
                          local; validation/ keeps its node-validation summary)
  runs/<point>/           each training point's run: raw/rank-00000.json (benchrunner train --output-dir), then
                          summary.json and report.md (benchrunner summarize); logs/ holds what both printed
  peers/<pair>-<trial>/    make bench's PyTorch peers, each pair's sides interleaved trial by trial (the side that
                          goes first alternating): benchrunner (raw/) against the plain loop (benchmarks/
                          pytorch_ddp_plain.py, pytorch_fsdp_plain.py, under torchrun; plain.out)
  numbers.md              throughput per second (images or tokens) with the 95% interval per point, the transformer's
                          MFU against the datasheet peak and against the GEMM probe, the peers' ratios with their
                          intervals; manifest.json: date, host, GPU, driver, torch, which presets fit and why
It stops at once, saying why, where nvidia-smi is missing or PyTorch sees no CUDA device. --cpu is a dry run for a
machine without a GPU: the nvidia-smi part is skipped with that reason, and small_cnn and llama-tiny train at tiny
sizes on the CPU through the same path (the peers included).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
# benchrunner's statistics are plain Python: the peers' intervals are its own.
sys.path.insert(0, str(PROJECT / "benchrunner" / "src"))
from benchrunner import stats  # noqa: E402

MODULES = PROJECT / "collections" / "ansible_collections" / "hpcml" / "cluster" / "plugins" / "modules"
FACTS_MODULES = ("gpu_facts", "rdma_facts", "gpudirect_facts")
SMI_COMMANDS = (("nvidia-smi-q-x", ["-q", "-x"]), ("nvidia-smi-q", ["-q"]), ("nvidia-smi-topo-m", ["topo", "-m"]),
                ("nvidia-smi-version", ["--version"]))
# ansible-playbook from whichever Python has ansible-core (carried as a wheel where none is installed).
PLAYBOOK_CLI = "import sys; from ansible.cli.playbook import main; sys.argv[0] = 'ansible-playbook'; main()"
# This machine as the play's one node.
VALIDATE_INVENTORY = """all:
  children:
    nodes:
      hosts:
        localhost:
          ansible_connection: local
          ansible_python_interpreter: {python}
"""
TORCH_PROBE = """
import json, sys, torch, torch.distributed
cuda = torch.cuda.is_available()
nccl = torch.cuda.nccl.version() if cuda and torch.distributed.is_nccl_available() else None
print(json.dumps({"python": sys.version.split()[0], "torch": torch.__version__, "torch_cuda": torch.version.cuda,
                  "cudnn": torch.backends.cudnn.version() if cuda else None, "cuda_available": cuda,
                  "device_count": torch.cuda.device_count() if cuda else 0,
                  "device_name": torch.cuda.get_device_name(0) if cuda else None,
                  "device_memory_bytes": torch.cuda.get_device_properties(0).total_memory if cuda else None,
                  "nccl": ".".join(map(str, nccl)) if isinstance(nccl, tuple) else nccl}))
"""
# What each mode trains: the GPU record's ResNet-50 points, and the dry run's tiny small_cnn ones.
WORKLOADS = {
    "gpu": {"model": "resnet50", "image_size": 224, "batch_sizes": (64, 128, 256),
            "precisions": ("mixed_float16", "fp32"), "warmup_steps": 20, "measured_steps": 100},
    "cpu": {"model": "small_cnn", "image_size": 32, "batch_sizes": (8, 16), "precisions": ("fp32",),
            "warmup_steps": 2, "measured_steps": 10},
}
# The transformer's points: FSDP2 (one rank, so the shards are whole), bf16 parameters, AdamW; each sequence length at
# the same tokens per step (8,192 a rank: torchtitan's Llama 3 8B recipe trains 8,192-token sequences one a GPU).
# The dry run trains llama-tiny at tiny sizes, eager: every part of the GPU's path runs but Inductor's compile, which
# took minutes of make unit's two shared cores (its command line is tested; it runs on the GPU).
TEXT = {
    "gpu": {"anchor": "llama-1b", "sequence_lengths": (2048, 4096), "tokens_per_step": 8192,
            "precision": "mixed_bfloat16", "compile": (False, True), "warmup_steps": 10, "measured_steps": 30},
    "cpu": {"anchor": "llama-tiny", "sequence_lengths": (32,), "tokens_per_step": 128, "precision": "fp32",
            "compile": (False,), "warmup_steps": 2, "measured_steps": 6},
}
# Training state a parameter holds on the GPU under FSDP2 with bf16 compute: the fp32 sharded parameter (4 bytes),
# its fp32 gradient (4) and AdamW's two fp32 moments (8); the bf16 copies FSDP2 gathers live one block at a time.
STATE_BYTES_PER_PARAMETER = 16
# The share of the GPU's memory that state may take: the rest holds activations (sequence x batch x layers), the
# logits over a 128,256-token vocabulary (in fp32 for the loss) and the allocator's slack.
STATE_SHARE = 0.75
# make bench's PyTorch peers on one GPU: (pair, benchrunner's workload, the plain loop's script); the interleaved
# trials of each pair. The DDP pair trains ResNet-50 as the ResNet-50 points' best, AMP at batch 256.
PEERS = {
    "gpu": {"ddp": {"framework": "pytorch-ddp", "model": "resnet50", "image_size": 224, "batch_size": 256,
                    "precision": "mixed_float16", "compile": False, "warmup_steps": 20, "measured_steps": 100},
            "fsdp": {"framework": "pytorch-fsdp", "model": "llama-1b", "sequence_length": 2048, "batch_size": 4,
                     "precision": "mixed_bfloat16", "compile": True, "warmup_steps": 10, "measured_steps": 30}},
    "cpu": {"ddp": {"framework": "pytorch-ddp", "model": "small_cnn", "image_size": 32, "batch_size": 8,
                    "precision": "fp32", "compile": False, "warmup_steps": 2, "measured_steps": 10},
            "fsdp": {"framework": "pytorch-fsdp", "model": "llama-tiny", "sequence_length": 32, "batch_size": 4,
                     "precision": "fp32", "compile": False, "warmup_steps": 2, "measured_steps": 6}},
}
PLAIN = {"pytorch-ddp": ("pytorch_ddp_plain.py", "images_per_sec"), "pytorch-fsdp": ("pytorch_fsdp_plain.py",
                                                                                      "tokens_per_sec")}
PEER_TRIALS = {"gpu": 3, "cpu": 2}
# The record's training parts: the FSDP2 transformer's points, make bench's PyTorch peers, the ResNet-50 points.
PARTS = ("text", "peers", "image")
# A point is not started with less time than this left of the budget: it would only be cut off.
MIN_POINT_S = 45
# Presets' parameter counts, worked out by benchrunner from their shapes (no torch, nothing allocated).
PRESETS_PROBE = ("import json; from benchrunner.models import llama; "
                 "print(json.dumps({n: llama.parameters(c) for n, c in llama.CONFIGS.items()}))")


class Recorder:
    """The output folder, and every command run into it with its outcome (commands.json)."""

    def __init__(self, out: Path, env: dict[str, str]) -> None:
        self.out = out
        self.env = env
        self.commands: list[dict] = []
        self.problems: list[str] = []

    def write(self, name: str, text: str) -> Path:
        path = self.out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def write_json(self, name: str, value) -> Path:
        return self.write(name, json.dumps(value, indent=2, sort_keys=True) + "\n")

    def run(self, name: str, argv: list[str], timeout: float | None = None, required: bool = True,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess | None:
        """Runs argv, keeping stdout in <name>.out and stderr in <name>.err; a failure is recorded as a problem."""
        started = time.monotonic()
        entry = {"name": name, "argv": argv, "stdout": f"{name}.out", "stderr": f"{name}.err"}
        try:
            done = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=timeout,
                                  env=env or self.env, check=False)
            entry["rc"] = done.returncode
            out, err = done.stdout, done.stderr
        except FileNotFoundError as error:
            entry["rc"], out, err, done = 127, "", f"{error}\n", None
        except subprocess.TimeoutExpired as error:
            entry["rc"], done = None, None
            out = error.stdout.decode(errors="replace") if isinstance(error.stdout, bytes) else (error.stdout or "")
            err = (error.stderr.decode(errors="replace") if isinstance(error.stderr, bytes) else (error.stderr or "")) + (
                f"\ngpu_record: stopped after {timeout:.0f} s (the run's time budget)\n")
            entry["timed_out"] = True
        entry["seconds"] = round(time.monotonic() - started, 2)
        self.write(entry["stdout"], out)
        self.write(entry["stderr"], err)
        self.commands.append(entry)
        if entry["rc"] != 0 and required:
            said = (err or out).strip().splitlines()
            self.problems.append(f"{name}: {shlex.join(argv)} exited {entry['rc']}"
                                 + (f": {said[-1][:300]}" if said else ""))
        return done if done is not None and done.returncode == 0 else None

    def skip(self, name: str, argv: list[str], reason: str) -> None:
        self.commands.append({"name": name, "argv": argv, "skipped": reason})
        self.write(f"{name}.skipped", reason + "\n")


def parts_of(text: str) -> tuple[str, ...]:
    """--parts: known parts only, named by the valid ones where one is not."""
    given = tuple(part for part in text.split(",") if part)
    unknown = [part for part in given if part not in PARTS]
    if unknown or not given:
        raise argparse.ArgumentTypeError(f"parts {', '.join(unknown) or '(none)'} not among {', '.join(PARTS)}")
    return given


def fail(message: str) -> int:
    print(f"gpu_record: {message}", file=sys.stderr)
    return 2


def facts_runner(python: str, env: dict[str, str], choice: str) -> tuple[str, str]:
    """How the facts modules run here: ('ansible', why) when ansible-core imports, else ('stand-in', why)."""
    probe = subprocess.run([python, "-c", "import ansible.module_utils.basic, ansible.release as r; print(r.__version__)"],
                           capture_output=True, text=True, env=env, check=False)
    if choice == "stand-in":
        return "stand-in", "asked for (--facts-runner stand-in)"
    if probe.returncode == 0:
        return "ansible", f"ansible-core {probe.stdout.strip()} imports: the module files run as ansible-core runs them"
    if choice == "ansible":
        raise SystemExit(fail(f"--facts-runner ansible, but ansible-core does not import: {probe.stderr.strip()[-300:]}"))
    last = (probe.stderr.strip().splitlines() or ["no error text"])[-1]
    return "stand-in", f"ansible-core does not import ({last}): tools/gpu_record_module.py stands in for AnsibleModule"


def run_facts(rec: Recorder, python: str, runner: str, args_file: Path) -> dict[str, dict]:
    # The modules import their module_utils as ansible_collections.hpcml.cluster..., from this checkout.
    env = dict(rec.env, PYTHONPATH=os.pathsep.join([str(PROJECT / "collections"), rec.env["PYTHONPATH"]]))
    facts = {}
    for module in FACTS_MODULES:
        path = MODULES / f"{module}.py"
        if runner == "ansible":
            argv = [python, str(path), str(args_file)]
        else:
            argv = [python, str(PROJECT / "tools" / "gpu_record_module.py"), str(path)]
        done = rec.run(f"facts-{module}", argv, timeout=120, env=env)
        if done is None:
            continue
        result = json.loads(done.stdout)
        if result.get("failed"):
            rec.problems.append(f"{module} failed: {result.get('msg')}")
            continue
        (name, value), = result["ansible_facts"].items()
        facts[name] = value
        rec.write_json(f"facts-{module}.json", value)
    return facts


def run_validation(rec: Recorder, python: str) -> None:
    """playbooks/validate.yml itself on this machine (connection local), so its GPU checks are the role's own; its
    node-validation summary goes to validation/. Without ansible-core there is no play to run: said, and a problem."""
    argv = [python, "-c", PLAYBOOK_CLI, "-i", str(rec.write("validate-inventory.yml", VALIDATE_INVENTORY.format(
        python=python))), str(PROJECT / "playbooks" / "validate.yml"), "-e", f"cluster_results_dir={rec.out}/validation"]
    probe = subprocess.run([python, "-c", "import ansible.cli.playbook"], capture_output=True, text=True, env=rec.env,
                           check=False)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["no error text"])[-1]
        rec.skip("validate-play", argv, f"the validation play needs ansible-core, which does not import here ({last}); "
                 "carry its wheel")
        rec.problems.append("validate-play: not run, ansible-core does not import (validate-play.skipped)")
        return
    done = rec.run("validate-play", argv, timeout=600, env=dict(rec.env, ANSIBLE_CONFIG=str(PROJECT / "ansible.cfg")))
    summary = rec.out / "validation" / "node-validation" / "latest.json"
    if done is not None and not summary.is_file():
        rec.problems.append(f"validate-play: the play passed but wrote no {summary}")
    elif done is not None:
        node = json.loads(summary.read_text())["nodes"]["localhost"]
        rec.write_json("validate.json", {"versions": node["versions"], "checks": node["checks"]})


def points(mode: str, args) -> list[dict]:
    work = WORKLOADS[mode]
    precisions = args.precisions.split(",") if args.precisions else work["precisions"]
    sizes = [int(b) for b in args.batch_sizes.split(",")] if args.batch_sizes else work["batch_sizes"]
    return [{"id": f"{work['model']}-{precision}-bs{size}", "framework": "pytorch-ddp", "model": work["model"],
             "precision": precision, "batch_size": size, "image_size": work["image_size"], "compile": False,
             "warmup_steps": work["warmup_steps"], "measured_steps": work["measured_steps"]}
            for precision in precisions for size in sizes]


def fitting(parameters: dict[str, int], memory_bytes: int) -> dict[str, dict]:
    """Each preset's training state on one GPU (STATE_BYTES_PER_PARAMETER a parameter) against STATE_SHARE of its
    memory: whether it fits, and the figures that say so."""
    room = STATE_SHARE * memory_bytes
    return {name: {"parameters": count, "state_bytes": count * STATE_BYTES_PER_PARAMETER, "room_bytes": int(room),
                   "fits": count * STATE_BYTES_PER_PARAMETER <= room} for name, count in parameters.items()}


def text_models(mode: str, fits: dict[str, dict]) -> list[str]:
    """The anchor preset (llama-1b; llama-tiny in the dry run), and on a GPU the largest other preset that fits it
    (llama-8b's 8.03 billion parameters hold 128 GB of state: more than one 80 GB GPU, so llama-125m beside llama-1b
    there). A GPU the anchor does not fit is recorded as a problem by the caller."""
    anchor = TEXT[mode]["anchor"]
    if mode == "cpu":
        return [anchor]
    others = sorted((f["parameters"], name) for name, f in fits.items() if f["fits"] and name != anchor)
    return [anchor, *([others[-1][1]] if others else [])]


def text_points(mode: str, models: list[str]) -> list[dict]:
    work = TEXT[mode]
    return [{"id": f"{model}-{work['precision']}-seq{length}-{'compiled' if compiled else 'eager'}",
             "framework": "pytorch-fsdp", "model": model, "precision": work["precision"],
             "batch_size": work["tokens_per_step"] // length, "sequence_length": length, "compile": compiled,
             "warmup_steps": work["warmup_steps"], "measured_steps": work["measured_steps"]}
            for model in models for length in work["sequence_lengths"] for compiled in work["compile"]]


def train_argv(python: str, point: dict, run_dir: Path) -> list[str]:
    """One rank under torchrun (standalone: its own rendezvous on this machine), the launcher it then records. Image
    models train channels-last; text models with AdamW."""
    shape = (["--sequence-length", str(point["sequence_length"]), "--optimizer", "adamw"] if "sequence_length" in point
             else ["--image-size", str(point["image_size"]), "--channels-last"])
    return [python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1", "-m", "benchrunner", "train",
            "--framework", point["framework"], "--launcher", "torchrun", "--run-id", f"gpu-record-{point['id']}",
            "--output-dir", str(run_dir / "raw"), "--model", point["model"], "--data", "synthetic",
            "--batch-size", str(point["batch_size"]), *shape, "--precision", point["precision"],
            *(["--compile"] if point["compile"] else []), "--warmup-steps", str(point["warmup_steps"]),
            "--measured-steps", str(point["measured_steps"])]


def plain_argv(python: str, point: dict, device: str) -> list[str]:
    """The plain loop that trains the point as benchrunner does (benchrunner's default rate and AdamW's beta_1, the
    workload's defaults), one rank under torchrun like benchrunner's."""
    script, _ = PLAIN[point["framework"]]
    shape = (["--sequence-length", str(point["sequence_length"]), *(["--compile"] if point["compile"] else [])]
             if "sequence_length" in point else ["--image-size", str(point["image_size"])])
    return [python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1",
            str(PROJECT / "benchmarks" / script), "--model", point["model"], "--batch-size", str(point["batch_size"]),
            *shape, "--precision", point["precision"], "--warmup-steps", str(point["warmup_steps"]),
            "--measured-steps", str(point["measured_steps"]), "--device", device]


def measure(rec: Recorder, python: str, point: dict, deadline: float, env: dict[str, str]) -> dict:
    """Trains one point and summarizes it; the figure and interval come from the summary benchrunner writes."""
    run_dir = rec.out / "runs" / point["id"]
    left = deadline - time.monotonic()
    if left < MIN_POINT_S:
        reason = f"not started: {left:.0f} s left of the time budget (--budget-s), a point needs about {MIN_POINT_S}"
        rec.problems.append(f"{point['id']}: {reason}")
        return {**point, "status": "skipped", "reason": reason}
    started = time.monotonic()
    if rec.run(f"logs/{point['id']}.train", train_argv(python, point, run_dir), timeout=left, env=env) is None:
        return {**point, "status": "failed", "reason": f"training failed: logs/{point['id']}.train.err"}
    # summarize exits 1 when the run fails its sanity checks, after writing summary.json: that is reported below.
    rec.run(f"logs/{point['id']}.summarize", [python, "-m", "benchrunner", "summarize", str(run_dir)],
            timeout=max(30.0, deadline - time.monotonic()), required=False, env=env)
    if not (run_dir / "summary.json").is_file():
        rec.problems.append(f"{point['id']}: benchrunner summarize wrote no summary (logs/{point['id']}.summarize.err)")
        return {**point, "status": "failed", "reason": f"summarize failed: logs/{point['id']}.summarize.err"}
    summary = json.loads((run_dir / "summary.json").read_text())
    printed = (rec.out / "logs" / f"{point['id']}.summarize.out").read_text()
    spread = summary["throughput"].get("total_batch_means") or {}
    window = next((line for line in printed.splitlines() if line.startswith("window:")), None)
    # A summary benchrunner summarize just wrote: the current version (throughput in samples of its unit).
    rate = summary["throughput"]["total_per_sec"]
    return {**point, "status": "ok", "samples_per_sec": rate, "unit": summary["throughput"]["unit"],
            "ci95_low": spread.get("ci95_low"), "ci95_high": spread.get("ci95_high"), "batches": spread.get("n"),
            "window": window, "sanity_passed": summary["sanity"]["passed"], "seconds": round(time.monotonic() - started, 1),
            **utilization(summary, rate, spread), "peak_memory_bytes": (summary.get("memory") or {}).get("peak_bytes")}


def utilization(summary: dict, rate: float, spread: dict) -> dict:
    """The run's MFU against the datasheet peak and against the GEMM probe, each with the throughput's interval scaled
    to it (MFU is proportional to tokens/s: one rank, one peak, one probe); None with benchrunner's reason where
    there is none."""
    used = summary.get("utilization")
    if used is None:
        return {"utilization_missing": summary.get("utilization_missing") or "the summary has no utilization"}

    def scaled(figure: dict | None) -> dict | None:
        if figure is None:
            return None
        mean = figure["mean"]
        low, high = spread.get("ci95_low"), spread.get("ci95_high")
        return {"mean": mean, "ci95_low": None if low is None else mean * low / rate,
                "ci95_high": None if high is None else mean * high / rate}

    return {"model_tflops_per_device": used["model_tflops_per_device"]["mean"], "peak": used["peak"],
            "peak_missing": used["peak_missing"], "mfu": scaled(used["mfu"]),
            "probe_tflops": (used["probe_tflops"] or {}).get("mean"), "probe_missing": used["probe_missing"],
            "mfu_vs_probe": scaled(used["mfu_vs_probe"])}


def rank0_rate(raw: Path) -> float:
    """Rank 0's samples/s from its result, as make bench reads benchrunner's side."""
    return json.loads((raw / "rank-00000.json").read_text())["metrics"]["samples_per_sec"]


def peer_pairs(rec: Recorder, python: str, mode: str, deadline: float, env: dict[str, str]) -> list[dict]:
    """make bench's PyTorch pairs on this GPU, each trial benchrunner and its plain loop one after the other (which
    goes first alternating, so drift hits both alike); each pair's ratio benchrunner / plain with its 95% interval
    over the trials."""
    device = "cuda" if mode == "gpu" else "cpu"
    trials: dict[str, list[tuple[float, float]]] = {name: [] for name in PEERS[mode]}
    for trial in range(PEER_TRIALS[mode]):
        for name, point in PEERS[mode].items():
            point = {**point, "id": f"peer-{name}-{trial}"}
            sides = ["benchrunner", "plain"] if trial % 2 == 0 else ["plain", "benchrunner"]
            got: dict[str, float] = {}
            for side in sides:
                left = deadline - time.monotonic()
                if left < MIN_POINT_S:
                    rec.problems.append(f"peers: trial {trial} of {name} not started, {left:.0f} s left of the budget")
                    break
                folder = f"peers/{name}-{trial}"
                if side == "benchrunner":
                    done = rec.run(f"{folder}/benchrunner", train_argv(python, point, rec.out / folder), timeout=left,
                                   env=env)
                    if done is not None:
                        got[side] = rank0_rate(rec.out / folder / "raw")
                else:
                    done = rec.run(f"{folder}/plain", plain_argv(python, point, device), timeout=left, env=env)
                    if done is not None:
                        _, key = PLAIN[point["framework"]]
                        got[side] = json.loads(done.stdout.strip().splitlines()[-1])[key]
            if len(got) == 2:
                trials[name].append((got["benchrunner"], got["plain"]))
    pairs = []
    for name, measured in trials.items():
        point = PEERS[mode][name]
        pair = {"pair": name, **point, "trials": [{"benchrunner": b, "plain": p} for b, p in measured]}
        if measured:
            ratio = stats.describe([b / p for b, p in measured])
            pair["ratio"] = {"mean": ratio.mean, "ci95_low": ratio.ci95_low, "ci95_high": ratio.ci95_high,
                             "n": ratio.n}
        else:
            pair["ratio"] = None
            rec.problems.append(f"peers: no trial of {name} measured both sides (peers/{name}-*)")
        pairs.append(pair)
    return pairs


def _fraction(figure: dict | None, missing: str | None) -> str:
    if figure is None:
        return f"- ({missing})"
    if figure["ci95_low"] is None:
        return f"{figure['mean']:.3f}"
    return f"{figure['mean']:.3f} ({figure['ci95_low']:.3f} - {figure['ci95_high']:.3f})"


def text_rows(results: list[dict]) -> list[str]:
    """The transformer's points: tokens/s with its interval, MFU against the peak and the probe with theirs."""
    rows = ["", "benchrunner train --framework pytorch-fsdp, synthetic tokens, AdamW, 1 rank. MFU = model FLOPs per "
            "token x tokens/s / the peak (PaLM's 6N + 12LHQT); its interval is the throughput's, scaled. Goal on an "
            "H100: MFU >= 0.40 for llama-1b compiled (torchtitan publishes 33-39% for Llama 3.1 8B on 8 H100s).", "",
            "| model | sequence | batch | compile | tokens/s | 95% CI | MFU vs peak (95% CI) | MFU vs probe (95% CI) | "
            "peak memory | status |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        head = f"| {r['model']} | {r['sequence_length']} | {r['batch_size']} | {'yes' if r['compile'] else 'no'} |"
        if r["status"] != "ok":
            rows.append(f"{head} - | - | - | - | - | {r['status']}: {r['reason']} |")
            continue
        ci = "-" if r["ci95_low"] is None else f"{r['ci95_low']:.1f} - {r['ci95_high']:.1f}"
        missing = r.get("utilization_missing")
        mfu = _fraction(r.get("mfu"), missing or r.get("peak_missing"))
        probe = _fraction(r.get("mfu_vs_probe"), missing or r.get("probe_missing"))
        memory = "-" if r["peak_memory_bytes"] is None else f"{r['peak_memory_bytes'] / 2**30:.1f} GiB"
        rows.append(f"{head} {r['samples_per_sec']:.1f} | {ci} | {mfu} | {probe} | {memory} | "
                    f"ok{'' if r['sanity_passed'] else ' (sanity checks FAILED)'} |")
    return rows


def peer_rows(pairs: list[dict]) -> list[str]:
    rows = ["", "make bench's PyTorch peers on this device: benchrunner / the plain loop (benchmarks/), rank 0's "
            "figure, trials interleaved; goal >= 0.98.", "",
            "| pair | model | precision | batch | compile | trials (benchrunner / plain) | ratio (95% CI) |",
            "|---|---|---|---|---|---|---|"]
    for pair in pairs:
        trials = ", ".join(f"{t['benchrunner']:.1f} / {t['plain']:.1f}" for t in pair["trials"]) or "-"
        ratio = pair["ratio"]
        shown = "- (no trial measured both sides)" if ratio is None else (
            f"{ratio['mean']:.3f} ({ratio['ci95_low']:.3f} - {ratio['ci95_high']:.3f}, n={ratio['n']})")
        rows.append(f"| {pair['framework']} | {pair['model']} | {pair['precision']} | {pair['batch_size']} | "
                    f"{'yes' if pair['compile'] else 'no'} | {trials} | {shown} |")
    return rows


def numbers_md(manifest: dict, results: list[dict], texts: list[dict], pairs: list[dict]) -> str:
    head = [f"# {manifest['mode'].upper()} record of {manifest['hostname']}, {manifest['date']}", "",
            f"GPU: {manifest['gpu_name'] or 'none'}; driver {manifest['driver_version'] or '-'}; "
            f"torch {manifest['torch']} (CUDA {manifest['torch_cuda'] or '-'}); Python {manifest['python']}.",
            f"benchrunner train --framework pytorch-ddp, synthetic data, channels_last, "
            f"{results[0]['warmup_steps'] if results else '-'} warmup + {results[0]['measured_steps'] if results else '-'} "
            "measured steps per point, 1 rank. The interval is the 95% CI over batch means of consecutive steps "
            "(benchrunner summarize), not over repeats.", "",
            "| model | precision | batch | per second | 95% CI | +/- | status |", "|---|---|---|---|---|---|---|"]
    rows = []
    for r in results:
        rate = f"{r['samples_per_sec']:.1f} {r['unit']}" if r["status"] == "ok" else "-"
        if r["status"] == "ok" and r["ci95_low"] is not None:
            half = (r["ci95_high"] - r["ci95_low"]) / 2
            rows.append(f"| {r['model']} | {r['precision']} | {r['batch_size']} | {rate} | "
                        f"{r['ci95_low']:.1f} - {r['ci95_high']:.1f} | {100 * half / r['samples_per_sec']:.1f}% | "
                        f"ok{'' if r['sanity_passed'] else ' (sanity checks FAILED)'} |")
        elif r["status"] == "ok":
            rows.append(f"| {r['model']} | {r['precision']} | {r['batch_size']} | {rate} | - | - | "
                        "ok (too few steps for an interval) |")
        else:
            rows.append(f"| {r['model']} | {r['precision']} | {r['batch_size']} | - | - | - | {r['status']}: {r['reason']} |")
    fits = "; ".join(f"{name} {f['state_bytes'] / 1e9:.1f} GB of state{'' if f['fits'] else ' (does not fit)'}"
                     for name, f in manifest["presets_fit"].items()) if manifest["presets_fit"] else "not judged (no GPU)"
    rows += ["", f"Presets on one device: {STATE_BYTES_PER_PARAMETER} bytes of training state a parameter against "
             f"{STATE_SHARE:.0%} of its memory: {fits}."]
    tail = ["", f"Wall time of the whole record: {manifest['wall_s']:.0f} s."]
    if manifest["problems"]:
        tail += ["", "Problems (the run exits non-zero):", *[f"- {p}" for p in manifest["problems"]]]
    return "\n".join(head + rows + text_rows(texts) + peer_rows(pairs) + tail) + "\n"


def default_out() -> Path:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return PROJECT / "build" / "gpu-record" / f"{stamp}-{socket.gethostname()}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, help="output folder (default build/gpu-record/<date>-<hostname>/)")
    parser.add_argument("--cpu", action="store_true", help="dry run without a GPU: no nvidia-smi, small_cnn on the CPU")
    parser.add_argument("--python", default=sys.executable, help="the Python with PyTorch (default: this one)")
    # 9 minutes on the GPU in all: the budget leaves half a minute for the last summary and the files.
    parser.add_argument("--budget-s", type=float, default=510.0,
                        help="wall-time budget; no point starts without 45 s left, none runs past it (default 510)")
    parser.add_argument("--facts-runner", choices=["auto", "ansible", "stand-in"], default="auto")
    parser.add_argument("--precisions", help="comma-separated, instead of the mode's")
    parser.add_argument("--batch-sizes", help="comma-separated, instead of the mode's")
    parser.add_argument("--parts", type=parts_of, default=PARTS,
                        help=f"comma-separated, which training parts run, in this order: {','.join(PARTS)} (default all;"
                             " one lent machine's 10-minute command holds about one of them on a GPU)")
    args = parser.parse_args(argv)

    begun = time.monotonic()
    deadline = begun + args.budget_s
    mode = "cpu" if args.cpu else "gpu"
    out = (args.out or default_out()).resolve()
    if out.exists() and any(out.iterdir()):
        return fail(f"{out} is not empty: give a new folder")
    out.mkdir(parents=True, exist_ok=True)
    # benchrunner from this checkout, never installed; the GPU's ranks place themselves on it (BENCHRUNNER_GPU).
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(PROJECT / "benchrunner" / "src"),
                                                                        os.environ.get("PYTHONPATH")])))
    env.pop("BENCHRUNNER_GPU", None)
    train_env = dict(env, BENCHRUNNER_GPU="1") if mode == "gpu" else dict(env, CUDA_VISIBLE_DEVICES="")
    rec = Recorder(out, env)
    print(f"gpu_record: {mode} record into {out}")

    smi = shutil.which("nvidia-smi")
    if mode == "gpu" and smi is None:
        rec.write("FAILED.txt", "nvidia-smi is not on PATH: no NVIDIA driver here, or its tools are not installed.\n")
        return fail(f"nvidia-smi is not on PATH ({env.get('PATH')}): install the NVIDIA driver's utilities, or run --cpu "
                    "for a dry run on a machine without a GPU")
    for name, smi_args in SMI_COMMANDS:
        if mode == "cpu":
            rec.skip(name, ["nvidia-smi", *smi_args], "--cpu dry run: no GPU is asked for, nvidia-smi is not run")
        else:
            rec.run(name, [smi, *smi_args], timeout=120)

    torch_info = rec.run("torch-probe", [args.python, "-c", TORCH_PROBE], timeout=300, env=train_env)
    if torch_info is None:
        rec.write_json("commands.json", rec.commands)
        return fail(f"PyTorch does not import in {args.python} (torch-probe.err): this record uses the PyTorch already "
                    "installed and installs nothing")
    torch = json.loads(torch_info.stdout)
    if mode == "gpu" and not (torch["cuda_available"] and torch["device_count"] > 0):
        rec.write_json("commands.json", rec.commands)
        rec.write("FAILED.txt", "PyTorch sees no CUDA device.\n")
        return fail(f"PyTorch {torch['torch']} (CUDA {torch['torch_cuda']}) sees no CUDA device: check nvidia-smi-q.out, "
                    "CUDA_VISIBLE_DEVICES and that the build is a CUDA one; --cpu is the dry run without a GPU")
    cli = rec.run("benchrunner-train-help", [args.python, "-m", "benchrunner", "train", "--help"], timeout=120, env=env)
    if cli is None:
        rec.write_json("commands.json", rec.commands)
        said = ((out / "benchrunner-train-help.err").read_text().strip().splitlines() or ["no error text"])[-1]
        return fail(f"benchrunner does not start here ({said}): its own needs (benchrunner/pyproject.toml's "
                    "dependencies) must import in this Python; carry them as wheels where none is installed")
    if "--framework" not in cli.stdout:
        rec.write_json("commands.json", rec.commands)
        return fail("benchrunner train has no --framework here (benchrunner-train-help.out): this checkout predates "
                    "benchrunner's PyTorch training")

    runner, runner_why = facts_runner(args.python, env, args.facts_runner)
    args_file = rec.write("facts-args.json", json.dumps({"ANSIBLE_MODULE_ARGS": {}}) + "\n")
    facts = run_facts(rec, args.python, runner, args_file)
    recorded_smi, from_recorded = out / "nvidia-smi-q-x.out", {}
    if mode == "gpu" and recorded_smi.is_file() and recorded_smi.stat().st_size:
        # The same parser on the recorded file: the driver's answer kept apart from the module's own run.
        parsed = rec.run("parse-recorded-smi", [args.python, "-c",
                         "import json, sys; from ansible_collections.hpcml.cluster.plugins.module_utils import gpu; "
                         "print(json.dumps(gpu.parse_smi_xml(open(sys.argv[1]).read())))", str(recorded_smi)],
                         env=dict(env, PYTHONPATH=os.pathsep.join([str(PROJECT / "collections"), env["PYTHONPATH"]])))
        if parsed is not None:
            from_recorded = json.loads(parsed.stdout)
            rec.write_json("facts-from-recorded-nvidia-smi.json", from_recorded)
    run_validation(rec, args.python)

    presets = rec.run("llama-presets", [args.python, "-c", PRESETS_PROBE], timeout=120, env=env)
    fits = fitting(json.loads(presets.stdout), torch["device_memory_bytes"]) if presets and mode == "gpu" else {}
    if mode == "gpu" and fits and not fits[TEXT[mode]["anchor"]]["fits"]:
        rec.problems.append(f"{TEXT[mode]['anchor']}'s training state does not fit this GPU's memory: its points run, "
                            "and may run out of memory")
    # The transformer and the peers first: the ResNet-50 points of an H100 were recorded already (2026-11-24).
    texts = [measure(rec, args.python, point, deadline, train_env) for point in
             text_points(mode, text_models(mode, fits))] if "text" in args.parts else []
    pairs = peer_pairs(rec, args.python, mode, deadline, train_env) if "peers" in args.parts else []
    results = [measure(rec, args.python, point, deadline, train_env)
               for point in points(mode, args)] if "image" in args.parts else []
    for r in results + texts:
        if r["status"] == "failed" and not r["reason"].startswith("summarize failed"):
            rec.problems.append(f"{r['id']}: {r['reason']}")
        elif r["status"] == "ok" and not r["sanity_passed"]:
            rec.problems.append(f"{r['id']}: its run failed benchrunner's sanity checks (runs/{r['id']}/report.md)")

    gpu = facts.get("hpcml_gpu") or {}
    manifest = {
        "mode": mode, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "hostname": socket.gethostname(), "gpu_name": torch["device_name"] or next(
            (g["name"] for g in gpu.get("gpus", [])), None),
        "gpu_count": torch["device_count"],
        "driver_version": gpu.get("driver_version") or from_recorded.get("driver_version"),
        "driver_cuda_version": gpu.get("cuda_version") or from_recorded.get("cuda_version"),
        "torch": torch["torch"], "torch_cuda": torch["torch_cuda"], "cudnn": torch["cudnn"], "nccl": torch["nccl"],
        "python": torch["python"], "python_executable": args.python,
        "facts_runner": runner, "facts_runner_reason": runner_why, "points": results, "text_points": texts,
        "peers": pairs, "presets_fit": fits, "problems": rec.problems,
        "command": [sys.executable, *sys.argv], "budget_s": args.budget_s,
        "git_commit": (subprocess.run(["git", "-C", str(PROJECT), "rev-parse", "HEAD"], capture_output=True, text=True,
                                      check=False).stdout.strip() or None),
        # A checkout with changes not yet committed is not the commit it names: said apart, never left out.
        "git_describe": (subprocess.run(["git", "-C", str(PROJECT), "describe", "--always", "--dirty"],
                                        capture_output=True, text=True, check=False).stdout.strip() or None),
        "wall_s": round(time.monotonic() - begun, 1),
    }
    rec.write_json("commands.json", rec.commands)
    rec.write_json("manifest.json", manifest)
    rec.write("numbers.md", numbers_md(manifest, results, texts, pairs))
    print((out / "numbers.md").read_text())
    if rec.problems:
        return fail(f"{len(rec.problems)} problem(s), recorded in {out}/manifest.json:\n  " + "\n  ".join(rec.problems))
    return 0


if __name__ == "__main__":
    sys.exit(main())
