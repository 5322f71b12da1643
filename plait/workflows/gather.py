"""``plait.gather`` for workflows and programs alike: the journaled steps among the
calls answer at once, the rest run as :func:`plait.programs.gather` runs them.

In a replay most calls are journaled steps (:class:`~plait.workflows.replay.Replayed`):
taking their results in place, instead of a task each, is what keeps the replay of a
long workflow cheap. Results come back in call order either way.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from plait.programs import gather as run_all
from plait.workflows.replay import Replayed


async def gather(
    *calls: Awaitable[Any], limit: int | None = None, fail_fast: bool = False
) -> list[Any]:
    """Await ``calls`` concurrently, at most ``limit`` at once; their results in order.

    As :func:`plait.programs.gather` (a failure is its call's result, or with
    ``fail_fast`` the first one is raised); a journaled workflow step answers its
    recorded result without taking a place under ``limit``.
    """
    results: list[Any] = [None] * len(calls)
    live: list[int] = []
    for index, call in enumerate(calls):
        if isinstance(call, Replayed):
            try:
                results[index] = call.result()
            except Exception as exc:  # a journaled failure is its result, as a live one
                if fail_fast:
                    for other in calls:
                        if not isinstance(other, Replayed):
                            other.close()  # type: ignore[attr-defined]
                    raise
                results[index] = exc
        else:
            live.append(index)
    if live:
        coros: list[Any] = [calls[i] for i in live]  # coroutines: all but the replayed
        done = await run_all(*coros, limit=limit, fail_fast=fail_fast)
        for index, value in zip(live, done, strict=True):
            results[index] = value
    return results


__all__ = ["gather"]
