"""A scratch GnuPG home for tests that make signing keys: gpg runs in it in batch mode, and the gpg-agent that key
generation starts is stopped when the test is done (left running, every unit run added two daemons to the machine)."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path


@contextlib.contextmanager
def gpg_home(home: Path) -> Iterator[Callable[..., subprocess.CompletedProcess]]:
    """Yields gpg(*args), run with --batch --homedir home (made 0700), raising on failure; text=False returns bytes."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)

    def gpg(*args: str, text: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(["gpg", "--batch", "--homedir", str(home), *args], capture_output=True, text=text,
                              check=True)
    try:
        yield gpg
    finally:
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "gpg-agent"], capture_output=True, check=False)
