# -*- coding: utf-8 -*-
# Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
name: redact_userinfo
short_description: URLs with their user and password replaced, in a string or anything holding strings
description:
  - Replaces the userinfo of every URL (C(https://user:password@mirror/) becomes C(https://***@mirror/)) in a
    string, or in every string of a list or mapping, keys included, however deep. Anything else is returned as is.
  - Used wherever a URL is recorded (local facts, results, messages), so a mirror's credentials reach none of them.
positional: _input
options:
  _input:
    description: A string, or a list or mapping holding strings.
    type: raw
    required: true
author: hpcml maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Record a repository without its credentials
  ansible.builtin.copy:
    content: "{{ {'url': repo_url} | hpcml.cluster.redact_userinfo | to_nice_json }}"
    dest: /etc/ansible/facts.d/example.fact
    mode: "0644"
"""

RETURN = r"""
_value:
  description: The input with the userinfo of every URL in it replaced by C(***).
  type: raw
"""

import re
from typing import Any

# scheme://userinfo@ : the userinfo runs to the last '@' before the host, and holds no '/', '?', '#' or whitespace.
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#\s]*@")
REDACTED = "***"


def redact_userinfo(value: Any) -> Any:
    if isinstance(value, str):
        return _USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", value)
    if isinstance(value, dict):
        return {redact_userinfo(k): redact_userinfo(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_userinfo(v) for v in value]
    return value


class FilterModule:
    def filters(self):
        return {"redact_userinfo": redact_userinfo}
