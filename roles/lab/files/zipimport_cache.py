"""Compiled code for Python sources imported from zip archives, kept by the source's hash: the lab's node image and the
control host's test venv only.

Every Ansible module run ships its module_utils in a fresh AnsiballZ zip, and zipimport compiles zipped sources on
every import (it neither reads nor writes bytecode for them): on a lab node that was about 85 ms of the 310 ms of CPU
a `command` task costs there. Nothing of a real cluster's nodes has this; build-image.sh puts it in the lab's image,
loaded by a .pth file into /usr/bin/python3 (a virtualenv does not read the system's dist-packages), and `make deps`
into the test venv, whose own folder it passes to install(): the unit suite's plays run their modules on this machine.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import stat
import sys
import types
import zipimport

# Root's module runs load what is kept here, so only root writes it and nothing is read from a folder anyone else
# could write to.
CACHE_DIR = f"/var/cache/hpcml-lab/zipimport/{sys.implementation.cache_tag}"


def trusted(directory: str) -> bool:
    try:
        found = os.stat(directory)
    except OSError:
        return False
    return (stat.S_ISDIR(found.st_mode) and found.st_uid == 0
            and not found.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def renamed(code: types.CodeType, filename: str) -> types.CodeType:
    """The kept code under this import's file name (each payload has its own path), which tracebacks show."""
    consts = tuple(renamed(c, filename) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def install(directory: str = CACHE_DIR) -> bool:
    """Put the cache in front of zipimport's compile, where this Python has one and the folder can be trusted."""
    compile_source = getattr(zipimport, "_compile_source", None)
    if compile_source is None or not trusted(directory):
        return False

    def cached(pathname: str, source: bytes) -> types.CodeType:
        path = os.path.join(directory, hashlib.sha256(source).hexdigest())
        try:
            with open(path, "rb") as file:
                return renamed(marshal.load(file), pathname)
        except (OSError, EOFError, ValueError, TypeError):
            pass
        code = compile_source(pathname, source)
        if os.geteuid() == 0:
            # Written whole, then renamed into place: two module runs at once never read half a file.
            part = f"{path}.{os.getpid()}"
            try:
                with open(part, "wb") as file:
                    marshal.dump(code, file)
                os.replace(part, path)
            except OSError:
                pass
        return code

    zipimport._compile_source = cached
    return True
