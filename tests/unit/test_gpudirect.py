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


def test_each_gpu_finds_its_nearest_rdma_device(fixture_text):
    topology = gpu.parse_topo_matrix(fixture_text("nvidia-smi-topo-m.xuesongtap-blog.a100-x8-nv12-17nic.txt"))
    nearest = gpudirect.nearest_nics(topology)
    # NIC0..NIC3 are all behind GPU0's switch; PIX pairs NIC0 with NIC1, but each GPU is PXB from all four.
    assert nearest["GPU0"] == {"link": "PXB", "nics": ["mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5"]}
    assert nearest["GPU7"] == {"link": "PXB", "nics": ["mlx5_14", "mlx5_15", "mlx5_16", "mlx5_17"]}
    assert gpudirect.summarize(True, True, {}, nearest)["gpus_far_from_nic"] == []


def test_gpu_behind_the_host_bridge_is_flagged(fixture_text):
    nearest = gpudirect.nearest_nics(gpu.parse_topo_matrix(fixture_text("nvidia-smi-topo-m.sglang-24413.h100-pcie-x1-nic.txt")))
    assert nearest == {"GPU0": {"link": "PHB", "nics": ["mlx5_0"]}}
    assert gpudirect.summarize(True, True, {}, nearest)["gpus_far_from_nic"] == ["GPU0"]


def test_soc_of_old_drivers_ranks_as_sys(fixture_text):
    topology = gpu.parse_topo_matrix(fixture_text("nvidia-smi-topo-m.tensorflow-gdr-readme.k40m-x4-mlx4-soc.txt"))
    nearest = gpudirect.nearest_nics(topology)
    assert nearest["GPU0"] == {"link": "SOC", "nics": ["mlx4_0"]}
    assert nearest["GPU2"] == {"link": "PHB", "nics": ["mlx4_0"]}


def test_unreadable_topology_keeps_a_node_with_rdma_from_being_ready(sysfs):
    load(sysfs, "nvidia", "nvidia_peermem", "ib_core")
    modules = gpudirect.loaded_modules(str(sysfs.root))
    problem = gpudirect.topology_problem(True, None, "nvidia-smi topo -m printed nothing")
    facts = gpudirect.summarize(True, True, modules, {}, problem)
    assert facts["ready"] is False
    assert facts["reason"] == "the GPU/NIC topology could not be read: nvidia-smi topo -m printed nothing"


def test_topology_without_a_nic_on_a_node_with_rdma_is_a_problem(fixture_text):
    topology = gpu.parse_topo_matrix(fixture_text("nvidia-smi-topo-m.linux.nvidia-h100-80gb-hbm3.590.48.01.txt"))
    assert gpudirect.topology_problem(True, topology, None) == ("nvidia-smi topo -m shows no NIC although the node "
                                                                "has RDMA devices")
    assert gpudirect.topology_problem(False, topology, None) is None
