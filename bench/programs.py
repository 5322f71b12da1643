"""A promoted saved program's call through the sandbox pool, beside the same program run
in this process (the path before the sandbox), and the sandbox's starts.

The program reads a key, writes one and returns (two capability calls, on a SQLite
mesh): what a small step of a graph written as programs does. ``sandboxed_call`` is a
call through :func:`plait.programs.run_program` with a warm process ready (the pool
refills between rounds, outside the timing: both kinds of round wait for it, so neither
is timed beside a refill); its baseline ``in_process_call`` resolves
the same promoted version and runs the same compiled code with the same capabilities
in this process. They are measured in alternating rounds, so both see the same load.
``ratio`` is baseline / value for costs (target >= 0.2). ``trivial_*`` is the same for a
program that only returns (the sandbox's fixed cost, beside next to nothing).
``sandbox_start`` is a cold zygote to ready (interpreter, bubblewrap, the stub: once per
pool; target <= 300 ms), ``sandbox_child_start`` one program's process forked from it to
ready (limits, audit hook, workspace: once per call, off the call's path while the pool
keeps children ready; baseline the same 300 ms). ``sustained_calls`` is the calls per
second when calls come back to back (then each waits on a fork: the pool's refill is the
bound), its baseline the same program called back to back in process.

Run: ``python bench/programs.py [--json] [--seconds 1.0]``.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from _common import Cost, Figure, alternate, parse_args, rate, report

from plait.decisions import Human
from plait.mesh import Mesh, open_mesh
from plait.programs import (
    Grants,
    Payload,
    ProgramsCapability,
    compile_text,
    grant_all,
    promote,
    resolve_saved,
    run_program,
    save_program,
)
from plait.programs.sandbox import SandboxPool, use_pool
from plait.programs.sandbox.zygote import Zygote
from plait.programs.text import run_text

BENCH = "programs"
STEP = """
seen = await mesh.get("bench/state")
n = (seen["value"]["n"] if seen else 0) + 1
await mesh.put("bench/state", {"n": n, "by": payload.who})
return {"n": n}
"""
TRIVIAL = "return payload.who"
START_TARGET_MS = 300.0


async def in_process(mesh: Mesh, ref: str, grants: Grants) -> Callable[[], Awaitable[Any]]:
    """The pre-sandbox path: resolve the promoted version, run its code in this process."""
    codes: dict[str, Any] = {}

    async def call() -> Any:
        stored = await resolve_saved(ref, mesh, require_promoted=True)
        code = codes.get(stored.sha256) or codes.setdefault(
            stored.sha256, compile_text(stored.text, ref)
        )
        names = {
            "mesh": grants.mesh,
            "decisions": grants.decisions,
            "tools": grants.tools,
            "agents": grants.agents,
            "programs": ProgramsCapability(grants),
            "payload": Payload({"who": "bench"}),
        }
        return await run_text(code, names)

    return call


async def warm(pool: SandboxPool) -> None:
    """Wait (untimed) until the pool has its processes ready again."""
    while pool.warm < pool.size:  # noqa: ASYNC110 - a thread fills it: no event to await
        await asyncio.sleep(0.005)


async def per_call(
    pool: SandboxPool, mesh: Mesh, ref: str, grants: Grants, rounds: int
) -> tuple[float, float]:
    """Median ms per call: through the warm pool, and in process; in alternate rounds."""
    baseline = await in_process(mesh, ref, grants)

    async def sandboxed() -> float:
        await warm(pool)
        started = time.perf_counter()
        await run_program(ref, {"who": "bench"}, grants)
        return (time.perf_counter() - started) * 1000

    async def inproc() -> float:
        await warm(pool)  # the last sandboxed call's refill is not timed here either
        started = time.perf_counter()
        await baseline()
        return (time.perf_counter() - started) * 1000

    await sandboxed(), await inproc()  # warm both paths
    boxed, local = await alternate(rounds, sandboxed, inproc)
    return statistics.median(boxed), statistics.median(local)


def cold_starts(pool: SandboxPool, n: int) -> tuple[float, float]:
    """Median ms from nothing to a zygote ready to fork, and from a fork request to a
    child ready for a program."""
    zygotes: list[float] = []
    children: list[float] = []
    for _ in range(n):
        started = time.perf_counter()
        zygote = Zygote(pool.limits, pool.isolation)
        zygotes.append((time.perf_counter() - started) * 1000)
        try:
            for _ in range(3):
                started = time.perf_counter()
                proc = zygote.fork()
                children.append((time.perf_counter() - started) * 1000)
                proc.close()
        finally:
            zygote.close()
    return statistics.median(zygotes), statistics.median(children)


async def main() -> None:
    """Measure and print the figures."""
    args = parse_args(__doc__ or "")
    rounds = max(10, int(args.seconds * 40))
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory() as tmp, use_pool(SandboxPool(size=2)) as pool:
        pool.start()
        async with open_mesh(f"sqlite:///{Path(tmp) / 'mesh.db'}") as mesh:
            grants = grant_all(mesh)
            for ref, text in (("bench-step", STEP), ("bench-trivial", TRIVIAL)):
                await save_program(mesh, ref, text)
                await promote(mesh, ref, 1, by=Human("bench"))
            for metric, ref in (("call", "bench-step"), ("trivial_call", "bench-trivial")):
                boxed, local = await per_call(pool, mesh, ref, grants, rounds)
                note = f"{pool.isolation}; baseline: the same program in process"
                figures.append(Cost(BENCH, f"sandboxed_{metric}", boxed, "ms", local, 0.2, note))

            async def back_to_back(_: int) -> None:
                await run_program("bench-trivial", {"who": "bench"}, grants)

            sustained = await rate(back_to_back, args.seconds)
            local_call = await in_process(mesh, "bench-trivial", grants)
            local = await rate(lambda _: local_call(), args.seconds)
            note = f"{pool.isolation}; baseline: the same program back to back in process"
            figures.append(Figure(BENCH, "sustained_calls", sustained, "calls/s", local, 0.0, note))
        zygote, child = await asyncio.to_thread(cold_starts, pool, 5)
        note = f"{pool.isolation}: a cold zygote to ready, target <= 300 ms"
        figures.append(Cost(BENCH, "sandbox_start", zygote, "ms", START_TARGET_MS, 1.0, note))
        note = f"{pool.isolation}: a program's process forked to ready, beside 300 ms"
        figures.append(Cost(BENCH, "sandbox_child_start", child, "ms", START_TARGET_MS, 1.0, note))
    report(figures, as_json=args.json, title="programs: sandbox pool vs in process")


if __name__ == "__main__":
    asyncio.run(main())
