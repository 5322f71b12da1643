"""Human decisions: raise, wait, answer, cancel, expire.

A node that needs a person raises a decision on a :class:`DecisionAsker` and waits (or
parks its run and is woken by the decision's ``notify`` event). Only a
:class:`DecisionAnswerer`, used by a :class:`Human`, can answer or cancel it::

    board = DecisionAsker(mesh)
    d = await board.raise_("Release v2?", id="run_1.approve.1", by=Agent("release"))
    ...
    await DecisionAnswerer(mesh).answer(d.id, option="yes", by=Human("ana"))

Decisions sit below graphs and runs, which raise them, and above the mesh they are
stored in; a decision's ``run_id`` and ``node`` are data, never a call into runs.
"""

from __future__ import annotations

from plait.decisions.model import (
    CONFIRM_OPTIONS,
    Decision,
    DecisionAnswer,
    DecisionId,
    DecisionKind,
    DecisionStatus,
    Notify,
    OnExpire,
)
from plait.decisions.principals import Agent, Human, Principal, require_human
from plait.decisions.store import (
    DEFAULT_TOPIC,
    DecisionAnswerer,
    DecisionAsker,
    decision_key,
    new_decision_id,
)

__all__ = [
    "CONFIRM_OPTIONS",
    "DEFAULT_TOPIC",
    "Agent",
    "Decision",
    "DecisionAnswer",
    "DecisionAnswerer",
    "DecisionAsker",
    "DecisionId",
    "DecisionKind",
    "DecisionStatus",
    "Human",
    "Notify",
    "OnExpire",
    "Principal",
    "decision_key",
    "new_decision_id",
    "require_human",
]
