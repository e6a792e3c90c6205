"""The GPU parsers on nvidia-smi output recorded on real machines; fixtures/ORIGINS.md names where each was published."""

import json
import re

import pytest

from ansible_collections.hpcml.cluster.plugins.module_utils import gpu, parsing, pci
from unit_paths import FIXTURES

# nvidia-smi -q -x: (driver, CUDA, <attached_gpus>, [(minor number, product name) per <gpu> element]).
SMI_XML = {
    "nvidia-smi-q-x.netdata.tesla-p100.xml": ("510.47.03", "11.6", 1, [(0, "Tesla P100-PCIE-16GB")]),
    "nvidia-smi-q-x.netdata.a100-sxm4-mig.xml": ("510.47.03", "11.6", 1, [(0, "NVIDIA A100-SXM4-40GB")]),
    "nvidia-smi-q-x.netdata.rtx-3060.xml": ("515.65.01", "11.7", 1, [(0, "NVIDIA GeForce RTX 3060 Laptop GPU")]),
    # Windows has no /dev/nvidiaN: the minor number is N/A.
    "nvidia-smi-q-x.netdata.rtx-2080-win.xml": ("516.59", "11.7", 1, [(None, "NVIDIA GeForce RTX 2080")]),
    "nvidia-smi-q-x.netdata.rtx-4090-driver-535.xml": ("535.86.05", "12.2", 1, [(0, "NVIDIA GeForce RTX 4090")]),
    "nvidia-smi-q-x.telegraf.rtx-3080-driver-595.xml": ("595.58.03", "13.2", 1, [(0, "NVIDIA GeForce RTX 3080")]),
    # Minor numbers need not follow the order nvidia-smi lists GPUs in; driver 430 says "Not Found" for CUDA.
    "nvidia-smi-q-x.openpai.k80-x4-minor-out-of-order.xml": ("430.26", None, 4,
                                                             [(1, "Tesla K80"), (2, "Tesla K80"), (3, "Tesla K80"),
                                                              (0, "Tesla K80")]),
    # Recordings that kept some GPUs of the machine (what -q -x -i N prints too).
    "nvidia-smi-q-x.telegraf.a100-sxm4-mig-1-of-4.xml": ("535.54.03", "12.2", 4, [(1, "NVIDIA A100-SXM4-80GB")]),
    "nvidia-smi-q-x.openpai.gtx-1070-2-of-6.xml": ("384.66", None, 6, [(0, "GeForce GTX 1070"),
                                                                      (1, "GeForce GTX 1070")]),
}


@pytest.mark.parametrize("name", SMI_XML)
def test_smi_xml_of_each_recorded_driver(name, fixture_text):
    driver, cuda, attached, gpus = SMI_XML[name]
    facts = gpu.parse_smi_xml(fixture_text(name))
    assert (facts["driver_version"], facts["cuda_version"]) == (driver, cuda)
    assert (facts["attached_gpus"], facts["driver_count"]) == (attached, len(gpus))
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


def test_smi_xml_of_some_gpus_keeps_them_and_the_machines_count(fixture_text):
    # One A100 of four: its place among them is unknown, its minor number (1) and MIG mode are not.
    facts = gpu.parse_smi_xml(fixture_text("nvidia-smi-q-x.telegraf.a100-sxm4-mig-1-of-4.xml"))
    assert (facts["attached_gpus"], facts["driver_count"]) == (4, 1)
    only = facts["gpus"][0]
    assert (only["index"], only["minor_number"], only["pci_bus_id"], only["mig_mode"]) == (
        None, 1, "00000000:01:00.0", "Enabled")


def test_smi_xml_of_every_gpu_numbers_them_in_order(fixture_text):
    facts = gpu.parse_smi_xml(fixture_text("nvidia-smi-q-x.openpai.k80-x4-minor-out-of-order.xml"))
    assert [(g["index"], g["minor_number"]) for g in facts["gpus"]] == [(0, 1), (1, 2), (2, 3), (3, 0)]


def test_smi_xml_that_is_not_xml_names_the_tool():
    with pytest.raises(parsing.ParseError, match=r"^nvidia-smi -q -x: not XML .*NVIDIA-SMI has failed"):
        gpu.parse_smi_xml("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n")


def test_smi_xml_cut_short_is_refused_with_where_it_ends(fixture_text):
    text = fixture_text("nvidia-smi-q-x.openpai.gtx-1070-2-of-6.xml")
    cut = text[:text.index("<fb_memory_usage>")]  # variant: the output of a run killed half-way
    with pytest.raises(parsing.ParseError, match=r"^nvidia-smi -q -x: not XML \(no element found: line 73, column"):
        gpu.parse_smi_xml(cut)


def test_smi_xml_of_another_document_is_refused():
    with pytest.raises(parsing.ParseError, match="no <nvidia_smi_log> element"):
        gpu.parse_smi_xml("<rocm_smi><card/></rocm_smi>")


def test_smi_xml_without_any_gpu_is_refused(fixture_text):
    text = fixture_text("nvidia-smi-q-x.netdata.tesla-p100.xml")
    cut = text[:text.index("\t<gpu id=")] + "</nvidia_smi_log>\n"  # variant: the <gpu> element removed
    with pytest.raises(parsing.ParseError, match=r"no <gpu> element although <attached_gpus> says 1"):
        gpu.parse_smi_xml(cut)
    with pytest.raises(parsing.ParseError, match=r"^nvidia-smi -q -x: no <gpu> element; its output began"):
        gpu.parse_smi_xml("<nvidia_smi_log><driver_version>535.54.03</driver_version></nvidia_smi_log>")


def test_smi_xml_with_more_gpus_than_attached_or_an_odd_count_is_refused(fixture_text):
    text = fixture_text("nvidia-smi-q-x.openpai.gtx-1070-2-of-6.xml")
    with pytest.raises(parsing.ParseError, match=r"2 <gpu> elements but <attached_gpus> says 1"):
        gpu.parse_smi_xml(text.replace("<attached_gpus>6<", "<attached_gpus>1<"))
    with pytest.raises(parsing.ParseError, match=r"<attached_gpus> is 'six', not a count"):
        gpu.parse_smi_xml(text.replace("<attached_gpus>6<", "<attached_gpus>six<"))


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
    # Drivers of 2017-2019 (V100 DGX-1): NIC columns named after the device, CPU Affinity only; the block indented.
    "nvidia-smi-topo-m.ucx-py.dgx1-v100-x8-mlx5-indented.txt": (8, {f"mlx5_{i}": f"mlx5_{i}" for i in range(4)}, True,
                                                                ("0-19,40-59", None), ("GPU0", "GPU5", "SYS")),
    # CPU and NUMA Affinity without GPU NUMA ID; the second realigned by hand to 6 columns.
    "nvidia-smi-topo-m.ml-engineering.h100-x8-nv18-cpu-numa.txt": (8, {}, True, ("0-51,104-155", "0"),
                                                                   ("GPU7", "GPU0", "NV18")),
    "nvidia-smi-topo-m.ml-engineering.a100-x8-nv12-realigned.txt": (8, {}, True, ("0-23", "0"),
                                                                    ("GPU4", "GPU3", "NV12")),
    # A VM that knows no affinity: four empty cells before GPU NUMA ID; the header underlined with ESC codes.
    "nvidia-smi-topo-m.awesome-ml-sys.h800-x4-vm-17nic-no-affinity.txt": (
        4, {f"NIC{i}": f"mlx5_{i}" for i in range(17)}, True, (None, None), ("GPU0", "NIC4", "PIX")),
    "nvidia-smi-topo-m.sglang-26039.b300-x8-nv18-9nic.txt": (
        8, dict({f"NIC{i}": f"mlx5_{i + 10}" for i in range(8)}, NIC8="mlx5_bond_0"), True, ("0-63,128-191", "0"),
        ("GPU0", "NIC0", "PXB")),
    "nvidia-smi-topo-m.deepep-590.b300-x8-nv18-8nic-cx8.txt": (
        8, {f"NIC{i}": f"mlx5_bond_{i}" for i in range(8)}, True, ("0-63,128-191", "0"), ("GPU7", "NIC7", "PXB")),
    # Pasted from a terminal that wrapped the rows: cells glued where the lines broke ("NODENODE", "PIXPIX").
    "nvidia-smi-topo-m.sglang-14092.h20-x8-nv18-36nic-wrapped.txt": (
        8, dict({f"NIC{i}": f"mlx5_{i}" for i in range(32)}, **{f"NIC{i + 32}": f"mlx5_bond_{i}" for i in range(4)}),
        True, ("0-55,112-167", "0"), ("GPU2", "NIC13", "PIX")),
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


def test_b300_header_underlined_without_its_esc_bytes(fixture_text):
    # GitHub dropped the ESC bytes of "\x1b[4m ... \x1b[0m"; each row has an empty cell before GPU NUMA ID.
    text = fixture_text("nvidia-smi-topo-m.sglang-26039.b300-x8-nv18-9nic.txt")
    assert text.startswith("\t[4mGPU0") and "\x1b" not in text and "\t0\t\tN/A\n" in text
    topo = gpu.parse_topo_matrix(text)
    assert topo["affinity"] == {f"GPU{i}": {"cpus": "0-63,128-191" if i < 4 else "64-127,192-255",
                                            "numa": "0" if i < 4 else "1"} for i in range(8)}
    assert topo["links"]["NIC8"]["GPU0"] == "SYS" and topo["links"]["NIC8"]["NIC7"] == "NODE"


TABBED = [name for name in TOPOLOGIES if "\t" in (FIXTURES / name).read_text()]


@pytest.mark.parametrize("name", TABBED)
def test_output_pasted_through_a_terminal_reads_as_printed(name, fixture_text):
    # Variant: the tabs expanded to spaces, as a terminal shows them and users paste them.
    text = fixture_text(name)
    assert gpu.parse_topo_matrix(text.expandtabs()) == gpu.parse_topo_matrix(text)


def test_empty_affinity_cell_is_kept_in_a_terminal_paste(fixture_text):
    # Variant: the CPU Affinity cells blanked, as a job step confined to cores far from the GPUs sees them; the spaces
    # still line up with the tab stops, so the empty cell is seen where it is.
    text = fixture_text("nvidia-smi-topo-m.deepep-590.b300-x8-nv18-8nic-cx8.txt")
    text = text.replace("0-63,128-191", " " * 12).replace("64-127,192-255", " " * 14)
    topo = gpu.parse_topo_matrix(text)
    assert topo["affinity"]["GPU0"] == {"cpus": None, "numa": "0"}
    assert topo["affinity"]["GPU7"] == {"cpus": None, "numa": "1"}


def test_empty_affinity_cell_in_text_that_lost_its_alignment_is_refused(fixture_text):
    # Variant: CPU Affinity cells emptied and every run of tabs turned into two spaces: which cell was empty is lost.
    text = fixture_text("nvidia-smi-topo-m.sglang-26039.b300-x8-nv18-9nic.txt")
    text = re.sub(r"\t+", "  ", re.sub(r"\t[0-9,-]+(\t[01]\t\tN/A)$", r"\t\1", text, flags=re.M))
    with pytest.raises(parsing.ParseError, match=r"^nvidia-smi topo -m: line 2: 2 values for the columns CPU "
                                                 r"Affinity, NUMA Affinity, GPU NUMA ID: which are empty cannot"):
        gpu.parse_topo_matrix(text)


def test_rows_a_terminal_wrapped_are_read_where_cells_were_glued(fixture_text):
    text = fixture_text("nvidia-smi-topo-m.sglang-14092.h20-x8-nv18-36nic-wrapped.txt")
    assert "NODENODE" in text and " X PIX " in text
    topo = gpu.parse_topo_matrix(text)
    assert [topo["links"]["GPU0"][nic] for nic in ("NIC11", "NIC12", "NIC13", "NIC34", "NIC35")] == [
        "NODE", "NODE", "NODE", "NODE", "PIX"]
    assert (topo["links"]["NIC12"]["NIC12"], topo["links"]["NIC12"]["NIC13"]) == ("X", "PIX")
    assert topo["affinity"]["GPU7"] == {"cpus": "70-99,102-107", "numa": "1"}
    # Variant: the header glued at the same place, as vLLM's collect_env reports show it.
    glued = text.replace("NIC12       NIC13", "NIC12NIC13", 1)
    assert gpu.parse_topo_matrix(glued) == topo


def test_row_without_its_self_cell_is_refused(fixture_text):
    text = fixture_text("nvidia-smi-topo-m.sglang-26039.b300-x8-nv18-9nic.txt").replace("GPU1\tNV18\t X \t", "GPU1\tNV18\tNV18\t")
    with pytest.raises(parsing.ParseError, match=r"^nvidia-smi topo -m: line 3: row GPU1 does not have its X \(self\) "
                                                 r"in its own column"):
        gpu.parse_topo_matrix(text)


def test_row_given_twice_is_refused(fixture_text):
    text = fixture_text("nvidia-smi-topo-m.stelline.rtx6000ada-x4-node-4nic.txt")
    nic3 = next(line for line in text.splitlines(keepends=True) if line.startswith("NIC3"))
    with pytest.raises(parsing.ParseError, match=r"line 11: a second row NIC3"):
        gpu.parse_topo_matrix(text.replace(nic3, nic3 + nic3))


def test_unknown_header_column_is_refused(fixture_text):
    text = fixture_text("nvidia-smi-topo-m.sglang-26039.b300-x8-nv18-9nic.txt").replace("GPU NUMA ID", "GPU NUMA ID\tGPU Fabric")
    with pytest.raises(parsing.ParseError, match=r"line 1 \(the header\) has columns it does not know after the "
                                                 r"affinity columns: GPU Fabric"):
        gpu.parse_topo_matrix(text)


def test_values_after_a_nic_row_are_refused(fixture_text):
    text = fixture_text("nvidia-smi-topo-m.deepep-590.b300-x8-nv18-8nic-cx8.txt")
    text = text.replace("NODE     X \n", "NODE     X      0-63\n")
    with pytest.raises(parsing.ParseError, match=r"line 18: row NIC7 has values after its links"):
        gpu.parse_topo_matrix(text)


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


# This project's own record of a lent H100 machine (make gpu-record, fixtures/gpu-record-h100-20261124/README.md).
H100 = "gpu-record-h100-20261124"


def _said(text: str, label: str) -> str:
    """The first `label : value` line of nvidia-smi -q's text, read apart from the XML parser."""
    return re.search(rf"^\s*{re.escape(label)}\s+: (.*)$", text, re.M).group(1)


def test_h100_xml_reads_as_the_same_machines_text_output(fixture_text):
    facts = gpu.parse_smi_xml(fixture_text(f"{H100}/nvidia-smi-q-x.xml"))
    text = fixture_text(f"{H100}/nvidia-smi-q.txt")
    (only,) = facts["gpus"]
    assert (facts["driver_version"], facts["cuda_version"]) == (_said(text, "Driver Version"), _said(text, "CUDA Version"))
    assert (facts["attached_gpus"], facts["driver_count"]) == (int(_said(text, "Attached GPUs")), 1)
    assert (only["name"], only["serial"], only["uuid"]) == (_said(text, "Product Name"), _said(text, "Serial Number"),
                                                            _said(text, "GPU UUID"))
    assert (only["architecture"], only["persistence_mode"], only["mig_mode"]) == ("Hopper", "Enabled", "Disabled")
    assert f"{only['memory_total_mib']} MiB" == _said(text, "Total")
    assert (only["pcie_generation"], only["pcie_width"]) == ("5", "16x")


def test_h100_health_counters_are_read_as_reported_and_retired_pages_as_not_reported(fixture_text):
    (counters,) = gpu.gpu_counters(fixture_text(f"{H100}/nvidia-smi-q-x.xml"))
    # Hopper remaps rows instead of retiring pages: its retired-page counters are N/A, not zero.
    assert counters["retired_pages"] == {"single_bit": None, "double_bit": None, "pending": None}
    assert counters["remapped_rows"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}
    assert set(counters["ecc"].values()) == {0}
    assert counters["pcie"] == {"current_gen": 5, "max_gen": 5, "current_width": 16, "max_width": 16}
    assert counters["clock_events"]["gpu_idle"] is True and not counters["clock_events"]["hw_slowdown"]


def test_h100_topology_with_its_underlined_header_and_no_nics(fixture_text):
    text = fixture_text(f"{H100}/nvidia-smi-topo-m.txt")
    assert "\x1b[4m" in text
    assert gpu.parse_topo_matrix(text) == {"devices": ["GPU0"], "links": {"GPU0": {"GPU0": "X"}},
                                           "affinity": {"GPU0": {"cpus": "0-15", "numa": "0"}}, "nvlink": False,
                                           "nics": {}}


def test_h100_facts_module_on_the_machine_read_what_its_nvidia_smi_printed(fixture_text):
    recorded = json.loads(fixture_text(f"{H100}/facts-gpu_facts.json"))
    parsed = gpu.parse_smi_xml(fixture_text(f"{H100}/nvidia-smi-q-x.xml"))
    assert recorded["present"] is True and recorded["topology_error"] is None
    assert [g["name"] for g in recorded["gpus"]] == [g["name"] for g in parsed["gpus"]]
    assert recorded["driver_version"] == parsed["driver_version"] == "580.159.04"
    assert recorded["topology"]["affinity"] == {"GPU0": {"cpus": "0-15", "numa": "0"}}
