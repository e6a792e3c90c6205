"""The GPU parsers on nvidia-smi output recorded on real machines; fixtures/ORIGINS.md names where each was published."""

import pytest

from ansible_collections.hpcml.cluster.plugins.module_utils import gpu, parsing, pci

# nvidia-smi -q -x: (driver, CUDA, [(minor number, product name) per GPU]).
SMI_XML = {
    "nvidia-smi-q-x.netdata.tesla-p100.xml": ("510.47.03", "11.6", [(0, "Tesla P100-PCIE-16GB")]),
    "nvidia-smi-q-x.netdata.a100-sxm4-mig.xml": ("510.47.03", "11.6", [(0, "NVIDIA A100-SXM4-40GB")]),
    "nvidia-smi-q-x.netdata.rtx-3060.xml": ("515.65.01", "11.7", [(0, "NVIDIA GeForce RTX 3060 Laptop GPU")]),
    # Windows has no /dev/nvidiaN: the minor number is N/A.
    "nvidia-smi-q-x.netdata.rtx-2080-win.xml": ("516.59", "11.7", [(None, "NVIDIA GeForce RTX 2080")]),
    "nvidia-smi-q-x.netdata.rtx-4090-driver-535.xml": ("535.86.05", "12.2", [(0, "NVIDIA GeForce RTX 4090")]),
}


@pytest.mark.parametrize("name", SMI_XML)
def test_smi_xml_of_each_recorded_driver(name, fixture_text):
    driver, cuda, gpus = SMI_XML[name]
    facts = gpu.parse_smi_xml(fixture_text(name))
    assert (facts["driver_version"], facts["cuda_version"], facts["driver_count"]) == (driver, cuda, len(gpus))
    assert [(g["minor_number"], g["name"]) for g in facts["gpus"]] == gpus


def test_smi_xml_per_gpu_details(fixture_text):
    first = gpu.parse_smi_xml(fixture_text("nvidia-smi-q-x.netdata.a100-sxm4-mig.xml"))["gpus"][0]
    assert first == {
        "index": 0,
        "minor_number": 0,
        "pci_bus_id": "00000000:00:04.0",
        "name": "NVIDIA A100-SXM4-40GB",
        "architecture": "Ampere",
        "uuid": "GPU-27b94a00-ed54-5c24-b1fd-1054085de32a",
        "serial": "1324321002473",
        "vbios_version": "92.00.45.00.03",
        "memory_total_mib": 40960,
        "persistence_mode": "Disabled",
        "mig_mode": "Enabled",
        "compute_mode": "Default",
        "pcie_generation": "4",
        "pcie_width": "16x",
        "power_limit": "400.00 W",
    }


def test_smi_xml_without_gpus_and_with_na_fields():
    facts = gpu.parse_smi_xml("<nvidia_smi_log><driver_version>535.54.03</driver_version>"
                              "<cuda_version>N/A</cuda_version></nvidia_smi_log>")
    assert facts == {"driver_version": "535.54.03", "cuda_version": None, "driver_count": 0, "gpus": []}


def test_smi_xml_that_is_not_xml_names_the_tool():
    with pytest.raises(parsing.ParseError, match=r"^nvidia-smi -q -x: not XML .*NVIDIA-SMI has failed"):
        gpu.parse_smi_xml("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n")


def test_smi_xml_of_another_document_is_refused():
    with pytest.raises(parsing.ParseError, match="no <nvidia_smi_log> element"):
        gpu.parse_smi_xml("<rocm_smi><card/></rocm_smi>")


def test_smi_xml_missing_a_gpu_it_announces_is_refused(fixture_text):
    text = fixture_text("nvidia-smi-q-x.netdata.tesla-p100.xml")
    cut = text[:text.index("\t<gpu id=")] + "</nvidia_smi_log>\n"
    with pytest.raises(parsing.ParseError, match=r"<attached_gpus> says 1 but 0 <gpu> elements follow"):
        gpu.parse_smi_xml(cut)


# nvidia-smi topo -m: (GPUs, NIC column -> RDMA device, NVLink, GPU0's affinity, one link as (row, column, type)).
TOPOLOGIES = {
    # One GPU, newer drivers: the header is underlined with ANSI escape codes, recorded as printed.
    "nvidia-smi-topo-m.linux.nvidia-geforce-rtx-2080-super.595.71.05.txt": (1, {}, False, ("0-23", "0"), None),
    "nvidia-smi-topo-m.linux.nvidia-geforce-rtx-2080-super.610.57.04.txt": (1, {}, False, ("0-23", "0"), None),
    "nvidia-smi-topo-m.linux.nvidia-geforce-rtx-4080-super.595.71.05.txt": (1, {}, False, ("0-15", "0"), None),
    "nvidia-smi-topo-m.linux.nvidia-h100-80gb-hbm3.590.48.01.txt": (1, {}, False, ("0-19", "0"), None),
    "nvidia-smi-topo-m.linux.nvidia-h100-mig.590.48.01.txt": (1, {}, False, ("0-19", "0"), None),
    "nvidia-smi-topo-m.linux.nvidia-h200-mig.590.48.01.txt": (1, {}, False, ("0-23", "0"), None),
    "nvidia-smi-topo-m.linux.nvidia-h200.590.48.01.txt": (1, {}, False, ("0-23", "0"), None),
    "nvidia-smi-topo-m.linux.nvidia-l40s.595.80.txt": (1, {}, False, ("0-7", "0"), None),
    # Windows leaves the affinity cells empty.
    "nvidia-smi-topo-m.windows.nvidia-geforce-rtx-2080-super.610.62.txt": (1, {}, False, (None, None), None),
    "nvidia-smi-topo-m.sglang-24413.h100-pcie-x1-nic.txt": (1, {"NIC0": "mlx5_0"}, False, ("0-251", "0"),
                                                           ("GPU0", "NIC0", "PHB")),
    "nvidia-smi-topo-m.xuesongtap-blog.gtx1080ti-x2-phb.txt": (2, {}, False, ("0-11", None), ("GPU0", "GPU1", "PHB")),
    "nvidia-smi-topo-m.siboehm-bench.rtx-a6000-x3-nv4-node.txt": (3, {}, True, ("0-31,64-95", "0"),
                                                                  ("GPU2", "GPU0", "NODE")),
    # Drivers before 384 name the NIC column after the device and call SYS "SOC".
    "nvidia-smi-topo-m.tensorflow-gdr-readme.k40m-x4-mlx4-soc.txt": (4, {"mlx4_0": "mlx4_0"}, False, ("0-5", None),
                                                                     ("GPU3", "mlx4_0", "PHB")),
    "nvidia-smi-topo-m.xuesongtap-blog.a10-x4-sys-2nic.txt": (4, {"NIC0": "mlx5_0", "NIC1": "mlx5_1"}, False,
                                                              ("0-127", "0"), ("NIC1", "NIC0", "PIX")),
    "nvidia-smi-topo-m.stelline.rtx6000ada-x4-node-4nic.txt": (4, {f"NIC{i}": f"mlx5_{i}" for i in range(4)}, False,
                                                               ("0-31", "0"), ("GPU2", "NIC3", "NODE")),
    "nvidia-smi-topo-m.xuesongtap-blog.a100-x8-nv12-17nic.txt": (
        8, dict({f"NIC{i}": f"mlx5_{i + 2}" for i in range(16)}, NIC16="mlx5_bond_0"), True, ("0-103", "0"),
        ("GPU7", "NIC15", "PXB")),
}


@pytest.mark.parametrize("name", TOPOLOGIES)
def test_topology_of_each_recorded_machine(name, fixture_text):
    gpus, nics, nvlink, (cpus, numa), link = TOPOLOGIES[name]
    topo = gpu.parse_topo_matrix(fixture_text(name))
    assert topo["devices"] == [f"GPU{i}" for i in range(gpus)] + list(nics)
    assert topo["nics"] == nics
    assert topo["nvlink"] is nvlink
    assert topo["affinity"]["GPU0"] == {"cpus": cpus, "numa": numa}
    assert all(topo["links"][device][device] == "X" for device in topo["devices"])
    if link:
        row, column, kind = link
        assert topo["links"][row][column] == kind


def test_ansi_underlined_header_is_read(fixture_text):
    text = fixture_text("nvidia-smi-topo-m.siboehm-bench.rtx-a6000-x3-nv4-node.txt")
    assert "\x1b[4mGPU0" in text and "\x1b[0m" in text
    topo = gpu.parse_topo_matrix(text)
    assert topo["links"]["GPU0"] == {"GPU0": "X", "GPU1": "NV4", "GPU2": "NODE"}


def test_empty_affinity_cells_are_not_shifted(fixture_text):
    # "GPU0\t X \t\t\t\tN/A": read from the left, the GPU NUMA ID column's N/A would land in CPU Affinity.
    topo = gpu.parse_topo_matrix(fixture_text("nvidia-smi-topo-m.windows.nvidia-geforce-rtx-2080-super.610.62.txt"))
    assert topo["affinity"] == {"GPU0": {"cpus": None, "numa": None}}


def test_nic_rows_with_empty_trailing_cells_and_the_bond_device(fixture_text):
    topo = gpu.parse_topo_matrix(fixture_text("nvidia-smi-topo-m.xuesongtap-blog.a100-x8-nv12-17nic.txt"))
    assert topo["links"]["NIC16"]["GPU0"] == "SYS"
    assert topo["nics"]["NIC16"] == "mlx5_bond_0"
    assert "NIC0" not in topo["affinity"]


def test_topology_error_output_is_refused_with_the_output(fixture_text):
    text = fixture_text("nvidia-smi-topo-m.windows.nvidia-geforce-rtx-2080-super.591.86.txt")
    with pytest.raises(parsing.ParseError, match=r"^nvidia-smi topo -m: no header row starting with GPU0; "
                                                 r"its output began \"ERROR: Option -m is missing its value"):
        gpu.parse_topo_matrix(text)


def test_empty_topology_is_refused():
    with pytest.raises(parsing.ParseError, match=r"^nvidia-smi topo -m printed nothing$"):
        gpu.parse_topo_matrix("\n")


def test_topology_cut_short_is_refused(fixture_text):
    text = fixture_text("nvidia-smi-topo-m.stelline.rtx6000ada-x4-node-4nic.txt")
    cut = "".join(line for line in text.splitlines(keepends=True) if not line.startswith("NIC3"))
    with pytest.raises(parsing.ParseError, match="no row for NIC3"):
        gpu.parse_topo_matrix(cut)


def test_nic_columns_without_their_legend_are_refused(fixture_text):
    text = fixture_text("nvidia-smi-topo-m.xuesongtap-blog.a10-x4-sys-2nic.txt")
    with pytest.raises(parsing.ParseError, match="column NIC0 has no entry in a NIC Legend"):
        gpu.parse_topo_matrix(text[:text.index("NIC Legend:")])


def test_unknown_link_type_is_refused(fixture_text):
    text = fixture_text("nvidia-smi-topo-m.xuesongtap-blog.gtx1080ti-x2-phb.txt").replace("PHB      X", "P?B      X")
    with pytest.raises(parsing.ParseError, match="row GPU1 does not hold a link type for each of 2 devices"):
        gpu.parse_topo_matrix(text)


def test_pci_scan_finds_gpus_and_nvswitches_without_a_driver(sysfs):
    sysfs.pci("0000:18:00.0", "0x10de", "0x2330", "0x030200")
    sysfs.pci("0000:2a:00.0", "0x10de", "0x2330", "0x030200", driver="nvidia")
    sysfs.pci("0000:05:00.0", "0x10de", "0x22a3", "0x068000")
    sysfs.pci("0000:00:02.0", "0x8086", "0x0d26", "0x030000", driver="i915")
    facts = gpu.from_pci(pci.scan(str(sysfs.root)))
    assert facts == {"pci_devices": ["0000:18:00.0", "0000:2a:00.0"], "pci_count": 2,
                     "pci_device_ids": ["0x2330", "0x2330"], "nvswitch_count": 1,
                     "kernel_drivers": ["nvidia"]}


def test_pci_scan_of_a_machine_without_pci_sysfs(tmp_path):
    assert pci.scan(str(tmp_path)) == []
    assert gpu.from_pci([])["pci_count"] == 0
