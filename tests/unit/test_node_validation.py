"""The validation play's judgement on a GPU node, run by Ansible over a recorded sysfs tree and nvidia-smi output."""

import hashlib
import json
import os
import platform
import subprocess
import sys
import tarfile
from pathlib import Path

import yaml
from playbook_run import play, role_tasks
from test_containerd_version import case, outcomes
from test_distribution import ROLES, playbook, role_vars
from test_facts_modules import fake_nvidia_smi, proc_tree
from test_gpudirect import OPEN_VERSION, PROPRIETARY_VERSION

from ansible_collections.hpcml.cluster.plugins.module_utils import pci, rdma
from benchrunner import results
from unit_paths import PROJECT

BUSES = ["84", "85"]


def gpu_node(sysfs, gpus_on_bus=1, peermem=True):
    for bus in BUSES[:gpus_on_bus]:
        sysfs.pci(f"0000:{bus}:00.0", "0x10de", "0x2684", "0x030000", driver="nvidia")
    hca = sysfs.pci("0000:1a:00.0", "0x15b3", "0x1021", "0x020700", driver="mlx5_core")
    sysfs.ib_device("mlx5_0", hca, [("4: ACTIVE", "5: LinkUp", "InfiniBand", "400 Gb/sec (4X NDR)")])
    for module in ["nvidia", "ib_core"] + (["nvidia_peermem"] if peermem else []):
        (sysfs.root / "module" / module).mkdir(parents=True)
        (sysfs.root / "module" / module / "version").write_text("535.86.05\n")


def nccl(tmp_path, version):
    """An ldconfig printing the cache lines published from nodes with libnccl2 (the soname link and the development
    link, nothing with the full version), pointing at a library folder where libnccl.so.2 links to libnccl.so.<version>."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / f"libnccl.so.{version}").write_text("")
    (lib / "libnccl.so.2").symlink_to(f"libnccl.so.{version}")
    (lib / "libnccl.so").symlink_to("libnccl.so.2")
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "ldconfig.out").write_text("1234 libs found in cache `/etc/ld.so.cache'\n"
                                        f"\tlibnccl.so.2 (libc6,x86-64) => {lib}/libnccl.so.2\n"
                                        f"\tlibnccl.so (libc6,x86-64) => {lib}/libnccl.so\n")
    (tools / "ldconfig").write_text(f"#!/bin/sh\ncat {tools / 'ldconfig.out'}\n")
    (tools / "ldconfig").chmod(0o755)
    return tools


def validate(tmp_path, sysfs, proc=None, path=None, records=None, nodes=("gpu001",), extra=None, **smi):
    """playbooks/validate.yml on this machine as every node (nodes: their names), nvidia-smi answering with recorded
    output (smi: the topo -m fixture and its exit status), procfs from proc (default: a 6.8 kernel, no NVIDIA version
    file), tools found first in path, the roles' records read from records (default: none) and further variables in
    extra; returns the exit code and the summary."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"children": {"nodes": {"hosts": {name: {
        "ansible_connection": "local", "ansible_host": "127.0.0.1", "ansible_python_interpreter": sys.executable}
        for name in nodes}}}}}))
    out = tmp_path / "results"
    smi_path = str(fake_nvidia_smi(tmp_path, **smi))
    extra = {"node_checks_sysfs_root": str(sysfs.root), "node_checks_nvidia_smi": smi_path,
             "node_acceptance_nvidia_smi": smi_path, "node_checks_results_dir": str(out),
             "node_checks_proc_root": str(proc or proc_tree(tmp_path, "6.8.0-45-generic")),
             "node_facts_fact_file": str((records or tmp_path / "no-records") / "hpcml_hardware.fact"), **(extra or {})}
    env = dict(os.environ, ANSIBLE_CONFIG=str(PROJECT / "ansible.cfg"))
    if path:
        env["PATH"] = f"{path}:{env['PATH']}"
    run = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory),
                          "-e", json.dumps(extra), str(PROJECT / "playbooks" / "validate.yml")],
                         cwd=PROJECT, env=env, capture_output=True, text=True, check=False)
    summary = out / "latest.json"
    return run, json.loads(summary.read_text()) if summary.is_file() else None


def test_healthy_gpu_node_passes(tmp_path, sysfs):
    gpu_node(sysfs)
    run, summary = validate(tmp_path, sysfs)
    assert run.returncode == 0, run.stdout[-3000:]
    results.validate(results.NODE_VALIDATION, summary)
    checks = summary["nodes"]["gpu001"]["checks"]
    assert checks["nvidia_smi"] == {"status": "pass", "detail": "1 GPU(s) answer, driver 535.86.05"}
    assert checks["ib_ports_active"]["status"] == "pass"
    assert checks["peermem_loaded"] == {"status": "pass",
                                        "detail": "peer-memory client registered: module/nvidia_peermem/version"}
    assert checks["gpudirect_route"]["status"] == "pass"
    assert checks["gpudirect_route"]["detail"]["route"] == "peermem"
    assert checks["gpu_nic_topology"] == {"status": "pass", "detail": {
        "nearest_nics": {"GPU0": {"link": "PHB", "nics": ["mlx5_0"]}}, "gpus_far_from_nic": ["GPU0"]}}
    assert summary["cluster"]["versions_uniform"]["status"] == "pass"
    assert summary["cluster"]["versions_uniform"]["detail"]["driver"] == ["535.86.05"]
    assert summary["status"] == "pass"
    # Every check ran but the pair test, which needs two nodes.
    assert summary["counts"] == {"total": 8, "ran": 7, "passed": 7, "failed": 0, "skipped": 1}
    assert summary["nodes"]["gpu001"]["verdict"] == {
        "status": "pass", "reason": None, "expected": [],
        "counts": {"total": 6, "ran": 6, "passed": 6, "failed": 0, "skipped": 0}}


def test_a_node_expected_to_have_gpus_where_none_was_found_is_incomplete_not_pass(tmp_path, sysfs):
    # An empty PCI bus, as on the lab: every GPU and RDMA check skips, reboot_pending alone runs.
    run, summary = validate(tmp_path, sysfs, extra={"node_checks_expect": ["gpu"]})
    assert run.returncode != 0
    results.validate(results.NODE_VALIDATION, summary)
    assert summary["status"] == "incomplete"
    assert summary["counts"] == {"total": 8, "ran": 1, "passed": 1, "failed": 0, "skipped": 7}
    verdict = summary["nodes"]["gpu001"]["verdict"]
    assert (verdict["status"], verdict["expected"]) == ("incomplete", ["gpu"])
    assert verdict["reason"] == ("node_checks_expect has gpu, but none of its 4 GPU checks ran (nvidia_smi: no NVIDIA "
                                 "GPU found on the PCI bus (vendor 0x10de); peermem_loaded, gpudirect_route, "
                                 "gpu_nic_topology: no NVIDIA GPU on this node)")
    said = " ".join(run.stdout.split())
    assert "Node validation incomplete: 1 of 8 checks ran, 7 skipped: gpu001 incomplete (node_checks_expect has gpu" in said
    # Where the inventory expects nothing, the same node passes on what ran, and says how little that was.
    again = tmp_path / "again"
    again.mkdir()
    run, summary = validate(again, sysfs)
    assert run.returncode == 0, run.stdout[-3000:]
    assert (summary["status"], summary["counts"]["ran"], summary["counts"]["skipped"]) == ("pass", 1, 7)
    assert "node validation: pass: 1 of 8 checks ran, 7 skipped" in run.stdout


def test_an_unknown_expectation_is_refused_before_anything_runs(tmp_path, sysfs):
    run, summary = validate(tmp_path, sysfs, extra={"node_checks_expect": ["gpus"]})
    assert run.returncode != 0 and summary is None
    said = " ".join(run.stdout.split())
    assert "node_checks_expect" in said and "gpu, rdma" in said, run.stdout[-3000:]


def test_missing_gpu_and_peermem_fail_after_the_summary_is_written(tmp_path, sysfs):
    # Two GPUs on the bus, one answers; nvidia_peermem not loaded.
    gpu_node(sysfs, gpus_on_bus=2, peermem=False)
    run, summary = validate(tmp_path, sysfs)
    assert run.returncode != 0
    results.validate(results.NODE_VALIDATION, summary)
    checks = summary["nodes"]["gpu001"]["checks"]
    assert checks["nvidia_smi"] == {"status": "fail", "reason": "1 of 2 GPUs answer nvidia-smi"}
    assert checks["peermem_loaded"] == {"status": "fail", "reason": "nvidia_peermem is not loaded (no peer-memory "
                                                                    "client registered)"}
    assert checks["gpudirect_route"] == {"status": "fail", "reason": (
        "neither GPUDirect RDMA route is available on a node with GPUs and RDMA adapters: peermem: nvidia_peermem is "
        "not loaded (no peer-memory client registered); dmabuf: the NVIDIA kernel module is not loaded (no "
        "/proc/driver/nvidia/version)")}
    assert summary["status"] == "fail"
    assert summary["nodes"]["gpu001"]["verdict"]["reason"].startswith("failed: nvidia_smi, peermem_loaded, gpudirect_route")
    assert "Node validation fail: " in run.stdout


def test_unreadable_topology_fails_its_own_check(tmp_path, sysfs):
    # A recorded failure of `nvidia-smi topo -m` (Windows driver 591.86) with exit status 0: before, it read as no NIC
    # far from any GPU.
    gpu_node(sysfs)
    run, summary = validate(tmp_path, sysfs, topo="nvidia-smi-topo-m.windows.nvidia-geforce-rtx-2080-super.591.86.txt")
    assert run.returncode != 0
    results.validate(results.NODE_VALIDATION, summary)
    checks = summary["nodes"]["gpu001"]["checks"]
    assert checks["gpu_nic_topology"]["status"] == "fail"
    assert checks["gpu_nic_topology"]["reason"].startswith("the GPU/NIC topology could not be read: nvidia-smi topo -m: "
                                                           "no header row starting with GPU0")
    assert checks["peermem_loaded"]["status"] == "pass"
    assert summary["status"] == "fail"


def test_dmabuf_node_passes_on_open_modules_a_recent_kernel_and_nccl(tmp_path, sysfs):
    # The inbox stack: no peer-memory client, the open modules loaded, NCCL 2.27.7 (the role's default).
    gpu_node(sysfs, peermem=False)
    run, summary = validate(tmp_path, sysfs, proc=proc_tree(tmp_path, "6.8.0-45-generic", OPEN_VERSION),
                            path=nccl(tmp_path, "2.27.7"))
    assert run.returncode == 0, run.stdout[-3000:]
    results.validate(results.NODE_VALIDATION, summary)
    node = summary["nodes"]["gpu001"]
    assert node["versions"]["nccl"] == "2.27.7"
    assert node["checks"]["peermem_loaded"] == {"status": "skip",
                                                "reason": "GPUDirect RDMA goes through dmabuf here, not nvidia-peermem"}
    route = node["checks"]["gpudirect_route"]
    assert (route["status"], route["detail"]["route"], route["detail"]["chosen_by_role"]) == ("pass", "dmabuf", False)
    assert route["detail"]["signs"]["kernel_modules"] == "open"


def test_route_chosen_by_the_role_is_checked_by_its_own_signs(tmp_path, sysfs):
    # The gpudirect role chose dmabuf, but the node runs the proprietary modules and an NCCL older than DMA-BUF: both
    # are said.
    gpu_node(sysfs, peermem=False)
    facts = tmp_path / "facts.d"
    facts.mkdir()
    (facts / "hpcml_gpudirect.fact").write_text('{"steps": "run", "reason": null, "route": "dmabuf"}\n')
    run, summary = validate(tmp_path, sysfs, proc=proc_tree(tmp_path, "6.8.0-45-generic", PROPRIETARY_VERSION),
                            path=nccl(tmp_path, "2.12.12"), records=facts)
    assert run.returncode != 0
    assert summary["nodes"]["gpu001"]["checks"]["gpudirect_route"] == {"status": "fail", "reason": (
        "route dmabuf: the loaded NVIDIA kernel modules are the proprietary flavour; DMA-BUF needs the open ones; "
        "NCCL 2.12.12 predates DMA-BUF (2.13.4)")}
    assert summary["nodes"]["gpu001"]["checks"]["peermem_loaded"]["status"] == "skip"


# sysfs spells the states ibstat prints as "<n>: <STATE>" (include/rdma/ib_verbs.h, enum ib_port_state / phys_state).
SYSFS_STATE = {"Active": "4: ACTIVE", "Down": "1: DOWN", "Init": "2: INIT", "Armed": "3: ARMED"}
SYSFS_PHYS = {"LinkUp": "5: LinkUp", "Disabled": "3: Disabled", "Polling": "2: Polling"}


def ports_check(tmp_path, sysfs, parsed):
    """The ib_ports_active judgement of node_checks' 10-node.yml alone, over a sysfs tree laid out from parsed ibstat or
    ibv_devinfo output (each CA and its ports, in their recorded states)."""
    for number, (name, device) in enumerate(sorted(parsed.items())):
        pci_path = sysfs.pci(f"0000:{number + 16:02x}:00.0", "0x15b3", "0x1021", "0x020700", driver="mlx5_core")
        ports = [(SYSFS_STATE[port["state"]], SYSFS_PHYS.get(port.get("phys_state"), "5: LinkUp"), port["link_layer"],
                  "400 Gb/sec (4X NDR)") for _, port in sorted(device["ports"].items())]
        sysfs.ib_device(name, pci_path, ports)
    facts = {"hpcml_rdma": rdma.summarize(pci.scan(str(sysfs.root)), rdma.scan_devices(str(sysfs.root))),
             "hpcml_gpu": {"present": False, "reason": "no NVIDIA GPU found on the PCI bus (vendor 0x10de)",
                           "driver_version": None, "cuda_version": None, "driver_count": 0, "pci_count": 0},
             "hpcml_gpudirect": {"reason": "no NVIDIA GPU on this node", "route": None, "routes": {},
                                 "topology_problem": None}}
    judge = [task for task in yaml.safe_load((ROLES / "node_checks" / "tasks" / "10-node.yml").read_text())
             if task["name"] == "Judge the node"]
    out = tmp_path / "check.json"
    judge.append({"ansible.builtin.copy": {"dest": str(out), "mode": "0644",
                                           "content": "{{ node_checks_node.checks.ib_ports_active | to_json }}"}})
    run = playbook(tmp_path, {"vars_files": role_vars("node_checks"), "tasks": judge}, facts,
                   {"_node_checks_recorded": {"results": []}, "_node_checks_nccl": {"stdout": ""}})
    assert run.returncode == 0, run.stdout[-3000:]
    return json.loads(out.read_text())


def test_unused_second_ports_that_are_down_fail_nothing(tmp_path, sysfs, fixture_text):
    # Two dual-port ConnectX-3 HCAs, one port of each active and the other down, as recorded by ibv_devinfo.
    parsed = rdma.parse_ibv_devinfo(fixture_text("ibv_devinfo.heioy-books.mlx4-x2-ib-4port.txt"))
    for device in parsed.values():
        for port in device["ports"].values():
            port["state"] = port["state"].split("_")[1].split()[0].capitalize()
    assert ports_check(tmp_path, sysfs, parsed) == {
        "status": "pass", "detail": "2 of 4 port(s) active; not active: mlx4_0/2 DOWN, mlx4_1/2 DOWN"}


def test_an_adapter_without_an_active_port_fails_with_the_count(tmp_path, sysfs, fixture_text):
    # Twelve single-port CAs of an H100 node, three of them down, as recorded by ibstat (gpud's testdata).
    parsed = rdma.parse_ibstat(fixture_text("ibstat.gpud.47.0.h100.some.down.0.txt"))
    assert ports_check(tmp_path, sysfs, parsed) == {"status": "fail", "reason": (
        "no active port on mlx5_2, mlx5_7, mlx5_8 (9 of 12 port(s) active; not active: mlx5_2/1 DOWN, mlx5_7/1 DOWN, "
        "mlx5_8/1 DOWN)")}


# Two nodes without GPUs whose pair is measured through Gloo is the lab's (tests/e2e/test_site.py runs the
# validation play there, two real hosts and the MPI account); here, the pair's failure.
def test_a_failed_gloo_pair_fails_the_link_with_its_error(tmp_path, sysfs):
    # A message size benchrunner refuses: the ranks exit non-zero, the link fails with their last words, not a skip.
    run, summary = validate(tmp_path, sysfs, nodes=("node-a", "node-b"), extra={
        "node_acceptance_enabled": True, "cluster_python_env": str(Path(sys.executable).parents[1]),
        "node_acceptance_gloo_max_bytes": 6, "node_acceptance_gloo_timeout": 30})
    assert run.returncode != 0
    [link] = summary["links"]
    assert link["status"] == "fail" and link["busbw_gbs"] is None
    assert link["reason"].startswith("the Gloo allreduce failed (exit status ")
    assert summary["status"] == "fail"


# What the role's preflight refuses, and with what message; the judge's own rules are test_acceptance.py's.
VALID_KEYS = ("valid keys are all_reduce_busbw_gbs, all_gather_busbw_gbs, reduce_scatter_busbw_gbs, alltoall_busbw_gbs, "
              "message_bytes, per_nic_gbps, per_nic_rate_gbps, min_fraction")
POSITIVE = "give a positive finite number (GB/s)"
THRESHOLD_CASES = {
    "misspelt": ({"node_acceptance_thresholds": {"H100 x8": {"allreduce_busbw_gbs": 460}}},
                 "refused: node_acceptance_thresholds['H100 x8'] has the unknown key 'allreduce_busbw_gbs' (did you "
                 f"mean 'all_reduce_busbw_gbs'?): {VALID_KEYS}"),
    "sku": ({"node_acceptance_thresholds": {"H100x8": {"all_reduce_busbw_gbs": 460}}},
            "refused: node_acceptance_thresholds key 'H100x8' is not a SKU (did you mean 'H100 x8'?): write '<GPU model> "
            "x<GPU count>' as a node's acceptance sku gives it, e.g. 'H100 x8' or 'A100 PCIe x4' (the default table has "
            "H100 x8, H200 x8, A100 x8)"),
    "zero": ({"node_acceptance_thresholds": {"H100 x8": {"all_reduce_busbw_gbs": 0}}},
             f"refused: node_acceptance_thresholds['H100 x8'].all_reduce_busbw_gbs is 0: {POSITIVE}"),
    "negative": ({"node_acceptance_thresholds": {"H100 x8": {"all_reduce_busbw_gbs": -460}}},
                 f"refused: node_acceptance_thresholds['H100 x8'].all_reduce_busbw_gbs is -460: {POSITIVE}"),
    "nan": ({"node_acceptance_thresholds": {"H100 x8": {"all_reduce_busbw_gbs": "NaN"}}},
            f"refused: node_acceptance_thresholds['H100 x8'].all_reduce_busbw_gbs is 'NaN': {POSITIVE}"),
    "sku-fraction": ({"node_acceptance_thresholds": {"A100 x8": {"min_fraction": 1.5}}},
                     "refused: node_acceptance_thresholds['A100 x8'].min_fraction is 1.5: give a fraction in (0, 1]"),
    "global-fraction": ({"node_acceptance_min_fraction": 1.5},
                        "refused: node_acceptance_min_fraction is 1.5: give a fraction in (0, 1]"),
    # Text that reads as a number is that number, as for the role's own float variables.
    "text": ({"node_acceptance_thresholds": {"H100 x8": {"all_reduce_busbw_gbs": "460"}}}, "passed"),
    "default": ({}, "passed"),
}


def test_thresholds_that_would_judge_nothing_are_refused_before_the_role_measures_anything(tmp_path):
    preflight = role_tasks("node_acceptance", "00-preflight")
    run = play(tmp_path, [case(name, preflight, case_vars) for name, (case_vars, _) in THRESHOLD_CASES.items()])
    assert run.returncode == 0 and run.changed == 0, run.stdout[-3000:]
    assert outcomes(run) == {name: outcome for name, (_, outcome) in THRESHOLD_CASES.items()}
    # The role checks them first; site.yml's preflight play does too, before any role changes anything.
    main = yaml.safe_load((ROLES / "node_acceptance" / "tasks" / "main.yml").read_text())
    assert main[0]["ansible.builtin.import_tasks"] == "00-preflight.yml"
    nodes_play = yaml.safe_load((PROJECT / "playbooks" / "preflight.yml").read_text())[1]
    assert any(task.get("loop") and "node_acceptance" in task["loop"] for task in nodes_play["tasks"])


def test_a_threshold_for_a_sku_no_node_has_stops_acceptance_before_anything_is_measured(tmp_path, sysfs):
    # The node's RTX 4090 is an "RTX 4090 x1": an entry for H100 x8 would judge nothing here.
    gpu_node(sysfs)
    run, summary = validate(tmp_path, sysfs, extra={
        "node_acceptance_enabled": True, "node_acceptance_nccl_tests_dir": str(tmp_path / "nccl-tests"),
        "node_acceptance_thresholds": {"H100 x8": {"all_reduce_busbw_gbs": 460}}})
    assert run.returncode != 0 and summary is None
    assert ("node_acceptance_thresholds['H100 x8'] matches no node of this play: its nodes are RTX 4090 x1 on 1 node(s). "
            "Key the entry '<GPU model> x<GPU count>' as a node's acceptance sku gives it") in " ".join(run.stdout.split())
    assert not (tmp_path / "nccl-tests").exists()


def test_acceptance_is_off_by_default(tmp_path, sysfs):
    run, summary = validate(tmp_path, sysfs)
    assert run.returncode == 0, run.stdout[-3000:]
    assert "acceptance" not in summary["nodes"]["gpu001"] and summary["links"] == [] and summary["actions"] == []


def act(tmp_path, stack, failing, **extra):
    """17-act.yml alone on a node whose acceptance has these failing checks; scontrol and kubectl are stand-ins that
    record their arguments. Returns the recorded action and what the tools were called with."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("scontrol", "kubectl"):
        (tools / tool).write_text(f"#!/bin/sh\necho {tool} \"$@\" >> {tmp_path / 'calls'}\n")
        (tools / tool).chmod(0o755)
    inventory = tmp_path / "hosts.yml"
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory.write_text(json.dumps({"all": {"children": {"nodes": {"hosts": {"node001": host}},
                                                          "slurm_controller": {"hosts": {"node001": host}}}}}))
    out = tmp_path / "action.json"
    tasks = yaml.safe_load((ROLES / "node_acceptance" / "tasks" / "17-act.yml").read_text())
    tasks.append({"ansible.builtin.copy": {"dest": str(out), "mode": "0644",
                                           "content": "{{ node_acceptance_action | to_json }}"}})
    play = [{"hosts": "nodes", "gather_facts": False, "vars_files": role_vars("cluster") + role_vars("node_acceptance"),
             "tasks": tasks}]
    (tmp_path / "play.yml").write_text(json.dumps(play))
    checks = {name: {"status": "fail", "reason": "slow"} for name in failing} | {"dcgm": {"status": "pass"}}
    variables = {"cluster_stack": stack, "ansible_facts": {"hostname": "gpu-7", "nodename": "gpu-7.example"},
                 "node_acceptance_node": {"acceptance": {"checks": checks}}, "cluster_kubeconfig": "/k/config", **extra}
    env = dict(os.environ, ANSIBLE_CONFIG=str(PROJECT / "ansible.cfg"), PATH=f"{tools}:{os.environ['PATH']}")
    run = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory),
                          "-e", json.dumps(variables), str(tmp_path / "play.yml")],
                         cwd=PROJECT, env=env, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout[-3000:]
    calls = tmp_path / "calls"
    return json.loads(out.read_text()), calls.read_text().splitlines() if calls.exists() else []


def test_a_failed_node_is_drained_on_the_slurm_controller_and_recorded(tmp_path):
    action, calls = act(tmp_path, "baremetal", ["nccl_all_reduce_perf"])
    assert calls == ["scontrol update NodeName=gpu-7 State=DRAIN Reason=node acceptance failed: nccl_all_reduce_perf"]
    assert action == {"node": "node001", "action": "drain", "done": True,
                      "reason": "node acceptance failed: nccl_all_reduce_perf"}


def test_a_failed_node_is_tainted_on_kubernetes(tmp_path):
    action, calls = act(tmp_path, "k8s", ["dcgm_diag"], node_acceptance_k8s_action="taint")
    assert calls == ["kubectl --kubeconfig /k/config taint nodes gpu-7.example hpcml.io/acceptance=failed:NoSchedule --overwrite"]
    assert (action["action"], action["done"]) == ("taint", True)


def test_a_passing_node_is_left_alone(tmp_path):
    action, calls = act(tmp_path, "baremetal", [])
    assert action is None and calls == []


# The role keeps the kernel log's NVIDIA driver lines as they are, and how many lines it read; judging them is the
# module's.
XID = "kernel: NVRM: Xid (PCI:0000:84:00): 79, GPU has fallen off the bus."


def stand_in_nccl_tests(tmp_path):
    """A source archive whose Makefile records the build's arguments and makes each test a script printing its own
    arguments; returns the variables that point the role at it."""
    source = tmp_path / "source" / "nccl-tests-2.17.6"
    source.mkdir(parents=True)
    (source / "Makefile").write_text(
        "all:\n\tmkdir -p build && echo '$(MPI) $(MPI_HOME) $(CUDA_HOME) $(NCCL_HOME)' > build/made-with\n"
        "\tfor t in all_reduce_perf all_gather_perf reduce_scatter_perf alltoall_perf; do "
        "printf '#!/bin/sh\\necho \"$$(basename $$0) $$*\"\\n' > build/$$t && chmod +x build/$$t; done\n")
    archive = tmp_path / "nccl-tests.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(source, arcname=source.name)
    return {"node_acceptance_nccl_tests_url": archive.as_uri(), "node_acceptance_nccl_tests_dir": str(tmp_path / "nccl-tests"),
            "node_acceptance_nccl_tests_checksum": "sha256:" + hashlib.sha256(archive.read_bytes()).hexdigest()}


def test_acceptance_on_gpu_nodes_builds_runs_and_keeps_every_output(tmp_path, sysfs):
    # Two GPU nodes (this machine twice) with stand-ins for the tools: nccl-tests from a local archive, dcgmi, a kernel
    # log with one line in the driver's "NVRM: Xid" form among others, systemctl answering for nvidia-dcgm; DCGM's
    # package is one already installed.
    gpu_node(sysfs)
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "systemctl").write_text("#!/bin/sh\n[ \"$1\" = show ] && printf 'Id=nvidia-dcgm.service\\nLoadState=loaded\\n"
                                     "ActiveState=active\\nSubState=running\\nUnitFileState=enabled\\n'\nexit 0\n")
    (tools / "dcgmi").write_text("#!/bin/sh\necho \"dcgmi $*\"\n")
    (tools / "journalctl").write_text(f"#!/bin/sh\necho '{XID}'\necho 'kernel: eth0: link up'\n")
    for tool in tools.iterdir():
        tool.chmod(0o755)
    run, summary = validate(tmp_path, sysfs, path=tools, nodes=("gpu-a", "gpu-b"), extra={
        "node_acceptance_enabled": True, "node_acceptance_dcgm_package": "bash", "node_acceptance_on_fail": "drain",
        "node_acceptance_dcgm_level": 1, **stand_in_nccl_tests(tmp_path)})
    results.validate(results.NODE_VALIDATION, summary)
    built = tmp_path / "nccl-tests" / "nccl-tests-2.17.6" / "build" / "made-with"
    assert built.read_text().split() == ["1", f"/usr/lib/{platform.machine()}-linux-gnu/openmpi", "/usr/local/cuda", "/usr"]
    [stamp] = [p for p in (tmp_path / "results").iterdir() if p.is_dir()]
    raw = stamp / "gpu-a"
    assert (raw / "all_reduce_perf.txt").read_text().startswith("all_reduce_perf -b 8 -e 16G -f 2 -n 20 -w 5 -g 1\n")
    assert sorted(p.name for p in raw.iterdir()) == [
        "all_gather_perf.txt", "all_reduce_perf.txt", "alltoall_perf.txt", "dcgmi-diag.json", "kernel-xid.log",
        "nvidia-smi-nvlink-e.txt", "nvidia-smi-q-x.xml", "reduce_scatter_perf.txt"]
    assert (raw / "dcgmi-diag.json").read_text() == "dcgmi diag -r 1 -j"
    assert (raw / "kernel-xid.log").read_text() == XID + "\n(2 kernel log lines read, NVRM lines kept)"
    assert summary["nodes"]["gpu-a"]["checks"]["acceptance_inputs"]["status"] == "pass"
    # The pair's ranks would run as the MPI account, which this machine lacks: the link says so.
    [link] = summary["links"]
    assert (link["a"], link["b"], link["status"]) == ("gpu-a", "gpu-b", "skip")
    assert link["reason"].startswith("the MPI account hpcbench does not exist on gpu-a")
    # Output no parser can take is not a pass: the nodes fail, and drain asked for finds no scheduler to do it in.
    assert run.returncode != 0 and summary["status"] == "fail"
    assert [(a["node"], a["action"], a["done"]) for a in summary["actions"]] == [("gpu-a", "drain", False),
                                                                                ("gpu-b", "drain", False)]
    assert all(a["reason"].endswith("(not done: no scheduler to drain it in: no Slurm controller and cluster_stack is not k8s)")
               for a in summary["actions"])
