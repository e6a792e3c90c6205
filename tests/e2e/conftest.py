"""The lab end-to-end needs the lab running."""

import os
import subprocess
from pathlib import Path

import pytest

from lab import LAB_INVENTORY, LAB_VARS, PROJECT, run_site

# The image the lab inventory names (benchrunner_image): the MPIJob's, and the one the benchrunner role converts for a
# container runtime.
BENCHMARK_IMAGE = LAB_VARS["benchrunner_image"]


# The first module provisions the lab (first_run); the last takes a node away and builds it afresh, unprovisioned. The
# rest in file order, between them, on the lab the first left.
FIRST_MODULE = "test_site.py"
LAST_MODULE = "test_lab.py"
# Modules that run on this machine's podman alone (the benchmark image), not on the lab: `make e2e-image` runs them
# without one, and make test in its second lane, beside the lab's.
WITHOUT_LAB = {"test_mpijob_image.py"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {FIRST_MODULE: 0, LAST_MODULE: 2}
    items.sort(key=lambda item: rank.get(item.path.name, 1))


@pytest.fixture(autouse=True)
def lab_is_up(request: pytest.FixtureRequest) -> None:
    if request.node.path.name not in WITHOUT_LAB and not LAB_INVENTORY.is_file():
        pytest.fail("the lab is not up: run `make lab-up` (make e2e does)")


@pytest.fixture(scope="session")
def first_run():
    """site.yml whole on the lab from this checkout, once a session: test_site judges it, and every module that needs
    a provisioned lab starts from it. It is the e2e's one stretch that keeps both cores busy: make test starts the
    unit suite beside the e2e once it has ended, ok or not, which this fixture says by touching the file named by
    HPCML_E2E_PROVISIONED."""
    try:
        outcome = run_site()
    finally:
        if signal := os.environ.get("HPCML_E2E_PROVISIONED"):
            Path(signal).touch()
    assert outcome.ok, outcome.failures
    return outcome


@pytest.fixture(scope="session")
def provisioned(first_run) -> None:
    """The lab provisioned from this checkout (its benchrunner on the nodes). The modules that only run benchmarks on
    it share the first run instead of one provisioning run each (about 150 s apiece on 2 cores): test_site's tests
    that change the cluster by hand each put it back with a rerun of their own."""


@pytest.fixture(scope="session")
def benchmark_image() -> str:
    """The benchmark image built from this checkout, once a session: the MPIJob emulation runs it, and the frameworks
    campaign's container runs convert it for Charliecloud. `make image` builds one at a time, so where make test's
    other lane is building it this waits for that build and then finds every layer in podman's cache."""
    subprocess.run(["make", "--no-print-directory", "image", f"IMAGE={BENCHMARK_IMAGE}"], cwd=PROJECT, check=True,
                   capture_output=True)
    return BENCHMARK_IMAGE
