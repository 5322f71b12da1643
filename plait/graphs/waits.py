"""A parked run's decisions: what it waits on closed, an interrupted node escalated to a
person, a person's cancel and budget raise, an answer in the form its decision takes.

The waiting tail of the engine (:mod:`plait.graphs.engine`), asked by a durable run's
owner and service: pure as the engine is (no I/O, ``now`` passed in), each function
returns a new state with the events it makes and never mutates its argument.
"""

from __future__ import annotations

from dataclasses import dataclass

from plait.graphs.engine import cancel, fail, raise_budget, resume
from plait.graphs.events import Event, NodeIndeterminate, RunResumed
from plait.graphs.state import Attempt, RunState, Waiting, copied

_CHILD_ENDED = frozenset({"done", "failed", "cancelled", "missing"})
"""A child run's statuses that resume its parent: the terminal ones, or gone."""


@dataclass(frozen=True, slots=True)
class Closed:
    """How what a parked run waits on stands now, for :func:`recheck` to decide on.

    Attributes:
        status: the decision's status (``open``, ``answered``, ``expired``,
            ``cancelled``), or for a run parked on a child run that run's status
            (``missing`` if it is gone).
        value: the decision's answer (an option or a text); None for a child run.
        by: who closed the decision, if anyone did.
        decision_id: the decision's id; None for a child run.
    """

    status: str
    value: str | None = None
    by: str | None = None
    decision_id: str | None = None


def recheck(
    state: RunState, closed: Closed | None, *, now: float
) -> tuple[RunState, list[Event]] | None:
    """A parked run's state once what it waits on closed, with the event saying who
    closed it and how (:class:`~plait.graphs.events.RunResumed`); None while it stays
    parked (``closed`` None: nothing to read).

    A human question or an approval resumes the run (its node runs again and takes the
    answer); an interrupted node a person chose to retry runs again, as under ``retry``;
    any other close of an interrupted node's or a budget's decision fails the run. A
    budget decision answered ``raise`` keeps it parked: the raise itself comes as a
    :func:`raise_budget`, which unparks it. A child run that ended (or is gone) resumes
    its parent, whose node then takes the child's output.
    """
    waiting = state.waiting
    if waiting is None or closed is None:
        return None
    if waiting.kind == "subgraph":
        if closed.status not in _CHILD_ENDED:
            return None
        child = RunResumed(node=waiting.node, status=closed.status, child=waiting.child or "")
        return resume(state, now=now), [child]
    if closed.status == "open" or (waiting.kind == "budget" and closed.value == "raise"):
        return None
    event = RunResumed(
        node=waiting.node,
        status=closed.status,
        decision_id=closed.decision_id,
        answer=closed.value,
        by=closed.by or ("expiry" if closed.status == "expired" else None),
    )
    if waiting.kind in ("human", "approval"):
        return resume(state, now=now), [event]
    if waiting.kind == "indeterminate" and closed.value == "retry":
        s = resume(state, now=now)
        s.usage = s.usage.model_copy(update={"retries": s.usage.retries + 1})
        return s, [event]
    if waiting.kind == "indeterminate":
        detail, error = "indeterminate", f"{waiting.node}: a person chose not to retry"
    else:
        detail, error = "budget_exhausted", "the budget decision closed without a raise"
    return fail(state, detail, error, now=now), [event]


def interrupted_ask(crashed: Attempt) -> str:
    """What a person is asked about a node interrupted mid-flight (``escalate``)."""
    return (
        f"Node {crashed.node} (visit {crashed.visit}) was interrupted mid-flight and "
        "its effect is unknown. Retry it?"
    )


def escalate(
    state: RunState, crashed: Attempt, *, decision_id: str
) -> tuple[RunState, list[Event]]:
    """Park the run on a person's choice to retry ``crashed``, whose effect is unknown
    (its node's ``on_indeterminate`` is ``escalate``), with its event; see
    :func:`recheck`."""
    s = copied(state, {"attempts": state.attempts.copy()})
    s.attempts.pop(crashed.node, None)
    s.waiting = Waiting(
        node=crashed.node,
        kind="indeterminate",
        ask=interrupted_ask(crashed),
        decision_id=decision_id,
        options=["retry", "fail"],
    )
    s.status = "waiting_human"
    return s, [NodeIndeterminate(node=crashed.node, visit=crashed.visit)]


def cancel_run(state: RunState, *, now: float) -> RunState | None:
    """A person's cancel of the run (see :func:`cancel`); None if it is already over."""
    return None if state.terminal else cancel(state, now=now)


def budget_raised(state: RunState, extra: dict[str, float], *, now: float) -> RunState:
    """A person's budget raise: it unparks a run parked on its budget, and answers no
    question, so a run waiting on a person keeps waiting (see :func:`raise_budget`)."""
    s = raise_budget(state, extra, now=now)
    if state.waiting is not None and state.waiting.kind != "budget":
        s.waiting, s.status = state.waiting, state.status
    return s


_YES = ("yes", "y", "approve", "approved")
_NO = ("no", "n", "reject", "rejected")


def answer_for(waiting: Waiting, answer: str) -> str:
    """A person's answer to what the run waits on, as its decision takes it: an
    approval takes yes/no words as ``approve``/``reject``."""
    if waiting.kind != "approval":
        return answer
    lowered = answer.strip().lower()
    return "approve" if lowered in _YES else ("reject" if lowered in _NO else answer)


__all__ = [
    "Closed",
    "answer_for",
    "budget_raised",
    "cancel_run",
    "escalate",
    "interrupted_ask",
    "recheck",
]
