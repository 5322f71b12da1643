"""The decision record: shapes per kind, answer checks, value, closed messages."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from plait.decisions import Decision, DecisionAnswer
from plait.errors import DecisionError


def make(**fields: Any) -> Decision:
    base: dict[str, Any] = {"id": "d1", "title": "Go?", "created_at": 1.0, "raised_by": "n"}
    return Decision(**(base | fields))


def test_confirm_always_has_yes_and_no() -> None:
    assert make().options == ["yes", "no"]
    assert make(options=["Yes", "NO"]).options == ["yes", "no"]
    with pytest.raises(ValidationError, match="yes and no"):
        make(options=["ok", "cancel"])


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"kind": "choice", "options": ["a"]}, "at least two options"),
        ({"kind": "choice", "options": ["a", "a"]}, "repeat"),
        ({"kind": "text", "options": ["a", "b"]}, "no options"),
        ({"on_expire": "default"}, "needs a default"),
        ({"default": "maybe"}, "not an option"),
        ({"expires_at": float("inf")}, "finite"),
    ],
)
def test_bad_shapes_are_refused(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        make(**fields)


def test_a_default_is_normalised_to_its_option() -> None:
    assert make(default="YES", on_expire="default").default == "yes"
    assert make(kind="text", default="anything", on_expire="default").default == "anything"


def test_resolve_answer_per_kind() -> None:
    confirm = make()
    assert confirm.resolve_answer("Yes", None) == ("yes", None)
    assert confirm.resolve_answer("no", "not today") == ("no", "not today")
    choice = make(kind="choice", options=["red", "Green", "blue"])
    assert choice.resolve_answer("Green", None) == ("Green", None)
    assert choice.resolve_answer("green", None) == ("Green", None)
    text = make(kind="text")
    assert text.resolve_answer(None, "ship it") == (None, "ship it")


@pytest.mark.parametrize(
    ("fields", "option", "text", "message"),
    [
        ({}, "maybe", None, "choose one of 'yes', 'no'"),
        ({}, None, None, "needs an option: one of 'yes', 'no'"),
        ({"kind": "choice", "options": ["a", "b"]}, "c", None, "choose one of 'a', 'b'"),
        ({"kind": "text"}, None, None, "non-empty text"),
        ({"kind": "text"}, None, "   ", "non-empty text"),
        ({"kind": "text"}, "yes", "x", "takes text, not an option"),
    ],
)
def test_answers_that_do_not_fit_are_refused(
    fields: dict[str, Any], option: str | None, text: str | None, message: str
) -> None:
    with pytest.raises(DecisionError, match=message):
        make(**fields).resolve_answer(option, text)


def test_value_follows_the_status() -> None:
    assert make().value is None
    answered = make(status="answered", answer=DecisionAnswer(option="yes", by="ana", at=2.0))
    assert answered.value == "yes"
    text = make(kind="text", status="answered", answer=DecisionAnswer(text="hi", by="a", at=2.0))
    assert text.value == "hi"
    assert make(status="expired", default="no", on_expire="default").value == "no"
    assert make(status="expired", default="no", on_expire="fail").value is None


def test_closed_messages_say_who_and_when() -> None:
    answered = make(status="answered", closed_by="ana", closed_at=0.0)
    assert answered.describe_closed() == (
        "decision d1 was already answered by ana at 1970-01-01T00:00:00+00:00"
    )
    assert (
        "cancelled by bob"
        in make(status="cancelled", closed_by="bob", closed_at=0.0).describe_closed()
    )
    assert make(status="expired", closed_at=60.0).describe_closed() == (
        "decision d1 expired at 1970-01-01T00:01:00+00:00"
    )


def test_a_record_round_trips_through_a_plain_dict() -> None:
    decision = make(
        kind="choice",
        options=["a", "b"],
        data={"dollars": 5},
        notify={"topic": "run.r1", "kind": "wake", "data": {"run": "r1"}},
    )
    assert Decision.model_validate(decision.model_dump()) == decision
