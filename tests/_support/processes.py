"""Child processes of a test (``plait worker`` mostly): started with their output in a
log file the test reads while they run, stopped by SIGTERM or SIGKILL, always reaped.

One helper for every test that runs workers, so that each waits on a child the same
way, with deadlines stretched by :func:`tests._support.timing.scaled` on a busy machine.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from tests._support.timing import scaled

STOP_S = 15.0
"""How long a SIGTERMed child has to drain and exit on a quiet machine."""


class LoggedProcess:
    """A child process whose stdout and stderr go to one log file (stdout to nowhere
    with ``stdout=False``)."""

    def __init__(
        self,
        argv: Sequence[str],
        log: Path,
        *,
        cwd: Path | str | None = None,
        env: Mapping[str, str] | None = None,
        stdout: bool = True,
    ) -> None:
        self.argv = [str(arg) for arg in argv]
        self.log = log
        with log.open("wb") as out:  # the child keeps its own descriptor
            self.proc: subprocess.Popen[bytes] = subprocess.Popen(
                self.argv,
                cwd=cwd,
                env=dict(env) if env is not None else None,
                stdout=out if stdout else subprocess.DEVNULL,
                stderr=out,
            )

    @property
    def pid(self) -> int:
        """The process id."""
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        """Its exit status once it ended (negative: the signal that ended it), else None."""
        return self.proc.poll()

    def alive(self) -> bool:
        """Whether it still runs."""
        return self.proc.poll() is None

    def text(self) -> str:
        """Its output so far."""
        return self.log.read_text(errors="replace")

    def wait(self, timeout: float) -> int:
        """Wait up to ``timeout`` seconds (stretched on a busy machine) for it to exit; its
        status. Raises ``subprocess.TimeoutExpired`` if it still runs."""
        return self.proc.wait(timeout=scaled(timeout))

    def sigkill(self) -> None:
        """SIGKILL it, as a crash would, and reap it. It must still be running: a child
        that died on its own is a failure to report, not a kill."""
        assert self.alive(), f"{self.argv[:3]} died by itself:\n{self.text()[-2000:]}"
        self.proc.send_signal(signal.SIGKILL)
        assert self.proc.wait(timeout=scaled(10)) == -signal.SIGKILL

    def terminate(self) -> None:
        """Send SIGTERM (a worker drains and exits); return without waiting."""
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)

    def stop(self, timeout: float = STOP_S) -> int:
        """SIGTERM it and wait for it to exit (SIGKILL after ``timeout``, stretched on a
        busy machine); its exit status."""
        self.terminate()
        return self.reap(timeout)

    def reap(self, timeout: float = STOP_S) -> int:
        """Wait for it to exit (SIGKILL after ``timeout``, stretched on a busy machine);
        its exit status. Sends no SIGTERM: a second one may cut a drain short."""
        try:
            return self.proc.wait(timeout=scaled(timeout))
        except subprocess.TimeoutExpired:
            self.kill()
            return self.proc.wait()

    def kill(self) -> None:
        """Kill it if it still runs (continuing it first, if a test stopped it) and reap
        it; for cleanup, whatever state it is in."""
        if self.alive():
            os.kill(self.pid, signal.SIGCONT)
            self.proc.kill()
        self.proc.wait()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.kill()


def stop_all(processes: Iterable[LoggedProcess], timeout: float = STOP_S) -> list[int]:
    """SIGTERM every process once (they drain at once), then wait for each; their exit
    statuses, in order.

    Each gets one SIGTERM only: a worker that has drained restores the default handler
    as it exits, so a second SIGTERM then would end it with -15 instead of 0.
    """
    processes = list(processes)
    for process in processes:
        process.terminate()
    return [process.reap(timeout) for process in processes]
