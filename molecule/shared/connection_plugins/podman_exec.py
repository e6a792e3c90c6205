"""Molecule's connection to its podman nodes: containers.podman's podman connection, pipelined.

containers.podman 1.18.0's connection runs five `podman exec` calls and a `podman mount` for each task (home, temporary
folder, chmod, the module, cleanup) and declares it cannot pipeline, since it never passes `-i`. Passing `-i` when a
module goes over stdin makes one `podman exec` a task: on the 2-core CI machine a 42-task play on a lab node took
24 s this way against 54 s. The node is mounted only when a file is copied.

Where podman runs the container with runc, a task's command goes to `runc exec` itself, which is what podman exec
hands it to (through conmon) after its own bookkeeping: the container's process settings, namespaces and cgroups are
the same, and one call cost 57 ms of CPU against podman exec's 220 ms on that machine (podman 4.3.1, runc 1.1.5).
podman is asked the container's ID and runtime once per host and playbook run."""

from __future__ import annotations

import os
import shlex
import subprocess

from ansible import constants as C
from ansible.module_utils.common.process import get_bin_path
from ansible.module_utils.common.text.converters import to_bytes, to_native
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
  runc_root:
    description: Where runc keeps the state of rootful podman's containers (runc's own default for root).
    default: /run/runc
    vars:
      - name: ansible_podman_runc_root
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

    def _runc_id(self) -> str | None:
        """The container's ID where runc runs it and keeps its state under runc_root; else None (podman exec then).
        Kept in the playbook run's local temporary folder, which its workers share, and asked again once runc has no
        state for it (the container was made again)."""
        root = self.get_option("runc_root")
        kept = os.path.join(C.DEFAULT_LOCAL_TMP, f"podman_exec-{self._container_id}")
        try:
            with open(kept, encoding="utf-8") as file:
                container = file.read()
        except OSError:
            container = ""
        if not container or not os.path.isfile(os.path.join(root, container, "state.json")):
            rc, out, _ = self._podman(["inspect", "--format", "{{.Id}} {{.OCIRuntime}}"])
            found = to_native(out).split() if rc == 0 else []
            if len(found) != 2 or found[1] != "runc" or not os.path.isfile(os.path.join(root, found[0], "state.json")):
                return None
            container = found[0]
            with open(kept, "w", encoding="utf-8") as file:
                file.write(container)
        return container

    def exec_command(self, cmd, in_data=None, sudoable=False):
        ConnectionBase.exec_command(self, cmd, in_data=in_data, sudoable=sudoable)
        argv = shlex.split(to_native(cmd, errors="surrogate_or_strict"))
        container = None if self.user else self._runc_id()
        if container is None:
            args = ["exec", "-i"] if in_data is not None else ["exec"]
            if self.user:
                args.extend(("--user", self.user))
            return self._podman(args, argv, in_data)
        local_cmd = [get_bin_path("runc"), "--root", self.get_option("runc_root"), "exec", container, *argv]
        # Without a module on stdin the command reads none, as podman exec without -i gives it none.
        stdin = {"input": in_data} if in_data is not None else {"stdin": subprocess.DEVNULL}
        process = subprocess.run([to_bytes(arg, errors="surrogate_or_strict") for arg in local_cmd], **stdin,
                                 capture_output=True, check=False)
        return process.returncode, process.stdout, process.stderr

    def put_file(self, in_path, out_path):
        self._mount()
        super().put_file(in_path, out_path)

    def fetch_file(self, in_path, out_path):
        self._mount()
        super().fetch_file(in_path, out_path)
