"""A pool of warm sandbox processes: one program per process, refilled in the background.

Starting an interpreter under bubblewrap costs hundreds of milliseconds; a program call
should not. The pool starts one zygote (:mod:`.zygote`, restarted if it dies) and keeps
``size`` children forked from it and ready (limits applied, audit hook installed),
hands each to exactly one program and never back (no state can leak from one program
to the next: each is a fresh fork of the zygote's clean image), and a background thread
forks the next one meanwhile. The thread and the processes belong to no event loop, so
one pool serves every loop of the process.

:func:`default_pool` is the process's pool, made on first use; :func:`warm_pool` is
what a serving process enters for its lifetime (the pool fills from its first program
and is closed when the last such block ends). ``PLAIT_PROGRAM_SANDBOX`` picks the isolation:
``auto`` (the default: bubblewrap where it runs, else the weaker mode, logged),
``bwrap`` (refuse to run programs without it) or ``rlimits``.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import logging
import os
import threading
from collections.abc import Iterator

import anyio.to_thread

from plait.errors import ConfigError
from plait.programs.sandbox.process import Isolation, SandboxLimits, bwrap_usable
from plait.programs.sandbox.zygote import SandboxProcess, Zygote

log = logging.getLogger(__name__)

SANDBOX_ENV = "PLAIT_PROGRAM_SANDBOX"
"""Picks the isolation of program texts: ``auto``, ``bwrap`` or ``rlimits``."""


def choose_isolation(wanted: str | None = None) -> Isolation:
    """The isolation ``wanted`` (``PLAIT_PROGRAM_SANDBOX`` by default, ``auto`` unset).

    Raises:
        ConfigError: an unknown choice, or ``bwrap`` asked for where it cannot run.
    """
    choice = (wanted or os.environ.get(SANDBOX_ENV) or "auto").strip().lower()
    if choice not in ("auto", "bwrap", "rlimits"):
        raise ConfigError(f"{SANDBOX_ENV}={choice!r}: use auto, bwrap or rlimits")
    if choice == "rlimits":
        log.warning(
            "program sandbox: the weaker rlimits mode was chosen (%s=rlimits): program texts "
            "run with resource limits, a scrubbed environment and an audit hook, without "
            "bubblewrap's file-system, process and network isolation",
            SANDBOX_ENV,
        )
        return "rlimits"
    why = bwrap_usable()
    if why is None:
        return "bwrap"
    if choice == "bwrap":
        raise ConfigError(f"{SANDBOX_ENV}=bwrap, but {why}")
    log.warning(
        "program sandbox: %s; program texts run in the weaker rlimits mode (resource limits, "
        "a scrubbed environment and an audit hook, no file-system, process or network "
        "isolation): install bubblewrap to isolate them",
        why,
    )
    return "rlimits"


class SandboxPool:
    """Warm sandbox processes, each leased to one program.

    The pool fills once :meth:`start` is called, or from its second program on (its
    first in a serving process, see :func:`warm_pool`); until then each program starts
    its own process.

    Args:
        size: how many ready processes to keep.
        limits: every process's limits.
        isolation: how they are isolated (default: :func:`choose_isolation`).
    """

    def __init__(
        self,
        size: int = 2,
        limits: SandboxLimits | None = None,
        isolation: Isolation | None = None,
    ) -> None:
        if size < 0:
            raise ConfigError(f"a sandbox pool keeps 0 or more processes, not {size}")
        self.size = size
        self.limits = limits or SandboxLimits()
        self._isolation = isolation
        self._ready: collections.deque[SandboxProcess] = collections.deque()
        self._spent: collections.deque[SandboxProcess] = collections.deque()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._acquired = 0
        self._fill_from = 2
        self._thread: threading.Thread | None = None
        self._zygote: Zygote | None = None
        self._zygote_lock = threading.Lock()

    @property
    def isolation(self) -> Isolation:
        """How this pool's processes are isolated (chosen on first use)."""
        if self._isolation is None:
            self._isolation = choose_isolation()
        return self._isolation

    @property
    def warm(self) -> int:
        """How many processes are ready now."""
        return len(self._ready)

    @property
    def zygote(self) -> Zygote | None:
        """The zygote its processes are forked from (None before the first)."""
        return self._zygote

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def start(self) -> None:
        """Start filling the pool in the background (idempotent)."""
        with self._lock:
            if self._closed or self._thread is not None or self.size == 0:
                return
            self._thread = threading.Thread(
                target=self._fill, name="plait-sandbox-pool", daemon=True
            )
            self._thread.start()

    async def acquire(self) -> SandboxProcess:
        """A ready process for one program: a warm one, or one started now.

        Raises:
            ProgramError: no process could be started.
            ConfigError: the pool is closed.
        """
        if self._closed:
            raise ConfigError("the program sandbox pool is closed")
        self._acquired += 1
        if self._acquired >= self._fill_from:
            # A process that runs programs again and again gets warm ones; a one-shot
            # command (plait exec) does not start processes it will never use.
            self.start()
        with self._lock:
            proc = self._ready.popleft() if self._ready else None
        if proc is None or len(self._ready) == 0:
            self._wake.set()  # running low: refill now, not only once a program ends
        if proc is not None and proc.alive():
            return proc
        if proc is not None:
            proc.close()
        return await anyio.to_thread.run_sync(self.spawn)

    def release(self, proc: SandboxProcess) -> None:
        """End ``proc`` after its one program: in the background, off the caller's way."""
        with self._lock:
            background = self._thread is not None and not self._closed
            if background:
                self._spent.append(proc)
        if background:
            self._wake.set()
        else:
            proc.close()

    def spawn(self) -> SandboxProcess:
        """Fork one process now, bypassing the warm ones (blocking); the zygote is started
        first if there is none, or restarted if it died.

        Raises:
            ProgramError: the zygote or its child did not start.
            ConfigError: the pool is closed.
        """
        with self._zygote_lock:
            if self._closed:
                raise ConfigError("the program sandbox pool is closed")
            if self._zygote is None or not self._zygote.alive():
                if self._zygote is not None:
                    log.warning("program sandbox: the zygote ended; starting another")
                    self._zygote.close()
                self._zygote = Zygote(self.limits, self.isolation)
            zygote = self._zygote
        return zygote.fork()

    def close(self) -> None:
        """Stop refilling and end the warm processes (leased ones end with their program)."""
        with self._lock:
            self._closed = True
            ready, self._ready = list(self._ready), collections.deque()
            ready += self._spent
            self._spent = collections.deque()
        self._wake.set()
        for proc in ready:
            proc.close()
        with self._zygote_lock:
            zygote, self._zygote = self._zygote, None
        if zygote is not None:
            zygote.close()
        # The filling thread is not joined: one it is starting it closes itself when it
        # sees the pool closed, and at exit its process ends on its channel's EOF.

    def _fill(self) -> None:
        while not self._closed:
            with self._lock:
                spent = list(self._spent)
                self._spent.clear()
                short = self.size - len(self._ready)
            for used in spent:
                used.close()
            if short <= 0:
                self._wake.wait()
                self._wake.clear()
                continue
            try:
                proc = self.spawn()
            except ConfigError:
                return  # closed meanwhile
            except Exception:  # logged; the next acquire starts one itself and says why
                if self._closed:
                    return  # its zygote was ended by close()
                log.exception("program sandbox: a warm process failed to start")
                self._wake.wait()
                self._wake.clear()
                continue
            with self._lock:
                kept = not self._closed
                if kept:
                    self._ready.append(proc)
            if not kept:
                proc.close()


_default: SandboxPool | None = None
_default_lock = threading.Lock()
_holders = 0


def default_pool() -> SandboxPool:
    """The process's sandbox pool, made (not yet warm) on first use."""
    global _default
    with _default_lock:
        if _default is None or _default.closed:
            _default = SandboxPool()
        return _default


@contextlib.contextmanager
def warm_pool() -> Iterator[SandboxPool]:
    """The process's pool for a serving process's block: it fills from the block's first
    program (a server that never runs one starts no process), and is closed when the
    last such block ends."""
    global _holders
    pool = default_pool()
    pool._fill_from = 1
    with _default_lock:
        _holders += 1
    try:
        yield pool
    finally:
        with _default_lock:
            _holders -= 1
            last = _holders == 0
        if last:
            pool.close()


@contextlib.contextmanager
def use_pool(pool: SandboxPool) -> Iterator[SandboxPool]:
    """Make ``pool`` the process's pool for the block (one of chosen limits or isolation),
    then close it and put the previous one back."""
    global _default
    with _default_lock:
        previous, _default = _default, pool
    try:
        yield pool
    finally:
        pool.close()
        with _default_lock:
            _default = previous


@atexit.register
def _close_default() -> None:
    if _default is not None:
        _default.close()


__all__ = [
    "SANDBOX_ENV",
    "SandboxPool",
    "choose_isolation",
    "default_pool",
    "use_pool",
    "warm_pool",
]
