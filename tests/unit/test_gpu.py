from ansible_collections.hpcml.cluster.plugins.module_utils import gpu, pci


def test_smi_xml_driver_and_cuda_versions(fixture_text):
    facts = gpu.parse_smi_xml(fixture_text("nvidia-smi-q-x.h100x8.xml"))
    assert facts["driver_version"] == "550.127.08"
    assert facts["cuda_version"] == "12.4"
    assert facts["driver_count"] == 8


def test_smi_xml_per_gpu_details(fixture_text):
    first = gpu.parse_smi_xml(fixture_text("nvidia-smi-q-x.h100x8.xml"))["gpus"][0]
    assert first == {
        "index": 0,
        "pci_bus_id": "00000000:18:00.0",
        "name": "NVIDIA H100 80GB HBM3",
        "architecture": "Hopper",
        "uuid": "GPU-5a1c0000-7d2e-4b9f-8c31-0e6f2a9b0000",
        "serial": "1654220000000",
        "vbios_version": "96.00.74.00.0D",
        "memory_total_mib": 81559,
        "persistence_mode": "Enabled",
        "mig_mode": "Disabled",
        "compute_mode": "Default",
        "pcie_generation": "5",
        "pcie_width": "16x",
        "power_limit": "700.00 W",
    }


def test_smi_xml_without_gpus_and_with_na_fields():
    facts = gpu.parse_smi_xml("<nvidia_smi_log><driver_version>535.54.03</driver_version>"
                              "<cuda_version>N/A</cuda_version></nvidia_smi_log>")
    assert facts == {"driver_version": "535.54.03", "cuda_version": None, "driver_count": 0, "gpus": []}


def test_topology_links_and_affinity(fixture_text):
    topo = gpu.parse_topo_matrix(fixture_text("nvidia-smi-topo-m.h100x8.txt"))
    assert topo["devices"] == [f"GPU{i}" for i in range(8)] + ["NIC0", "NIC1"]
    assert topo["links"]["GPU0"]["GPU7"] == "NV18"
    assert topo["links"]["GPU0"]["GPU0"] == "X"
    assert topo["links"]["GPU5"]["NIC1"] == "PXB"
    assert topo["links"]["NIC0"]["GPU6"] == "SYS"
    assert topo["affinity"]["GPU0"] == {"cpus": "0-55,112-167", "numa": "0"}
    assert topo["affinity"]["GPU7"] == {"cpus": "56-111,168-223", "numa": "1"}
    assert topo["nvlink"] is True


def test_topology_of_pcie_only_pair():
    text = ("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n"
            "GPU0\t X \tPHB\t0-11\t\tN/A\n"
            "GPU1\tPHB\t X \t0-11\t\tN/A\n\nLegend:\n")
    topo = gpu.parse_topo_matrix(text)
    assert topo["links"]["GPU0"]["GPU1"] == "PHB"
    assert topo["nvlink"] is False


def test_topology_of_unexpected_text_is_empty():
    assert gpu.parse_topo_matrix("No devices were found") == {"devices": [], "links": {}, "affinity": {}, "nvlink": False}


def test_pci_scan_finds_gpus_and_nvswitches_without_a_driver(sysfs):
    sysfs.pci("0000:18:00.0", "0x10de", "0x2330", "0x030200")
    sysfs.pci("0000:2a:00.0", "0x10de", "0x2330", "0x030200", driver="nvidia")
    sysfs.pci("0000:05:00.0", "0x10de", "0x22a3", "0x068000")
    sysfs.pci("0000:00:02.0", "0x8086", "0x0d26", "0x030000", driver="i915")
    facts = gpu.from_pci(pci.scan(str(sysfs.root)))
    assert facts == {"pci_devices": ["0000:18:00.0", "0000:2a:00.0"], "pci_count": 2, "nvswitch_count": 1,
                     "kernel_drivers": ["nvidia"]}


def test_pci_scan_of_a_machine_without_pci_sysfs(tmp_path):
    assert pci.scan(str(tmp_path)) == []
    assert gpu.from_pci([])["pci_count"] == 0
