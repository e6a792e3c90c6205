#!/usr/bin/env python3
"""Records one NVIDIA GPU machine for the project (make gpu-record): what the driver says, what the collection's facts
modules and the validation play's GPU checks make of it, and benchrunner's PyTorch ResNet-50 throughput on one GPU.

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
  numbers.md              throughput per second (images or tokens) with the 95% interval per point; manifest.json:
                          date, host, GPU, driver, torch
It stops at once, saying why, where nvidia-smi is missing or PyTorch sees no CUDA device. --cpu is a dry run for a
machine without a GPU: the nvidia-smi part is skipped with that reason and small_cnn trains at a tiny size on the CPU.
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
                  "nccl": ".".join(map(str, nccl)) if isinstance(nccl, tuple) else nccl}))
"""
# What each mode trains: the GPU record's ResNet-50 points, and the dry run's tiny small_cnn ones.
WORKLOADS = {
    "gpu": {"model": "resnet50", "image_size": 224, "batch_sizes": (64, 128, 256),
            "precisions": ("mixed_float16", "fp32"), "warmup_steps": 20, "measured_steps": 100},
    "cpu": {"model": "small_cnn", "image_size": 32, "batch_sizes": (8, 16), "precisions": ("fp32",),
            "warmup_steps": 2, "measured_steps": 10},
}
# A point is not started with less time than this left of the budget: it would only be cut off.
MIN_POINT_S = 45


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
    return [{"id": f"{work['model']}-{precision}-bs{size}", "model": work["model"], "precision": precision,
             "batch_size": size, "image_size": work["image_size"], "warmup_steps": work["warmup_steps"],
             "measured_steps": work["measured_steps"]} for precision in precisions for size in sizes]


def train_argv(python: str, point: dict, run_dir: Path) -> list[str]:
    """One rank under torchrun (standalone: its own rendezvous on this machine), the launcher it then records."""
    return [python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1", "-m", "benchrunner", "train",
            "--framework", "pytorch-ddp", "--launcher", "torchrun", "--run-id", f"gpu-record-{point['id']}",
            "--output-dir", str(run_dir / "raw"), "--model", point["model"], "--data", "synthetic",
            "--batch-size", str(point["batch_size"]), "--image-size", str(point["image_size"]),
            "--precision", point["precision"], "--channels-last", "--warmup-steps", str(point["warmup_steps"]),
            "--measured-steps", str(point["measured_steps"])]


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
    return {**point, "status": "ok", "samples_per_sec": summary["throughput"]["total_per_sec"],
            "unit": summary["throughput"]["unit"],
            "ci95_low": spread.get("ci95_low"), "ci95_high": spread.get("ci95_high"), "batches": spread.get("n"),
            "window": window, "sanity_passed": summary["sanity"]["passed"], "seconds": round(time.monotonic() - started, 1)}


def numbers_md(manifest: dict, results: list[dict]) -> str:
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
    tail = ["", f"Wall time of the whole record: {manifest['wall_s']:.0f} s."]
    if manifest["problems"]:
        tail += ["", "Problems (the run exits non-zero):", *[f"- {p}" for p in manifest["problems"]]]
    return "\n".join(head + rows + tail) + "\n"


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

    results = [measure(rec, args.python, point, deadline, train_env) for point in points(mode, args)]
    for r in results:
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
        "facts_runner": runner, "facts_runner_reason": runner_why, "points": results, "problems": rec.problems,
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
    rec.write("numbers.md", numbers_md(manifest, results))
    print((out / "numbers.md").read_text())
    if rec.problems:
        return fail(f"{len(rec.problems)} problem(s), recorded in {out}/manifest.json:\n  " + "\n  ".join(rec.problems))
    return 0


if __name__ == "__main__":
    sys.exit(main())
