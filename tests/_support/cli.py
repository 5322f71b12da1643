"""``plait`` run inside the test process, as a command line would run it.

A test about what a command prints or stores need not pay for a new Python process
and its imports on every call (a third of a second to a second of CPU each): this runs
the same ``plait.cli.main`` through Typer's runner, in the command's working directory,
with its environment, and hands back what :func:`subprocess.run` would. Tests about the
process boundary (signals, pids, argv bytes, what a fresh process imports, a worker)
start the real console script instead.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import traceback
from collections.abc import Iterator, Mapping, Sequence
from contextlib import chdir, contextmanager
from pathlib import Path

from typer.testing import CliRunner


def in_a_coroutine() -> bool:
    """Whether an event loop runs in this thread (a command cannot start its own)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


@contextmanager
def as_a_process_would(cwd: Path) -> Iterator[None]:
    """In ``cwd``, its modules importable (as ``plait.cli.main`` arranges), the consoles
    sized from ``COLUMNS`` now, no logging handler (pytest's) on the root logger, so that
    a warning reaches stderr by logging's last resort as in a new process; afterwards the
    modules imported from ``cwd`` forgotten, so that the next test's files of the same
    name are imported afresh."""
    from plait.cli import _output

    root = logging.getLogger()
    handlers, root.handlers = root.handlers, []
    before = set(sys.modules)
    widths = [(console, console._width) for console in (_output.console, _output.err_console)]
    here = str(cwd)
    sys.path.append(here)
    try:
        for console, _ in widths:
            console._width = None  # as a process started now: read COLUMNS at each print
        with chdir(cwd):
            yield
    finally:
        root.handlers = handlers
        for console, width in widths:
            console._width = width
        sys.path.remove(here)
        for name in set(sys.modules) - before:
            origin = getattr(sys.modules[name], "__file__", None) or ""
            if origin.startswith(here + os.sep):
                del sys.modules[name]


def run_in_process(
    args: Sequence[str], *, cwd: Path, env: Mapping[str, str]
) -> subprocess.CompletedProcess[str]:
    """``plait ARGS`` run here, in ``cwd``, with exactly ``env`` as its environment; its
    exit status, stdout and stderr. An exception the command lets out is printed to
    stderr as a traceback with status 1, as the interpreter would.

    Only from a test that is not a coroutine: a command runs its own event loop.
    """
    from plait.cli import app

    if in_a_coroutine():
        raise RuntimeError("plait runs in-process from a synchronous test only; start a process")

    changes: dict[str, str | None] = {
        name: value for name, value in env.items() if os.environ.get(name) != value
    }
    changes.update({name: None for name in os.environ if name not in env})
    with as_a_process_would(cwd):
        result = CliRunner().invoke(
            app, list(args), env=changes, catch_exceptions=True, prog_name="plait"
        )
    stderr, status = result.stderr, result.exit_code
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
        status = 1
    return subprocess.CompletedProcess(["plait", *args], status, result.stdout, stderr)
