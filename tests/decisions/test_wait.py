"""wait(): back as soon as a decision closes, or with it still open after the timeout."""

from __future__ import annotations

import time

import anyio
import pytest

from plait.decisions import Agent, Decision, DecisionAnswerer, DecisionAsker, Human
from plait.errors import DecisionNotFound
from plait.mesh import Mesh
from tests._support.timing import scaled

pytestmark = pytest.mark.anyio

NODE = Agent("release-node")


async def test_wait_returns_on_an_answer_from_another_task(mesh: Mesh) -> None:
    # No re-read for an hour and no timeout for an hour: only the answer's event can end
    # the wait within the deadline below. (How soon is a figure for a benchmark.)
    board = DecisionAsker(mesh, recheck_s=3600)
    desk = DecisionAnswerer(mesh)
    raised = await board.raise_("Release?", by=NODE)
    got: list[Decision] = []

    async def waiter() -> None:
        got.append(await board.wait(raised.id, timeout=3600))

    async def answerer() -> None:
        await anyio.sleep(0.3)  # most likely while the waiter waits; either way it must see it
        await desk.answer(raised.id, option="yes", by=Human("ana"))

    with anyio.fail_after(scaled(10)):
        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            tg.start_soon(answerer)
    (decision,) = got
    assert decision.status == "answered" and decision.value == "yes"


async def test_wait_times_out_with_the_decision_still_open(mesh: Mesh) -> None:
    board = DecisionAsker(mesh)
    raised = await board.raise_("Release?", by=NODE)
    started = time.monotonic()
    with anyio.fail_after(scaled(5)):
        decision = await board.wait(raised.id, timeout=0.3)
    elapsed = time.monotonic() - started
    assert decision == raised
    assert elapsed >= 0.3  # never before its timeout


async def test_wait_on_a_closed_decision_returns_at_once(mesh: Mesh) -> None:
    desk = DecisionAnswerer(mesh)
    raised = await desk.raise_("Release?", by=NODE)
    await desk.cancel(raised.id, by=Human("ana"))
    with anyio.fail_after(scaled(5)):  # at once, not at the timeout
        assert (await desk.wait(raised.id, timeout=30)).status == "cancelled"


async def test_wait_wakes_at_the_expiry_time(mesh: Mesh) -> None:
    board = DecisionAsker(mesh, recheck_s=30)
    raised = await board.raise_(
        "Deploy?", expires_at=time.time() + 0.3, on_expire="default", default="no", by=NODE
    )
    with anyio.fail_after(scaled(3)):  # at the expiry, not at a re-read 30 s on
        decision = await board.wait(raised.id, timeout=20)
    assert (decision.status, decision.value) == ("expired", "no")


async def test_other_decisions_do_not_end_a_wait(mesh: Mesh) -> None:
    board = DecisionAsker(mesh)
    desk = DecisionAnswerer(mesh)
    mine = await board.raise_("Mine?", by=NODE)
    other = await board.raise_("Other?", by=NODE)
    done: list[str] = []

    async def waiter() -> None:
        decision = await board.wait(mine.id, timeout=3600)
        done.append(f"wait returned {decision.status}")

    with anyio.fail_after(scaled(10)):
        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            await anyio.sleep(0.1)  # most likely while it waits; either way it must not end it
            await desk.answer(other.id, option="yes", by=Human("ana"))
            done.append("other answered")
            await board.get(other.id)  # a round trip: the other's event is out
            await desk.answer(mine.id, option="no", by=Human("ana"))
            done.append("mine answered")
    assert done == ["other answered", "mine answered", "wait returned answered"]


async def test_wait_on_an_unknown_decision_raises(mesh: Mesh) -> None:
    with pytest.raises(DecisionNotFound):
        await DecisionAsker(mesh).wait("nope", timeout=1)
