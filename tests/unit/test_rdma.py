from ansible_collections.hpcml.cluster.plugins.module_utils import pci, rdma


def test_active_infiniband_hca(sysfs):
    device = sysfs.pci("0000:1a:00.0", "0x15b3", "0x101b", "0x020700", driver="mlx5_core")
    sysfs.ib_device("mlx5_0", device, [("4: ACTIVE", "5: LinkUp", "InfiniBand", "200 Gb/sec (4X HDR)")],
                    netdevs=["ib0"])
    facts = rdma.summarize(pci.scan(str(sysfs.root)), rdma.scan_devices(str(sysfs.root)))
    assert facts["present"] is True
    assert facts["reason"] is None
    assert facts["device_count"] == 1
    assert facts["active_ports"] == 1
    assert facts["link_layers"] == ["InfiniBand"]
    mlx = facts["devices"][0]
    assert mlx["name"] == "mlx5_0"
    assert mlx["pci_address"] == "0000:1a:00.0"
    assert mlx["netdevs"] == ["ib0"]
    assert mlx["ports"] == [{"port": 1, "state": "ACTIVE", "phys_state": "LinkUp", "link_layer": "InfiniBand",
                             "rate": "200 Gb/sec (4X HDR)", "rate_gbps": 200.0}]


def test_roce_port_down(sysfs):
    device = sysfs.pci("0000:3b:00.0", "0x15b3", "0x1017", "0x020000", driver="mlx5_core")
    sysfs.ib_device("mlx5_1", device, [("1: DOWN", "3: Disabled", "Ethernet", "10 Gb/sec (1X QDR)")])
    facts = rdma.summarize(pci.scan(str(sysfs.root)), rdma.scan_devices(str(sysfs.root)))
    assert facts["active_ports"] == 0
    assert facts["link_layers"] == ["Ethernet"]
    assert facts["devices"][0]["ports"][0]["state"] == "DOWN"


def test_adapter_without_driver_says_so(sysfs):
    sysfs.pci("0000:1a:00.0", "0x15b3", "0x101b", "0x020700")
    facts = rdma.summarize(pci.scan(str(sysfs.root)), rdma.scan_devices(str(sysfs.root)))
    assert facts["present"] is False
    assert facts["pci_count"] == 1
    assert "no RDMA driver bound" in facts["reason"]


def test_no_adapter(sysfs):
    sysfs.pci("0000:00:03.0", "0x1af4", "0x1000", "0x020000", driver="virtio-pci")
    facts = rdma.summarize(pci.scan(str(sysfs.root)), rdma.scan_devices(str(sysfs.root)))
    assert facts["present"] is False
    assert facts["pci_count"] == 0
    assert facts["reason"] == "no RDMA adapter found on the PCI bus (vendor 0x15b3)"


def test_ibv_devinfo_ports(fixture_text):
    parsed = rdma.parse_ibv_devinfo(fixture_text("ibv_devinfo.cx7-ib-roce.txt"))
    assert sorted(parsed) == ["mlx5_0", "mlx5_1"]
    ib = parsed["mlx5_0"]
    assert ib["vendor_part_id"] == "4129"
    assert ib["transport"] == "InfiniBand (0)"
    assert ib["ports"][1] == {"state": "PORT_ACTIVE (4)", "max_mtu": "4096", "active_mtu": "4096", "sm_lid": "1",
                              "port_lid": "17", "port_lmc": "0x00", "link_layer": "InfiniBand"}
    assert parsed["mlx5_1"]["ports"][1]["link_layer"] == "Ethernet"
    assert parsed["mlx5_1"]["ports"][1]["active_mtu"] == "1024"


def test_ibv_devinfo_adds_mtu_and_lids_to_sysfs_ports(sysfs, fixture_text):
    device = sysfs.pci("0000:1a:00.0", "0x15b3", "0x1021", "0x020700", driver="mlx5_core")
    sysfs.ib_device("mlx5_0", device, [("4: ACTIVE", "5: LinkUp", "InfiniBand", "400 Gb/sec (4X NDR)")])
    devices = rdma.merge_ibv_devinfo(rdma.scan_devices(str(sysfs.root)),
                                     rdma.parse_ibv_devinfo(fixture_text("ibv_devinfo.cx7-ib-roce.txt")))
    port = devices[0]["ports"][0]
    assert (port["active_mtu"], port["lid"], port["sm_lid"]) == ("4096", "17", "1")
    assert devices[0]["vendor_part_id"] == "4129"


def test_ibv_devinfo_without_devices():
    assert rdma.parse_ibv_devinfo("No IB devices found\n") == {}
