"""A run's trajectory: one typed step per node visit, the same in-session and durably.

:func:`plait.run_graph` collects :class:`TrajectoryStep` objects as visits commit;
:meth:`plait.Runs.trajectory` reads them back from a durable run's audit chain. Both
runners walk the same engine, so a graph gives the same steps either way (node, visit,
verdict, output, error); what only a durable run keeps (the tool calls read back from
its conversations, the decision a visit raised and who answered it, a visit still
parked on a person) is filled in where it exists and empty otherwise.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, computed_field

StepStatus = Literal["done", "failed", "waiting"]
"""Where a visit stands.

- ``done``: committed with an output.
- ``failed``: committed with an error.
- ``waiting``: parked on a person; not committed yet (durable runs only).
"""


class StepUsage(BaseModel):
    """What one visit spent."""

    input_tokens: int = 0
    output_tokens: int = 0
    dollars: float = 0.0


class ToolCall(BaseModel):
    """A tool call an agent visit made, with the result it got back."""

    name: str | None = None
    arguments: Any = None
    result: Any = None


class StepDecision(BaseModel):
    """The decision a visit raised, and who closed it when.

    Attributes:
        id: the decision's id.
        status: its status, or ``gone`` when its record no longer exists.
        answer: the chosen option or the text answered.
        by: who answered or cancelled it.
        label: the name the answerer gave (``PLAIT_USER``): a label, not who.
        at: when it closed (Unix seconds).
    """

    id: str
    status: str
    answer: str | None = None
    by: str | None = None
    label: str | None = None
    at: float | None = None


class TrajectoryStep(BaseModel):
    """One node visit, in commit order.

    Attributes:
        node: the node (``fetch[0]`` for a fan-out instance).
        visit: the node's visit number, from 1.
        status: see :data:`StepStatus`.
        prompt: the rendered prompt, or the question a waiting visit asks.
        output: the visit's output.
        verdict: a verifier's verdict.
        usage: what the visit spent.
        started_at: when the visit started (Unix seconds).
        ended_at: when it ended.
        error: why the visit failed.
        parent: for a visit inside an in-session subgraph, the parent's subgraph node.
        tools: the tool calls the visit made (durable runs).
        decision: the decision the visit raised (durable runs).
    """

    node: str
    visit: int
    status: StepStatus = "done"
    prompt: str | None = None
    output: Any = None
    verdict: str | None = None
    usage: StepUsage = Field(default_factory=StepUsage)
    started_at: float | None = None
    ended_at: float | None = None
    error: str | None = None
    parent: str | None = None
    tools: list[ToolCall] = Field(default_factory=list)
    decision: StepDecision | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def elapsed(self) -> float | None:
        """Seconds the visit took, if it ended."""
        if self.started_at and self.ended_at:
            return self.ended_at - self.started_at
        return None


__all__ = ["StepDecision", "StepStatus", "StepUsage", "ToolCall", "TrajectoryStep"]
