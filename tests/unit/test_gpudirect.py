"""GPUDirect RDMA readiness from loaded modules and the GPU/NIC topology."""

from ansible_collections.hpcml.cluster.plugins.module_utils import gpu, gpudirect


def load(sysfs, *names):
    for name in names:
        path = sysfs.root / "module" / name
        path.mkdir(parents=True)
        if name == "nvidia":
            (path / "version").write_text("570.172.08\n")


def test_ready_when_driver_hca_and_peermem_are_loaded(sysfs):
    load(sysfs, "nvidia", "nvidia_peermem", "ib_core", "mlx5_core")
    modules = gpudirect.loaded_modules(str(sysfs.root))
    assert modules["nvidia"] == "570.172.08"
    facts = gpudirect.summarize(True, True, modules, {})
    assert facts["ready"] is True
    assert facts["reason"] is None
    assert facts["peermem_loaded"] is True


def test_not_ready_says_what_is_missing(sysfs):
    load(sysfs, "nvidia", "ib_core")
    modules = gpudirect.loaded_modules(str(sysfs.root))
    assert gpudirect.summarize(False, False, {}, {})["reason"] == "no NVIDIA GPU on this node"
    assert gpudirect.summarize(True, False, modules, {})["reason"] == "no RDMA device on this node"
    assert gpudirect.summarize(True, True, {"ib_core": None}, {})["reason"] == "the NVIDIA kernel module is not loaded"
    assert gpudirect.summarize(True, True, modules, {})["reason"] == "nvidia_peermem is not loaded"


def test_legacy_module_beside_the_new_one_is_a_conflict(sysfs):
    load(sysfs, "nvidia", "nvidia_peermem", "nv_peer_mem")
    facts = gpudirect.summarize(True, True, gpudirect.loaded_modules(str(sysfs.root)), {})
    assert facts["ready"] is False
    assert "nv_peer_mem" in facts["reason"]


def test_each_gpu_finds_its_nearest_nic(fixture_text):
    topology = gpu.parse_topo_matrix(fixture_text("nvidia-smi-topo-m.h100x8.txt"))
    nearest = gpudirect.nearest_nics(topology)
    assert nearest["GPU0"] == {"link": "PXB", "nics": ["NIC0"]}
    assert nearest["GPU7"] == {"link": "PXB", "nics": ["NIC1"]}
    assert gpudirect.summarize(True, True, {}, nearest)["gpus_far_from_nic"] == []


def test_gpu_behind_the_cpu_is_flagged():
    topology = {"devices": ["GPU0", "GPU1", "NIC0"],
                "links": {"GPU0": {"GPU0": "X", "GPU1": "NV4", "NIC0": "PIX"},
                          "GPU1": {"GPU0": "NV4", "GPU1": "X", "NIC0": "SYS"}}}
    nearest = gpudirect.nearest_nics(topology)
    assert nearest["GPU1"] == {"link": "SYS", "nics": ["NIC0"]}
    assert gpudirect.summarize(True, True, {}, nearest)["gpus_far_from_nic"] == ["GPU1"]
