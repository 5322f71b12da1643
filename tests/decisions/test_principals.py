"""Principals: who may decide."""

from __future__ import annotations

import dataclasses

import pytest

from plait.decisions import Agent, Human, Principal, require_human
from plait.errors import ConfigError, NotPermitted


def test_a_human_passes_and_is_returned() -> None:
    ana = Human("ana")
    assert require_human(ana, "answer a decision") is ana


@pytest.mark.parametrize("who", [Agent("planner"), Principal("someone")])
def test_anyone_else_is_refused_with_a_message_naming_them(who: Principal) -> None:
    with pytest.raises(NotPermitted) as info:
        require_human(who, "raise a budget")
    assert str(info.value) == f"only a human may raise a budget; {who} is not one"
    assert isinstance(info.value, PermissionError)


def test_principals_are_frozen_values_with_a_readable_form() -> None:
    assert Human("ana") == Human("ana")
    agent: Principal = Agent("ana")
    assert Human("ana") != agent
    assert str(Agent("planner")) == "agent 'planner'"
    with pytest.raises(dataclasses.FrozenInstanceError):
        Human("ana").name = "bob"  # type: ignore[misc]


@pytest.mark.parametrize("name", ["", "  "])
def test_a_principal_needs_a_name(name: str) -> None:
    with pytest.raises(ConfigError, match="non-empty name"):
        Human(name)
