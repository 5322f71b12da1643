"""The desk: answers and cancels by people only, checked, once, with their events."""

from __future__ import annotations

import anyio
import pytest

from plait.decisions import Agent, Decision, DecisionAnswerer, DecisionAsker, Human, decision_key
from plait.decisions.principals import Principal
from plait.errors import DecisionClosed, DecisionError, NotPermitted
from plait.mesh import Mesh
from tests._support.timing import scaled

from .helpers import read_events

pytestmark = pytest.mark.anyio

NODE = Agent("release-node")
ANA = Human("ana")


async def version_of(mesh: Mesh, decision_id: str) -> int:
    entry = await mesh.get(decision_key(decision_id))
    assert entry is not None
    return entry.version


async def test_confirm_takes_yes_or_no_in_any_case(mesh: Mesh) -> None:
    desk = DecisionAnswerer(mesh)
    raised = await desk.raise_("Release?", by=NODE)
    answered = await desk.answer(raised.id, option="YES", text="looks good", by=ANA)
    assert answered.status == "answered" and answered.value == "yes"
    assert answered.answer is not None
    assert (answered.answer.option, answered.answer.text, answered.answer.by) == (
        "yes",
        "looks good",
        "ana",
    )
    assert await desk.get(raised.id) == answered


async def test_choice_and_text_answers(mesh: Mesh) -> None:
    desk = DecisionAnswerer(mesh)
    choice = await desk.raise_("Which region?", "choice", ["eu-west", "us-east"], by=NODE)
    assert (await desk.answer(choice.id, option="us-east", by=ANA)).value == "us-east"
    text = await desk.raise_("Release notes?", "text", by=NODE)
    assert (await desk.answer(text.id, text="Faster fan-in.", by=ANA)).value == "Faster fan-in."


@pytest.mark.parametrize(
    ("kind", "options", "option", "text", "message"),
    [
        ("confirm", None, "maybe", None, "choose one of 'yes', 'no'"),
        ("confirm", None, None, "yes", "needs an option"),
        ("choice", ["a", "b"], "c", None, "choose one of 'a', 'b'"),
        ("text", None, None, "", "non-empty text"),
        ("text", None, "a", "b", "takes text, not an option"),
    ],
)
async def test_answers_that_do_not_fit_are_refused_and_change_nothing(
    mesh: Mesh,
    kind: str,
    options: list[str] | None,
    option: str | None,
    text: str | None,
    message: str,
) -> None:
    desk = DecisionAnswerer(mesh)
    raised = await desk.raise_("Q", kind, options, by=NODE)  # type: ignore[arg-type]
    with pytest.raises(DecisionError, match=message):
        await desk.answer(raised.id, option=option, text=text, by=ANA)
    assert (await desk.get(raised.id)).status == "open"
    assert await version_of(mesh, raised.id) == 1


async def test_a_second_answer_is_closed_naming_who_and_when(mesh: Mesh) -> None:
    desk = DecisionAnswerer(mesh, clock=lambda: 1_800_000_000.0)
    raised = await desk.raise_("Release?", by=NODE)
    await desk.answer(raised.id, option="yes", by=ANA)
    with pytest.raises(DecisionClosed) as info:
        await desk.answer(raised.id, option="no", by=Human("bob"))
    assert str(info.value) == (
        f"decision {raised.id} was already answered by ana at 2027-01-15T08:00:00+00:00"
    )
    with pytest.raises(DecisionClosed, match="answered by ana"):
        await desk.cancel(raised.id, by=Human("bob"))
    assert (await desk.get(raised.id)).value == "yes"


async def test_of_ten_concurrent_answers_exactly_one_wins(mesh: Mesh) -> None:
    desk = DecisionAnswerer(mesh)
    raised = await desk.raise_("Release?", by=NODE)
    wins: list[Decision] = []
    losses: list[DecisionClosed] = []

    async def answer(i: int) -> None:
        try:
            wins.append(
                await desk.answer(raised.id, option=("yes", "no")[i % 2], by=Human(f"h{i}"))
            )
        except DecisionClosed as exc:
            losses.append(exc)

    async with mesh.subscribe("decisions", "watch", "w") as sub:
        async with anyio.create_task_group() as tg:
            for i in range(10):
                tg.start_soon(answer, i)
        events = await read_events(sub, 0.3)
    assert len(wins) == 1 and len(losses) == 9
    winner = wins[0]
    assert await desk.get(raised.id) == winner
    assert all(f"already answered by {winner.closed_by} at" in str(e) for e in losses)
    assert [e.data["by"] for e in events if e.kind == "decision.answered"] == [winner.closed_by]
    assert await version_of(mesh, raised.id) == 2


@pytest.mark.parametrize("who", [Agent("planner"), Principal("someone")])
async def test_only_a_human_may_answer_or_cancel(mesh: Mesh, who: Principal) -> None:
    desk = DecisionAnswerer(mesh)
    raised = await desk.raise_("Release?", by=NODE)
    async with mesh.subscribe("decisions", "watch", "w") as sub:
        with pytest.raises(NotPermitted, match="only a human may answer a decision"):
            await desk.answer(raised.id, option="yes", by=who)
        with pytest.raises(NotPermitted, match="only a human may cancel a decision"):
            await desk.cancel(raised.id, by=who)
        assert await read_events(sub, 0.2) == []
    assert await desk.get(raised.id) == raised
    assert await version_of(mesh, raised.id) == 1


async def test_cancel_closes_the_decision(mesh: Mesh) -> None:
    desk = DecisionAnswerer(mesh)
    raised = await desk.raise_("Release?", by=NODE)
    cancelled = await desk.cancel(raised.id, by=ANA)
    assert (cancelled.status, cancelled.closed_by, cancelled.value) == ("cancelled", "ana", None)
    with pytest.raises(DecisionClosed, match=f"decision {raised.id} was cancelled by ana at"):
        await desk.answer(raised.id, option="yes", by=Human("bob"))


async def test_raised_and_answered_events_appear_on_the_topic(mesh: Mesh) -> None:
    desk = DecisionAnswerer(mesh, topic="approvals")
    async with mesh.subscribe("approvals", "watch", "w") as sub:
        raised = await desk.raise_("Release?", run_id="r1", node="approve", by=NODE)
        await desk.answer(raised.id, option="no", by=ANA)
        events = await read_events(sub, 0.3)
    assert [(e.kind, e.data) for e in events] == [
        (
            "decision.raised",
            {
                "id": raised.id,
                "status": "open",
                "run_id": "r1",
                "node": "approve",
                "by": "release-node",
            },
        ),
        (
            "decision.answered",
            {"id": raised.id, "status": "answered", "run_id": "r1", "node": "approve", "by": "ana"},
        ),
    ]


@pytest.mark.parametrize("close", ["answer", "cancel"])
async def test_the_notify_event_comes_with_the_close(mesh: Mesh, close: str) -> None:
    desk = DecisionAnswerer(mesh)
    board = DecisionAsker(mesh)
    raised = await board.raise_(
        "Release?",
        run_id="r1",
        notify={"topic": "run.r1", "kind": "wake", "data": {"run": "r1", "why": "decision"}},
        by=NODE,
    )
    async with mesh.subscribe("run.r1", "owner", "w") as sub:
        assert await read_events(sub, 0.2) == []
        if close == "answer":
            await desk.answer(raised.id, option="yes", by=ANA)
        else:
            await desk.cancel(raised.id, by=ANA)
        with anyio.fail_after(scaled(2)):
            delivery = await sub.__anext__()
        # The run woken by the event must find the decision closed already.
        assert not (await board.get(raised.id)).is_open
        await delivery.ack()
        assert (delivery.kind, delivery.data) == ("wake", {"run": "r1", "why": "decision"})
        with pytest.raises(DecisionClosed):
            await desk.answer(raised.id, option="no", by=ANA)
        assert await read_events(sub, 0.3) == []
