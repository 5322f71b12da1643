"""``plait worker --processes N``: N serving processes under one supervising parent.

Each child is a ``plait worker --processes 1`` with the parent's other options; the
children share the mesh's partitions through the partition leases, as separate
workers on separate machines do, so one event loop per core serves runs. The parent
serves nothing itself. It

- forwards the first SIGINT or SIGTERM to every child as SIGTERM (each drains, as a
  single worker does) and waits for them; a second signal kills them;
- starts a child again when it dies while the pool is serving (after a pause that
  doubles while children keep dying young, up to :data:`MAX_RESTART_DELAY_S`); its
  partitions' leases expire and the others take them over meanwhile;
- stops every child and exits 2 when one exits 2 (bad options: another try would
  fail the same way);
- exits 0 once every child has drained after a signal, 1 if one failed to.

The children start in a process group of their own, so a terminal's Ctrl-C reaches
them only through the parent, once. On Linux each child is also killed when the parent
dies (``PR_SET_PDEATHSIG``): a SIGKILLed pool leaves no serving orphans behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import FrameType

import typer
from typer._click.core import ParameterSource  # typer >= 0.29 carries its own click
from typer.core import TyperOption

PARENT_ENV = "PLAIT_WORKER_PARENT"
"""Set in a pool child's environment to the parent's pid."""

MIN_RESTART_DELAY_S = 0.5
MAX_RESTART_DELAY_S = 30.0
STEADY_S = 60.0
"""A child that served this long before it died is restarted at once."""

EXIT_USAGE = 2
"""A child's exit code for bad options: the pool stops rather than restart it."""

_PR_SET_PDEATHSIG = 1


def default_processes() -> int:
    """The cores this process may run on (the default of ``--processes``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def bind_to_parent() -> None:
    """In a pool child: die with the parent (Linux), or at once if it is gone already."""
    parent = os.environ.get(PARENT_ENV)
    if not parent:
        return
    if sys.platform.startswith("linux"):
        import ctypes  # here: a single worker does not load it
        import ctypes.util

        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if str(os.getppid()) != parent:  # it died before the line above took effect
        os._exit(1)


def child_args(ctx: typer.Context) -> list[str]:
    """The options the user gave ``ctx``'s command on its command line, as arguments.

    Options set by environment variables reach the children through their environment;
    ``--processes`` is left out (each child gets ``--processes 1``).
    """
    args: list[str] = []
    for param in ctx.command.params:
        if not isinstance(param, TyperOption) or param.name in (None, "processes"):
            continue
        if ctx.get_parameter_source(param.name) != ParameterSource.COMMANDLINE:
            continue
        value = ctx.params[param.name]
        if param.is_flag:
            names = param.opts if value else param.secondary_opts
            if names:
                args.append(names[0])
        elif value is not None:
            args += [param.opts[0], str(value)]
    return args


@dataclass
class _Child:
    """One slot of the pool and the process serving it."""

    slot: int
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    failures: int = 0
    due: float = 0.0


@dataclass
class Pool:
    """Supervises ``count`` children started by ``argv_of(slot)``.

    Attributes:
        count: how many children serve at once.
        argv_of: the command line of the child in a slot.
        say: prints one line for the user.
    """

    count: int
    argv_of: Callable[[int], Sequence[str]]
    say: Callable[[str], None]
    signals: int = 0
    exit_code: int = 0
    children: list[_Child] = field(default_factory=list)

    def run(self) -> int:
        """Serve until a signal, then drain; the exit code (see the module docstring)."""
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            self.children = [_Child(slot) for slot in range(self.count)]
            for child in self.children:
                self._start(child)
            self.say(
                f"supervising {self.count} worker processes: "
                + ", ".join(str(c.proc.pid) for c in self.children if c.proc)
            )
            while self._live() or not (self.signals or self.exit_code):
                self._reap(self._wait())
                if not (self.signals or self.exit_code):
                    self._restart_due()
            return self.exit_code
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _start(self, child: _Child) -> None:
        env = {**os.environ, PARENT_ENV: str(os.getpid())}
        child.proc = subprocess.Popen(list(self.argv_of(child.slot)), env=env, process_group=0)
        child.started = time.monotonic()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.signals += 1
        if self.signals == 1:
            self.say(f"{signal.Signals(signum).name}: draining {self._live()} worker processes…")
        self._send(signal.SIGTERM if self.signals == 1 else signal.SIGKILL)

    def _send(self, sig: signal.Signals) -> None:
        for child in self.children:
            if child.proc is not None:
                with contextlib.suppress(ProcessLookupError):
                    child.proc.send_signal(sig)

    def _live(self) -> int:
        return sum(c.proc is not None for c in self.children)

    def _wait(self) -> tuple[int, int] | None:
        """The next child to end (pid, wait status), or None when a restart is due first."""
        pending = [c.due for c in self.children if c.proc is None]
        if pending and not self.signals and self.exit_code == 0:
            timeout = max(0.0, min(pending) - time.monotonic())
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:  # a blocking wait cannot time out
                pid, status = os.waitpid(-1, os.WNOHANG)
                if pid:
                    return pid, status
                time.sleep(min(0.05, timeout))
            return None
        try:
            return os.waitpid(-1, 0)
        except ChildProcessError:
            return None

    def _reap(self, ended: tuple[int, int] | None) -> None:
        if ended is None:
            return
        pid, status = ended
        child = next((c for c in self.children if c.proc and c.proc.pid == pid), None)
        if child is None or child.proc is None:
            return
        code = os.waitstatus_to_exitcode(status)
        child.proc.returncode = code  # reaped here: Popen must not wait for it again
        child.proc = None
        if self.signals:
            if code != 0:
                self.say(f"worker process {pid} exited {code} while draining")
                self.exit_code = self.exit_code or 1
            return
        if code == EXIT_USAGE:
            self.say(f"worker process {pid} exited {code}: stopping the others")
            self.exit_code = EXIT_USAGE
            self._send(signal.SIGTERM)
            return
        lived = time.monotonic() - child.started
        child.failures = 0 if lived >= STEADY_S else child.failures + 1
        delay = 0.0 if not child.failures else _delay(child.failures)
        child.due = time.monotonic() + delay
        self.say(f"worker process {pid} exited {code}; starting another in {delay:g} s")

    def _restart_due(self) -> None:
        now = time.monotonic()
        for child in self.children:
            if child.proc is None and child.due <= now:
                self._start(child)
                assert child.proc is not None
                self.say(f"worker process {child.proc.pid} started")


def _delay(failures: int) -> float:
    """The pause before starting a child again after ``failures`` early deaths in a row."""
    return float(min(MAX_RESTART_DELAY_S, MIN_RESTART_DELAY_S * 2 ** (failures - 1)))


def child_argv(args: Sequence[str], metrics_port: int | None) -> Callable[[int], list[str]]:
    """The command line of each pool child: ``plait worker ARGS --processes 1``; with
    ``metrics_port``, child ``i`` serves its metrics on ``metrics_port + i``."""

    def argv(slot: int) -> list[str]:
        extra = [] if not metrics_port else ["--metrics-port", str(metrics_port + slot)]
        return [sys.executable, "-m", "plait.cli", "worker", *args, *extra, "--processes", "1"]

    return argv


__all__ = ["PARENT_ENV", "Pool", "bind_to_parent", "child_args", "child_argv", "default_processes"]
