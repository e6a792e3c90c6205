"""The Kubernetes stack's container runtime: the toolkit at its version, containerd running with what config.toml sets
as containerd itself parsed it, the toolkit's nvidia runtime its default, kubelet's prerequisites."""

import json

from node_layer import held, installed_version, record

CRI = 'plugins."io.containerd.grpc.v1.cri"'


def dump(host):
    # What containerd loaded, not what the file says: a key in the wrong table is silently ignored.
    return host.check_output("containerd config dump")


def test_toolkit_is_pinned_and_held(host):
    assert "1.18.0-1" in host.check_output("apt-cache madison nvidia-container-toolkit")
    assert installed_version(host, "nvidia-container-toolkit") == "1.17.8-1"
    assert installed_version(host, "nvidia-container-toolkit-base") == "1.17.8-1"
    assert "nvidia-container-toolkit" in held(host)


def test_containerd_runs_runc_under_systemd_cgroups_with_the_pinned_sandbox(host):
    assert host.service("containerd").is_running and host.service("containerd").is_enabled
    loaded = dump(host)
    assert "SystemdCgroup = true" in loaded
    assert 'sandbox_image = "registry.k8s.io/pause:3.10"' in loaded
    assert 'config_path = "/etc/containerd/certs.d"' in loaded
    # The CRI socket answers.
    assert "Server:" in host.check_output("ctr --address /run/containerd/containerd.sock version")


def test_the_toolkit_registers_the_nvidia_runtime_as_the_default(host):
    loaded = dump(host)
    state = record(host, "containerd")
    # The toolkit registered it through the containerd role, which wrote it into its config.toml.
    registration = host.file("/etc/ansible/facts.d/hpcml_containerd_runtime_nvidia.fact")
    assert json.loads(registration.content_string) == {"binary": "/usr/bin/nvidia-container-runtime", "default": True}
    assert f"[{CRI}.containerd.runtimes.nvidia]" in loaded
    assert 'BinaryName = "/usr/bin/nvidia-container-runtime"' in loaded
    assert 'default_runtime_name = "nvidia"' in loaded
    assert (state["runtimes"], state["default_runtime"], state["reason"]) == (["nvidia", "runc"], "nvidia", None)


def test_only_the_containerd_role_configures_containerd(host):
    # One config.toml, no drop-ins: containerd 1.6 lets a drop-in that names the CRI plugin replace its whole section.
    assert "imports" not in host.file("/etc/containerd/config.toml").content_string
    assert not host.file("/etc/containerd/conf.d").exists


def test_kubelet_prerequisites_hold_on_the_running_kernel(host):
    settings = host.file("/etc/sysctl.d/99-hpcml-kubernetes.conf").content_string
    for name in ("net.bridge.bridge-nf-call-iptables", "net.bridge.bridge-nf-call-ip6tables", "net.ipv4.ip_forward"):
        assert f"{name} = 1" in settings
        assert host.file(f"/proc/sys/{name.replace('.', '/')}").content_string.strip() == "1"
    assert host.file("/etc/modules-load.d/hpcml-kubernetes.conf").content_string.split() == ["overlay", "br_netfilter"]
    assert host.check_output("swapon --show --noheadings") == ""
    state = record(host, "kubernetes_node")
    assert state["steps"] == "run"
    # A container cannot load modules: said, with the kernel settings checked instead.
    if not host.file("/sys/module/br_netfilter").exists:
        assert "br_netfilter could not be loaded here" in state["reason"]


def test_no_kubelet_packages_without_a_cluster_to_join(host):
    assert installed_version(host, "kubelet") is None
    assert not host.file("/etc/apt/sources.list.d/kubernetes.sources").exists
