"""Program texts run in a sandboxed process, reaching their capabilities over RPC.

A saved program text (and any program text, e.g. one a model wrote) is data, not the
operator's code: it runs in a separate process with no credentials, a scrubbed
environment, its own workspace, CPU, memory, file and process limits, under bubblewrap
where it runs (:mod:`.process`). The capabilities stay in the serving process; the
program holds proxies whose every method call is a frame this process answers, with
the caller's budget, taint and principal (:mod:`.channel`). A pool of warm processes
makes a call cost milliseconds (:mod:`.pool`).

:func:`run_sandboxed` is the one entry point.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import CodeType
from typing import Any

from plait.programs.sandbox.channel import METHODS, run_on
from plait.programs.sandbox.pool import (
    SANDBOX_ENV,
    SandboxPool,
    choose_isolation,
    default_pool,
    use_pool,
    warm_pool,
)
from plait.programs.sandbox.process import Isolation, SandboxLimits, bwrap_usable


async def run_sandboxed(
    code: CodeType,
    filename: str,
    input: Any,
    names: Mapping[str, Any],
    *,
    pool: SandboxPool | None = None,
) -> Any:
    """Run compiled program text in a sandbox process, answering its capability calls.

    Args:
        code: the program, compiled by :func:`plait.programs.compile_text`.
        filename: what errors name it by.
        input: its payload (JSON data).
        names: the capabilities by name (``mesh``, ``tools``...), held here.
        pool: where its process comes from (default: :func:`default_pool`).

    Raises:
        ProgramError: the program failed (``file:line: Type: message``), or broke a limit.
        Exception: a capability's error the program let through, as it was raised here.
    """
    pool = pool or default_pool()
    proc = await pool.acquire()
    try:
        return await run_on(
            proc, code, filename, input, names, wall_seconds=pool.limits.wall_seconds
        )
    finally:
        pool.release(proc)


__all__ = [
    "METHODS",
    "SANDBOX_ENV",
    "Isolation",
    "SandboxLimits",
    "SandboxPool",
    "bwrap_usable",
    "choose_isolation",
    "default_pool",
    "run_sandboxed",
    "use_pool",
    "warm_pool",
]
