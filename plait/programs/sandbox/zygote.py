"""The serving side of a zygote: one sandbox process that forks a fresh child per program.

Starting an interpreter (under bubblewrap) costs hundreds of milliseconds on a loaded
machine; forking one that is already up costs a few. A pool starts one zygote
(:func:`~plait.programs.sandbox.process.start_zygote`: the isolation that covers the
whole sandbox, the stub's standard modules imported) and asks it for children. Each
child is a fresh fork of the zygote's clean image, which never runs program code: it
makes its own empty workspace, lowers its limits, drops to ``nobody`` where the serving
process is root, installs the audit hook, says ready and runs exactly one program.

The control channel carries one JSON message each way per event: ``fork`` (here to
there), ``forked`` with the child's channel as an ``SCM_RIGHTS`` fd, ``exited`` with its
exit code, ``kill``. A thread reads it, so a child's end is known without polling.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import shutil
import signal
import socket
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plait.errors import ProgramError
from plait.programs.sandbox.process import HEADER, Isolation, SandboxLimits, start_zygote

log = logging.getLogger(__name__)

READY_SECONDS = 30.0
"""How long a zygote or a child may take to say ready."""


@dataclass
class SandboxProcess:
    """A forked child that said ready, waiting for its one program.

    Attributes:
        zygote: the zygote it was forked from (which reaps it and may kill it).
        pid: its pid as the zygote sees it.
        sock: the serving process's end of its channel.
        workspace: its workspace as this process sees it (removed when it is closed).
        isolation: how it is isolated.
    """

    zygote: Zygote
    pid: int
    sock: socket.socket
    workspace: Path
    isolation: Isolation
    _closed: bool = field(default=False, repr=False)

    def alive(self) -> bool:
        """Whether it has not ended (nor its zygote)."""
        return self.zygote.alive() and self.zygote.exit_code(self.pid) is None

    def wait(self, timeout: float) -> int | None:
        """Its exit code once it ended (negative: the signal that ended it), or None."""
        return self.zygote.wait_exit(self.pid, timeout)

    def close(self) -> None:
        """Kill it, close its channel, drop its workspace."""
        if self._closed:
            return
        self._closed = True
        self.zygote.kill(self.pid)
        self.sock.close()
        shutil.rmtree(self.workspace, ignore_errors=True)


class Zygote:
    """A started zygote, ready to fork children (see the module's docstring).

    Args:
        limits: its children's limits.
        isolation: how it (and so each child) is isolated.

    Raises:
        ProgramError: it did not start or did not say ready.
    """

    def __init__(self, limits: SandboxLimits, isolation: Isolation) -> None:
        self.isolation = isolation
        self.popen, self.control, self.root = start_zygote(limits, isolation)
        self._forked: queue.Queue[tuple[dict[str, Any], int | None] | None] = queue.Queue()
        self._exits: dict[int, int] = {}
        self._forgotten: set[int] = set()
        self._changed = threading.Condition()
        self._send_lock = threading.Lock()
        self._fork_lock = threading.Lock()
        self._dead = False
        self._names = 0
        try:
            self.control.settimeout(READY_SECONDS)
            ready = json.loads(self.control.recv(65536) or b"{}")
            self.control.settimeout(None)
        except (OSError, ValueError) as exc:
            self.close()
            raise ProgramError(f"the program sandbox ({isolation}) did not start: {exc}") from None
        if ready.get("op") != "ready":
            code = self.popen.poll()
            self.close()
            raise ProgramError(
                f"the program sandbox ({isolation}) did not start"
                + (f" (it exited with {code})" if code is not None else "")
            )
        threading.Thread(target=self._read, name="plait-sandbox-zygote", daemon=True).start()

    def alive(self) -> bool:
        """Whether it still answers (a dead one is replaced by its pool)."""
        return not self._dead and self.popen.poll() is None

    def fork(self) -> SandboxProcess:
        """A fresh child, ready for one program (blocking).

        Raises:
            ProgramError: the zygote is gone, or the child did not say ready.
        """
        with self._fork_lock:
            self._names += 1
            name = str(self._names)
            self._send({"op": "fork", "name": name})
            while True:
                try:
                    item = self._forked.get(timeout=READY_SECONDS)
                except queue.Empty:
                    item = None
                if item is None or item[0].get("name") == name:
                    break
                if item[1] is not None:  # a late answer to a fork that timed out
                    os.close(item[1])
        if item is None or item[1] is None:
            self._dead = True
            raise ProgramError(f"the program sandbox ({self.isolation}) did not fork a process")
        frame, fd = item
        proc = SandboxProcess(
            self, int(frame["pid"]), socket.socket(fileno=fd), self.root / name, self.isolation
        )
        try:
            _await_ready(proc)
        except BaseException:
            proc.close()
            raise
        return proc

    def exit_code(self, pid: int) -> int | None:
        """The child's exit code if it ended, else None."""
        with self._changed:
            return self._exits.get(pid)

    def wait_exit(self, pid: int, timeout: float) -> int | None:
        """Wait up to ``timeout`` s for the child's end: its exit code, or None."""
        with self._changed:
            self._changed.wait_for(lambda: pid in self._exits or self._dead, timeout)
            return self._exits.get(pid)

    def kill(self, pid: int) -> None:
        """End the child (done with it: its exit code is forgotten)."""
        with self._changed:
            if self._exits.pop(pid, None) is None:
                self._forgotten.add(pid)
        try:
            self._send({"op": "kill", "pid": pid})
        except (OSError, ProgramError):
            pass  # the zygote is gone: so are its children (its session is killed)

    def close(self) -> None:
        """End the zygote and every child it forked; drop their workspaces."""
        self._dead = True
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.control.close()
        try:
            self.popen.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILLed: it ends
            log.warning("program sandbox: zygote %d outlived SIGKILL", self.popen.pid)
        shutil.rmtree(self.root, ignore_errors=True)

    def _send(self, frame: dict[str, Any]) -> None:
        with self._send_lock:
            if self._dead:
                raise ProgramError(f"the program sandbox ({self.isolation}) has ended")
            self.control.send(json.dumps(frame).encode())

    def _read(self) -> None:
        while True:
            try:
                message, fds, _, _ = socket.recv_fds(self.control, 65536, 1)
            except OSError:
                message, fds = b"", []
            if not message:
                break
            frame = json.loads(message)
            if frame.get("op") == "forked":
                self._forked.put((frame, fds[0] if fds else None))
                continue
            for fd in fds:
                os.close(fd)
            if frame.get("op") == "exited":
                with self._changed:
                    pid = int(frame["pid"])
                    if pid in self._forgotten:
                        self._forgotten.discard(pid)
                    else:
                        self._exits[pid] = int(frame["code"])
                    self._changed.notify_all()
        with self._changed:
            self._dead = True
            self._changed.notify_all()
        self._forked.put(None)


def _await_ready(proc: SandboxProcess) -> None:
    proc.sock.settimeout(READY_SECONDS)
    try:
        header = proc.sock.recv(HEADER.size, socket.MSG_WAITALL)
        size = HEADER.unpack(header)[0] if len(header) == HEADER.size else 0
        body = proc.sock.recv(size, socket.MSG_WAITALL) if 0 < size < 4096 else b""
        ready = json.loads(body) if body else {}
    except (OSError, ValueError) as exc:
        raise ProgramError(f"the program sandbox ({proc.isolation}) did not start: {exc}") from None
    if ready.get("op") != "ready":
        code = proc.wait(timeout=1)
        raise ProgramError(
            f"the program sandbox ({proc.isolation}) did not start"
            + (f" (it exited with {code})" if code is not None else "")
        )
    proc.sock.settimeout(None)
    proc.sock.setblocking(False)


__all__ = ["SandboxProcess", "Zygote"]
