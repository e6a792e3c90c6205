# -*- coding: utf-8 -*-
# Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
name: tree_digest
short_description: One SHA-256 over the files under some paths on the control host
description:
  - Hashes every regular file under the given files and folders, in sorted order, by its path relative to the
    term it was found under and its content; returns one hex digest for all the terms together.
  - Python's byte code (C(__pycache__), C(*.pyc)), packaging metadata (C(*.egg-info)) and Markdown (C(*.md), the
    roles' READMEs) are left out, since they change without what they describe changing.
  - A term that does not exist is hashed as missing, so creating it later changes the digest.
options:
  _terms:
    description: Files or folders on the control host.
    type: list
    elements: path
    required: true
author: hpcml maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: What the project's roles hold now
  ansible.builtin.debug:
    msg: "{{ lookup('hpcml.cluster.tree_digest', playbook_dir ~ '/roles', playbook_dir ~ '/site.yml') }}"
"""

RETURN = r"""
_raw:
  description: One hex SHA-256 digest.
  type: list
  elements: str
"""

import hashlib
import os

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

_SKIPPED_DIRS = ("__pycache__",)
_SKIPPED_SUFFIXES = (".pyc", ".egg-info", ".md")


def _files(top: str) -> list[str]:
    if not os.path.isdir(top):
        return [top]
    found = []
    for folder, dirs, names in os.walk(top):
        dirs[:] = [d for d in dirs if d not in _SKIPPED_DIRS and not d.endswith(_SKIPPED_SUFFIXES)]
        found.extend(os.path.join(folder, name) for name in names if not name.endswith(_SKIPPED_SUFFIXES))
    return sorted(found)


def tree_digest(terms: list[str]) -> str:
    digest = hashlib.sha256()
    for term in terms:
        digest.update(b"term\0")
        if not os.path.exists(term):
            digest.update(b"missing\0")
            continue
        for path in _files(term):
            if not os.path.isfile(path):
                continue
            digest.update(os.fsencode(os.path.relpath(path, term)) + b"\0")
            try:
                with open(path, "rb") as handle:
                    digest.update(hashlib.sha256(handle.read()).digest())
            except OSError as error:
                raise AnsibleLookupError(f"cannot read {path}: {error.strerror}") from error
    return digest.hexdigest()


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        paths = [path for term in terms for path in (term if isinstance(term, list) else [term])]
        return [tree_digest([str(path) for path in paths])]
