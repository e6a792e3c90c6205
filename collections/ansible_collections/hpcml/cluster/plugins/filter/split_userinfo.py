# -*- coding: utf-8 -*-
# Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
name: split_userinfo
short_description: A URL's user and password apart from the URL, for files that keep logins out of world-readable config
description:
  - Splits C(https://user:password@mirror/path/) into the URL without its userinfo (C(https://mirror/path/)), the user
    and the password (percent-decoded, as a server receives them), and the C(machine) token that apt's auth.conf.d
    files match the URL with.
  - The userinfo runs to the last C(@) of the authority, so a password holding an unencoded C(@) still splits right.
  - A URL without userinfo comes back unchanged with an empty user and password.
positional: _input
options:
  _input:
    description: A URL.
    type: str
    required: true
author: hpcml maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: The repository's login, for apt
  ansible.builtin.copy:
    content: "machine {{ login.machine }} login {{ login.username }} password {{ login.password }}\n"
    dest: /etc/apt/auth.conf.d/example.conf
    mode: "0600"
  vars:
    login: "{{ repo_url | hpcml.cluster.split_userinfo }}"
  no_log: true
"""

RETURN = r"""
_value:
  description: The parts of the URL.
  type: dict
  contains:
    url:
      description: The URL without its userinfo, otherwise as given.
    username:
      description: The user, percent-decoded; empty when the URL has none.
    password:
      description: The password, percent-decoded; empty when the URL has none.
    machine:
      description: >-
        C(scheme://host[:port]/path) of the URL (no query or fragment): apt_auth.conf(5)'s machine token, which
        matches this URL and every URL under its path. The scheme is always written because apt (2.0 and later)
        applies an entry without one to https only.
"""

from urllib.parse import unquote, urlsplit, urlunsplit

from ansible.errors import AnsibleFilterError


def split_userinfo(url: str) -> dict:
    if not isinstance(url, str):
        raise AnsibleFilterError(f"split_userinfo takes a URL string, not {type(url).__name__}")
    parts = urlsplit(url)
    userinfo, at, hostport = parts.netloc.rpartition("@")
    username, _colon, password = userinfo.partition(":")
    bare = parts._replace(netloc=hostport) if at else parts
    return {"url": urlunsplit(bare) if at else url, "username": unquote(username), "password": unquote(password),
            "machine": urlunsplit(bare._replace(query="", fragment=""))}


class FilterModule:
    def filters(self):
        return {"split_userinfo": split_userinfo}
