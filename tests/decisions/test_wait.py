"""wait(): back as soon as a decision closes, or with it still open after the timeout."""

from __future__ import annotations

import time

import anyio
import pytest

from plait.decisions import Agent, Decision, DecisionBoard, DecisionDesk, Human
from plait.errors import DecisionNotFound
from plait.mesh import Mesh

pytestmark = pytest.mark.anyio

NODE = Agent("release-node")


async def test_wait_returns_soon_after_an_answer_from_another_task(mesh: Mesh) -> None:
    board = DecisionBoard(mesh)
    desk = DecisionDesk(mesh)
    raised = await board.raise_("Release?", by=NODE)
    got: list[tuple[Decision, float]] = []
    answered_at: list[float] = []

    async def waiter() -> None:
        decision = await board.wait(raised.id, timeout=10)
        got.append((decision, time.monotonic()))

    async def answerer() -> None:
        await anyio.sleep(0.3)
        await desk.answer(raised.id, option="yes", by=Human("ana"))
        answered_at.append(time.monotonic())

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        tg.start_soon(answerer)
    decision, returned_at = got[0]
    assert decision.status == "answered" and decision.value == "yes"
    assert returned_at - answered_at[0] < 0.1


async def test_wait_times_out_with_the_decision_still_open(mesh: Mesh) -> None:
    board = DecisionBoard(mesh)
    raised = await board.raise_("Release?", by=NODE)
    started = time.monotonic()
    decision = await board.wait(raised.id, timeout=0.3)
    elapsed = time.monotonic() - started
    assert decision == raised
    assert 0.3 <= elapsed < 1.0


async def test_wait_on_a_closed_decision_returns_at_once(mesh: Mesh) -> None:
    desk = DecisionDesk(mesh)
    raised = await desk.raise_("Release?", by=NODE)
    await desk.cancel(raised.id, by=Human("ana"))
    with anyio.fail_after(0.5):
        assert (await desk.wait(raised.id, timeout=30)).status == "cancelled"


async def test_wait_wakes_at_the_expiry_time(mesh: Mesh) -> None:
    board = DecisionBoard(mesh, recheck_s=30)
    raised = await board.raise_(
        "Deploy?", expires_at=time.time() + 0.3, on_expire="default", default="no", by=NODE
    )
    with anyio.fail_after(2):
        decision = await board.wait(raised.id, timeout=20)
    assert (decision.status, decision.value) == ("expired", "no")


async def test_other_decisions_do_not_end_a_wait(mesh: Mesh) -> None:
    board = DecisionBoard(mesh)
    desk = DecisionDesk(mesh)
    mine = await board.raise_("Mine?", by=NODE)
    other = await board.raise_("Other?", by=NODE)

    async def answer_other() -> None:
        await anyio.sleep(0.1)
        await desk.answer(other.id, option="yes", by=Human("ana"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(answer_other)
        assert (await board.wait(mine.id, timeout=0.5)).status == "open"


async def test_wait_on_an_unknown_decision_raises(mesh: Mesh) -> None:
    with pytest.raises(DecisionNotFound):
        await DecisionBoard(mesh).wait("nope", timeout=1)
