"""The board: raise, get, list, idempotent raise, lazy expiry, and no way to decide."""

from __future__ import annotations

import time

import anyio
import pytest

from plait.decisions import Agent, DecisionAnswerer, DecisionAsker, Human, decision_key
from plait.errors import DecisionClosed, DecisionError, DecisionNotFound
from plait.mesh import Mesh

from .helpers import read_events, ticking_clock

pytestmark = pytest.mark.anyio

NODE = Agent("release-node")


async def test_raise_then_get_returns_the_stored_decision(mesh: Mesh) -> None:
    board = DecisionAsker(mesh)
    raised = await board.raise_(
        "Release v2?", run_id="r1", node="approve", data={"diff": "+3 -1"}, by=NODE
    )
    assert raised.id.startswith("dec_") and len(raised.id) == 4 + 32
    assert raised.status == "open" and raised.options == ["yes", "no"]
    assert raised.raised_by == "release-node"
    assert await board.get(raised.id) == raised
    entry = await mesh.get(decision_key(raised.id))
    assert entry is not None and entry.version == 1


async def test_get_of_an_unknown_id_raises_not_found(mesh: Mesh) -> None:
    with pytest.raises(DecisionNotFound, match="nope"):
        await DecisionAsker(mesh).get("nope")


async def test_raising_with_a_known_id_returns_the_existing_decision(mesh: Mesh) -> None:
    board = DecisionAsker(mesh)
    async with mesh.subscribe("decisions", "watch", "w") as sub:
        first = await board.raise_("Release?", id="r1.approve.1", by=NODE)
        again = await board.raise_("Something else", "text", id="r1.approve.1", by=NODE)
        events = await read_events(sub, 0.3)
    assert again == first
    assert [(e.kind, e.data["id"]) for e in events] == [("decision.raised", "r1.approve.1")]
    entry = await mesh.get(decision_key("r1.approve.1"))
    assert entry is not None and entry.version == 1


async def test_bad_arguments_raise_a_decision_error_and_write_nothing(mesh: Mesh) -> None:
    board = DecisionAsker(mesh)
    with pytest.raises(DecisionError, match="at least two options"):
        await board.raise_("Pick", "choice", ["only"], by=NODE)
    with pytest.raises(DecisionError, match="kind"):
        await board.raise_("Pick", "vote", by=NODE)  # type: ignore[arg-type]
    with pytest.raises(DecisionError, match="non-empty"):
        await board.raise_("Pick", id="", by=NODE)
    assert await board.list() == []


async def test_list_is_newest_first_and_filters_by_status(mesh: Mesh) -> None:
    clock = ticking_clock()
    board = DecisionAsker(mesh, clock=clock)
    desk = DecisionAnswerer(mesh, clock=clock)
    a = await board.raise_("A?", by=NODE)
    b = await board.raise_("B", "choice", ["x", "y"], by=NODE)
    c = await board.raise_("C", "text", by=NODE)
    await desk.answer(b.id, option="x", by=Human("ana"))
    assert [d.id for d in await board.list()] == [c.id, b.id, a.id]
    assert [d.id for d in await board.list("open")] == [c.id, a.id]
    assert [d.id for d in await board.list("answered")] == [b.id]
    assert await board.list("cancelled") == []


async def test_the_board_cannot_answer_cancel_or_raise_budgets(mesh: Mesh) -> None:
    board = DecisionAsker(mesh)
    for name in ("answer", "cancel", "raise_budget", "budget"):
        assert not hasattr(board, name)
    public = {n for n in dir(board) if not n.startswith("_")}
    assert public == {"raise_", "get", "wait", "list", "topic"}


async def test_an_expired_decision_reads_as_expired_exactly_once(mesh: Mesh) -> None:
    board = DecisionAsker(mesh)
    past = time.time() - 60
    async with mesh.subscribe("decisions", "watch", "w") as sub:
        raised = await board.raise_("Late?", expires_at=past, by=NODE)
        assert raised.status == "open"
        seen = []

        async def read() -> None:
            seen.append(await board.get(raised.id))

        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(read)
        events = await read_events(sub, 0.3)
    assert {d.status for d in seen} == {"expired"}
    assert all(d.closed_at == past and d.value is None for d in seen)
    assert [e.kind for e in events] == ["decision.raised", "decision.expired"]
    assert events[1].data == {
        "id": raised.id,
        "status": "expired",
        "run_id": None,
        "node": None,
        "by": None,
    }
    assert [d.status for d in await board.list()] == ["expired"]


async def test_an_expired_decision_cannot_be_answered(mesh: Mesh) -> None:
    board = DecisionAsker(mesh)
    raised = await board.raise_("Late?", expires_at=time.time() - 1, by=NODE)
    with pytest.raises(DecisionClosed, match=f"decision {raised.id} expired at 20"):
        await DecisionAnswerer(mesh).answer(raised.id, option="yes", by=Human("ana"))
    assert (await board.get(raised.id)).answer is None


async def test_a_default_expiry_takes_the_default_as_its_value(mesh: Mesh) -> None:
    board = DecisionAsker(mesh)
    raised = await board.raise_(
        "Deploy?", expires_at=time.time() - 1, on_expire="default", default="No", by=NODE
    )
    read = await board.get(raised.id)
    assert read.status == "expired" and read.answer is None
    assert read.value == "no"


async def test_the_expiry_notify_event_is_published_with_the_expiry(mesh: Mesh) -> None:
    board = DecisionAsker(mesh)
    async with mesh.subscribe("run.r9", "owner", "w") as sub:
        raised = await board.raise_(
            "Late?",
            expires_at=time.time() - 1,
            notify={"topic": "run.r9", "kind": "wake", "data": {"run": "r9"}},
            by=NODE,
        )
        assert await read_events(sub, 0.2) == []
        await board.get(raised.id)
        await board.get(raised.id)
        events = await read_events(sub, 0.3)
    assert [(e.kind, e.data) for e in events] == [("wake", {"run": "r9"})]
