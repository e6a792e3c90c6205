"""The lab end-to-end needs the lab running."""

import pytest

from lab import LAB_INVENTORY


@pytest.fixture(scope="session", autouse=True)
def lab_is_up() -> None:
    if not LAB_INVENTORY.is_file():
        pytest.fail("the lab is not up: run `make lab-up` (make e2e does)")
