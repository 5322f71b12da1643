"""Serving agent actors in a test: a leased runtime with its topic router, a scripted model."""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio

from plait.actors import LeasedRuntime
from plait.agents import Agents
from plait.mesh import Mesh
from plait.models import ScriptedModel
from plait.profiles import AgentProfile, put_profile
from plait.runs import Serving, serve
from tests._support.timing import scaled

LEASE_S = scaled(1.0)  # longer on a busy machine, as in tests/actors/conftest.py


@asynccontextmanager
async def serving(
    mesh: Mesh, rules: Sequence[dict[str, Any]]
) -> AsyncIterator[Serving[LeasedRuntime]]:
    """Serve agent actors (and runs) on ``mesh`` in this process, answered by ``rules``."""
    runtime = functools.partial(LeasedRuntime, lease_s=LEASE_S)
    async with serve(
        mesh,
        runtime=runtime,
        model=ScriptedModel(rules),
        beat=False,
        visibility_timeout_ms=500,
        max_attempts=5,
        agents=Agents,
    ) as served:
        yield served


async def profile(mesh: Mesh, name: str, tools: Sequence[str], **extra: Any) -> None:
    """Store agent profile ``name`` with ``tools``."""
    await put_profile(mesh, AgentProfile(name=name, tools=list(tools), **extra))


async def eventually(check: Callable[[], Awaitable[Any]], timeout_s: float = 20.0) -> Any:
    """Poll ``check`` until it returns something truthy; that value (``timeout_s``
    stretched on a busy machine)."""
    timeout_s = scaled(timeout_s)
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await anyio.sleep(0.02)
    raise AssertionError(f"not within {timeout_s:.0f}s (last: {last!r})")
