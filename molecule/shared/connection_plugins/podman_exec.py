"""Molecule's connection to its podman nodes: containers.podman's podman connection, pipelined.

containers.podman 1.18.0's connection runs five `podman exec` calls and a `podman mount` for each task (home, temporary
folder, chmod, the module, cleanup) and declares it cannot pipeline, since it never passes `-i`. Passing `-i` when a
module goes over stdin makes one `podman exec` a task: on the 2-core CI machine a 42-task play on a lab node took
24 s this way against 54 s. The node is mounted only when a file is copied."""

from __future__ import annotations

import shlex

from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.connection import ConnectionBase

from ansible_collections.containers.podman.plugins.connection.podman import Connection as PodmanConnection

DOCUMENTATION = """
name: podman_exec
short_description: Run tasks in a podman container with one pipelined podman exec each
description:
  - containers.podman.podman with pipelining; the container is mounted when a file is copied, not for every task.
author: hpcml
extends_documentation_fragment: [connection_pipelining]
options:
  remote_addr:
    description: The container's name or ID.
    default: inventory_hostname
    vars:
      - name: inventory_hostname
      - name: ansible_host
      - name: ansible_podman_host
  remote_user:
    description: The user commands run as in the container.
    vars:
      - name: ansible_user
  podman_extra_args:
    description: Extra arguments to podman itself.
    default: ''
    vars:
      - name: ansible_podman_extra_args
  podman_executable:
    description: The podman executable.
    default: podman
    vars:
      - name: ansible_podman_executable
"""


class Connection(PodmanConnection):
    # A podman connection to the action plugins that ask (ansible.posix.synchronize runs rsync over `podman exec`).
    transport = "podman"
    has_pipelining = True

    def _connect(self):
        self._connected = True
        return self

    def _mount(self) -> None:
        if self._mount_point is None:
            PodmanConnection._connect(self)

    def exec_command(self, cmd, in_data=None, sudoable=False):
        ConnectionBase.exec_command(self, cmd, in_data=in_data, sudoable=sudoable)
        args = ["exec", "-i"] if in_data is not None else ["exec"]
        if self.user:
            args.extend(("--user", self.user))
        return self._podman(args, shlex.split(to_native(cmd, errors="surrogate_or_strict")), in_data)

    def put_file(self, in_path, out_path):
        self._mount()
        super().put_file(in_path, out_path)

    def fetch_file(self, in_path, out_path):
        self._mount()
        super().fetch_file(in_path, out_path)
