"""Unit tests of the project's collection: its plugins import as `ansible_collections.hpcml.cluster`."""

import sys

import pytest

# Importing Ansible's module_utils (these tests do) replaces sys.intern with a callable object, and torch's dynamo,
# imported lazily by a meta-device build or torch.compile, refuses to wrap anything but a function there: in an xdist
# worker that ran one of these tests first, benchrunner's torch tests would fail. Conftests load before any test module,
# so dynamo comes first. Ranks and benchrunner's commands never import Ansible's module_utils.
try:
    import torch._dynamo  # noqa: F401
except ImportError:  # no torch: the tests that need it say so themselves
    pass

from ansible.plugins.loader import init_plugin_loader
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder

from unit_paths import FIXTURES, PROJECT

sys.path.insert(0, str(PROJECT / "collections"))


@pytest.fixture(scope="module")
def ansible_plugins():
    """Ansible's plugin loader, for tests that template roles' tasks in-process (lookups, the collection's filters).
    It installs Ansible's collection finder, which cannot load the collection this file put on sys.path: removed after
    the module, so that the modules imported later in the same worker still import hpcml.cluster."""
    init_plugin_loader([str(PROJECT / "collections")])
    yield
    _AnsibleCollectionFinder._remove()


@pytest.fixture
def fixture_text():
    return lambda name: (FIXTURES / name).read_text()


@pytest.fixture
def sysfs(tmp_path):
    """Builds a fake /sys: PCI functions and RDMA devices, as the kernel lays them out."""

    class Tree:
        root = tmp_path

        def pci(self, address, vendor, device, klass, driver=None, numa="0"):
            path = tmp_path / "bus" / "pci" / "devices" / address
            path.mkdir(parents=True)
            (path / "vendor").write_text(vendor + "\n")
            (path / "device").write_text(device + "\n")
            (path / "class").write_text(klass + "\n")
            (path / "numa_node").write_text(numa + "\n")
            if driver:
                target = tmp_path / "bus" / "pci" / "drivers" / driver
                target.mkdir(parents=True, exist_ok=True)
                (path / "driver").symlink_to(target)
            return path

        def ib_device(self, name, pci_path, ports, hca_type="MT4123", netdevs=()):
            path = tmp_path / "class" / "infiniband" / name
            path.mkdir(parents=True)
            (path / "hca_type").write_text(hca_type + "\n")
            (path / "fw_ver").write_text("20.39.1002\n")
            (path / "node_guid").write_text("b859:9f03:00d4:1a2e\n")
            (path / "board_id").write_text("MT_0000000223\n")
            (path / "device").symlink_to(pci_path)
            for netdev in netdevs:
                (pci_path / "net" / netdev).mkdir(parents=True)
            for number, (state, phys, layer, rate) in enumerate(ports, start=1):
                port = path / "ports" / str(number)
                port.mkdir(parents=True)
                (port / "state").write_text(state + "\n")
                (port / "phys_state").write_text(phys + "\n")
                (port / "link_layer").write_text(layer + "\n")
                (port / "rate").write_text(rate + "\n")
            return path

    return Tree()
