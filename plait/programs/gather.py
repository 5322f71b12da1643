"""Bounded gather on an anyio task group, for graphs written as programs.

:func:`gather` awaits several calls at once, at most ``limit`` at a time, and returns
their results in order. By default every call runs to its end and a failure comes
back in its place as the exception (a failed node keeps its evidence, the passing ones
their results); with ``fail_fast`` the first failure cancels the siblings still running
and is raised.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

import anyio

from plait.errors import ConfigError


async def gather(
    *calls: Coroutine[Any, Any, Any], limit: int | None = None, fail_fast: bool = False
) -> list[Any]:
    """Await ``calls`` concurrently, at most ``limit`` at once; their results in order.

    Args:
        calls: coroutines (``tools.bash(...)``, ``programs.run(...)``), not yet awaited.
        limit: how many run at once; None = all.
        fail_fast: raise the first failure, cancelling the calls still running or
            waiting; otherwise a failed call's exception is its result.

    Raises:
        ConfigError: ``limit`` is below 1.
        Exception: with ``fail_fast``, the first call's failure.
    """
    if limit is not None and limit < 1:
        for call in calls:
            call.close()
        raise ConfigError(f"gather limit must be at least 1, not {limit}")
    limiter = anyio.CapacityLimiter(limit or max(len(calls), 1))
    results: list[Any] = [None] * len(calls)
    failed: list[Exception] = []

    async def one(index: int, call: Coroutine[Any, Any, Any]) -> None:
        started = False
        try:
            async with limiter:
                started = True
                try:
                    results[index] = await call
                except Exception as exc:  # a call's failure is its result, or ends all
                    results[index] = exc
                    if fail_fast and not failed:
                        failed.append(exc)
                        group.cancel_scope.cancel()  # before the slot frees for another
        finally:
            if not started:
                call.close()  # cancelled while waiting its turn: never awaited

    async with anyio.create_task_group() as group:
        for index, call in enumerate(calls):
            group.start_soon(one, index, call)
    if failed:
        raise failed[0]
    return results


__all__ = ["gather"]
