"""State the node layer and the MPI plumbing leave on every node."""

import json

CA_SUBJECT_CN = "hpcml molecule test CA"


def test_extra_ca_is_installed_and_trusted(host):
    cert = host.file("/usr/local/share/ca-certificates/hpcml-test-ca.crt")
    assert cert.exists
    assert cert.mode == 0o644
    # update-ca-certificates put it into the bundle every TLS client reads.
    pem = cert.content_string.strip()
    bundle = host.file("/etc/ssl/certs/ca-certificates.crt").content_string
    assert pem.splitlines()[1] in bundle
    check = host.run("openssl verify -CAfile /etc/ssl/certs/ca-certificates.crt %s", cert.path)
    assert check.rc == 0, check.stderr


def test_pip_uses_the_system_bundle(host):
    assert "cert = /etc/ssl/certs/ca-certificates.crt" in host.file("/etc/pip.conf").content_string


def test_hardware_summary_records_why_gpu_steps_skip(host):
    fact = json.loads(host.file("/etc/ansible/facts.d/hpcml_hardware.fact").content_string)
    assert fact["gpu_present"] is False
    assert fact["gpu_steps"] == "skip"
    assert "no NVIDIA GPU found on the PCI bus" in fact["gpu_skip_reason"]
    assert fact["rdma_steps"] == "skip"
    assert fact["rdma_skip_reason"]


def test_open_mpi_is_installed_with_site_parameters(host):
    assert host.package("openmpi-bin").is_installed
    assert "Open MPI" in host.run("mpirun --version").stdout
    params = host.file("/etc/openmpi/openmpi-mca-params.conf").content_string
    assert "btl_tcp_if_include = eth0" in params


def test_mpi_user_has_the_cluster_key(host):
    user = host.user("hpcbench")
    assert user.uid == 2001
    key = host.file("/home/hpcbench/.ssh/id_ed25519")
    assert key.user == "hpcbench"
    assert key.mode == 0o600
    assert host.file("/home/hpcbench/.ssh").mode == 0o700
    pub = host.file("/home/hpcbench/.ssh/id_ed25519.pub").content_string.split()[1]
    assert pub in host.file("/home/hpcbench/.ssh/authorized_keys").content_string


def test_known_hosts_pins_every_node(host):
    known = host.file("/etc/ssh/ssh_known_hosts").content_string
    for name in ("mol-node1", "mol-node2"):
        assert any(line.startswith(name) for line in known.splitlines()), name
    own_key = host.file("/etc/ssh/ssh_host_ed25519_key.pub").content_string.split()[1]
    assert own_key in known


def test_mpi_user_reaches_every_node_with_host_key_checking(host):
    for name in ("mol-node1", "mol-node2"):
        out = host.run("su - hpcbench -c 'ssh -o BatchMode=yes -o StrictHostKeyChecking=yes %s hostname'", name)
        assert out.rc == 0, out.stderr
        assert out.stdout.strip() == name


def test_mpirun_starts_ranks_on_both_nodes(host):
    out = host.run("su - hpcbench -c 'mpirun -np 2 -H mol-node1:1,mol-node2:1 hostname'")
    assert out.rc == 0, out.stderr
    assert sorted(out.stdout.split()) == ["mol-node1", "mol-node2"]


def test_only_the_current_cluster_key_is_authorized(host):
    authorized = [line for line in host.file("/home/hpcbench/.ssh/authorized_keys").content_string.splitlines()
                  if line.strip() and not line.startswith("#")]
    assert len(authorized) == 1
