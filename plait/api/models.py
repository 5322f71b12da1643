"""The shapes the HTTP API reads and writes: pydantic models at its edges."""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from plait.api.views import RunPage
from plait.runs.rerun import ForkOrigin
from plait.runs.service import LISTING_STATUSES


class Request(BaseModel):
    """A request body: each field of the type its schema says, no coercion (``"1"`` is
    no number, ``"yes"`` no boolean), so what the spec calls invalid is refused."""

    model_config = ConfigDict(strict=True)


def one_of_fields(*names: str) -> dict[str, Any]:
    """The schema's words for "at least one of ``names``, not null"."""
    return {"anyOf": [{"required": [name], "properties": {name: {"not": {"type": "null"}}}}
                      for name in names]}  # fmt: skip


def _require_one(model: BaseModel, names: tuple[str, ...]) -> None:
    if all(getattr(model, name) is None for name in names):
        raise ValueError(f"give at least one of {', '.join(names)}")


class StartRun(Request):
    """A run to start: a stored graph, its input, optionally a version and model."""

    agent: str = Field(min_length=1, description="The graph's agent.")
    name: str = Field(min_length=1, description="The graph's name.")
    input: Any = Field(default=None, description="The run's input ({{input}}).")
    version: int | None = Field(default=None, ge=1, description="Default: the newest.")
    model: str | None = Field(
        default=None, description="A model spec for every agent (default: each profile's)."
    )
    input_untrusted: bool = Field(
        default=False, description="The input is outside content: what reads it is tainted."
    )


class Answer(Request):
    """An answer to a decision: an option, a text, or an option with a note."""

    model_config = ConfigDict(json_schema_extra=one_of_fields("option", "text"))

    option: str | None = Field(default=None, description="The chosen option.")
    text: str | None = Field(default=None, description="A text answer, or a note.")

    @model_validator(mode="after")
    def _given(self) -> Answer:
        _require_one(self, ("option", "text"))
        return self


class ResumeRun(Request):
    """What to answer a waiting run (``approve`` / ``reject`` for an approval)."""

    answer: str = Field(description="The answer: an option or a text.")


class ForkRun(Request):
    """Where to fork a run, and optionally a new input.

    Without ``input`` the new run keeps its parent's input.
    """

    at: str = Field(
        min_length=1,
        description="The committed visit to start after: node:visit (or node for its last).",
    )
    input: Any = Field(default=None, description="The new run's input (default: the parent's).")
    input_untrusted: bool = Field(
        default=False, description="A new input is outside content: what reads it is tainted."
    )


_LIMITS = ("steps", "tokens", "dollars", "wall_seconds", "retries")


class RaiseBudget(Request):
    """Amounts to add to a run's budget, per limit (each positive; at least one)."""

    model_config = ConfigDict(json_schema_extra=one_of_fields(*_LIMITS))

    steps: float | None = Field(default=None, gt=0)
    tokens: float | None = Field(default=None, gt=0)
    dollars: float | None = Field(default=None, gt=0)
    wall_seconds: float | None = Field(default=None, gt=0)
    retries: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _given(self) -> RaiseBudget:
        _require_one(self, _LIMITS)
        return self


class Asking(BaseModel):
    """What a person must answer for a run to go on (its own or a child run's question)."""

    run_id: str = Field(description="The run that asks: this one, or a child run.")
    node: str
    kind: str
    ask: str
    decision_id: str | None = None
    options: list[str] | None = None


class RunView(BaseModel):
    """A run as the API shows it."""

    run_id: str
    status: str
    agent: str
    graph: str
    version: int
    sha256: str
    created_at: float
    updated_at: float
    ended_detail: str | None = None
    error: str | None = None
    error_node: str | None = None
    current: list[str] = Field(description="Nodes in flight, or the node the run waits at.")
    asking: Asking | None = None
    usage: dict[str, float]
    output: Any = None
    parent: str | None = None
    forked_from: ForkOrigin | None = Field(
        default=None, description="For a fork: the parent's audit event it starts after."
    )
    duration: float | None = Field(
        default=None, description="Seconds from start to end, once it ended."
    )
    schedule_id: str | None = Field(default=None, description="The schedule that started it.")
    budget_raised: dict[str, float] = Field(
        default_factory=dict, description="What people added to its budget, per limit."
    )
    fire_at: float | None = Field(
        default=None, description="For a scheduled run: the fire time it ran for."
    )


class Verified(BaseModel):
    """The audit chain's check."""

    run_id: str
    verified: bool
    events: int | None = Field(default=None, description="Events verified (if it holds).")
    error: str | None = Field(default=None, description="The first disagreement, if any.")


class GraphView(BaseModel):
    """A stored graph version and its drawing."""

    agent: str
    name: str
    version: int
    sha256: str
    imported_at: float
    spec: dict[str, Any]
    mermaid: str = Field(description="The graph as a Mermaid flowchart.")


class Whoami(BaseModel):
    """Who the request's token acts as."""

    kind: str = Field(description="human or agent.")
    name: str


ListingStatus = Literal[
    "running", "waiting_human", "waiting_approval", "waiting_child", "done", "failed", "cancelled"
]
"""A status runs are listed and filtered by (see :data:`~plait.runs.service.LISTING_STATUSES`)."""

assert set(get_args(ListingStatus)) == set(LISTING_STATUSES)

__all__ = [
    "Answer",
    "Asking",
    "ForkRun",
    "GraphView",
    "ListingStatus",
    "RaiseBudget",
    "Request",
    "ResumeRun",
    "RunPage",
    "RunView",
    "StartRun",
    "Verified",
    "Whoami",
    "one_of_fields",
]
