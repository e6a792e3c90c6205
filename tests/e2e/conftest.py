"""The lab end-to-end needs the lab running."""

import pytest

from lab import LAB_INVENTORY, run_site


@pytest.fixture(scope="session", autouse=True)
def lab_is_up() -> None:
    if not LAB_INVENTORY.is_file():
        pytest.fail("the lab is not up: run `make lab-up` (make e2e does)")


@pytest.fixture(scope="session")
def provisioned() -> None:
    """The lab provisioned from this checkout (its benchrunner on the nodes), once a session: the modules that only
    run benchmarks on it share one provisioning run instead of one each (about 150 s apiece on 2 cores)."""
    outcome = run_site(skip_tags="benchmark")
    assert outcome.ok, outcome.failures
