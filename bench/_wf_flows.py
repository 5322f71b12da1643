"""The workflows bench/workflows.py runs durably: importable by the serving process."""

from __future__ import annotations

import plait


@plait.step
async def cheap(ctx: plait.Context, i: int) -> int:
    """A step that does nothing but be journaled."""
    return i


@plait.workflow(name="ten")
async def ten(ctx: plait.Context) -> int:
    """Ten cheap steps, one after another."""
    total = 0
    for i in range(10):
        total += await cheap(ctx, i)
    return total


@plait.workflow(name="thousand")
async def thousand(ctx: plait.Context) -> int:
    """A thousand cheap steps (ten batches of a hundred), then a question."""
    total = 0
    for batch in range(10):
        done = await plait.gather(*(cheap(ctx, batch * 100 + i) for i in range(100)))
        total += sum(done)
    await ctx.decisions.ask("Go on?", options=["yes", "no"])
    return total
