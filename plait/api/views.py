"""The shapes of the console's read views: the inbox, the run's drawn graph, agents,
topics and the cluster. Pydantic models, so the OpenAPI spec describes them."""

from __future__ import annotations

from pydantic import BaseModel, Field

from plait.decisions import Decision
from plait.graphs.drawing import GraphDrawing
from plait.runs.record import RunSummary


class RunRow(RunSummary):
    """A run as listed, with its duration and the schedule that started it."""

    duration: float | None = Field(
        default=None, description="Seconds from start to end, once it ended."
    )
    schedule_id: str | None = Field(default=None, description="The schedule that started it.")


class RunPage(BaseModel):
    """One page of runs, newest first."""

    items: list[RunRow]
    total: int = Field(description="Runs matching the filters, on every page.")
    limit: int
    offset: int
    next_cursor: str | None = Field(
        default=None, description="Pass as ``cursor`` for the next page; None on the last."
    )


class RunGraph(GraphDrawing):
    """A run's graph version drawn, with where the run is and what it visited."""

    run_id: str
    status: str = Field(description="The run's listing status.")
    current: list[str] = Field(description="Nodes in flight, or the node the run waits at.")
    visits: dict[str, int] = Field(
        description="Committed or waiting visits per node (fan-out instances count "
        "toward their node)."
    )
    failed: list[str] = Field(description="Nodes whose latest visit failed.")


class InboxItem(BaseModel):
    """An open decision with the run that waits on it."""

    decision: Decision
    run: RunSummary | None = Field(description="The run it belongs to, if any and found.")


class InboxPage(BaseModel):
    """Open decisions, oldest first (the longest waiting at the top)."""

    items: list[InboxItem]
    total: int = Field(description="Open decisions matching the filters.")
    served: bool = Field(
        description="Whether a process serves every run of the mesh: without one an "
        "answered run waits until a worker starts."
    )


class ProfileRow(BaseModel):
    """An agent profile, as the agents page lists it."""

    name: str
    model: str | None
    tools: list[str]
    delegates: list[str]


class ActorRow(BaseModel):
    """An agent actor, as the agents page lists it."""

    name: str
    status: str = Field(description="running, stopped or parked (why).")
    topics: list[str] = Field(description="The topic patterns it subscribes to.")
    backlog: int = Field(description="Messages sent to it and not handled yet.")
    turns: int
    tokens_today: int
    dollars_today: float
    created_at: float


class AgentsView(BaseModel):
    """The agents page: profiles graphs name, and agent actors."""

    profiles: list[ProfileRow]
    actors: list[ActorRow]


class TopicRow(BaseModel):
    """A topic of the mesh."""

    name: str
    held: int = Field(description="Events not yet acked by its readers (or held, unread).")
    subscribers: list[str] = Field(description="Agent actors whose patterns match it.")


class TopicsView(BaseModel):
    """The mesh's topics, sorted by name."""

    items: list[TopicRow]
    total: int
    truncated: bool = Field(description="More topics match than are listed.")


class MemberRow(BaseModel):
    """A process holding partition leases."""

    host: str
    pid: int
    serves: str = Field(description="all runs, or one run (a foreground command).")
    held: list[int] = Field(description="The partitions it holds.")
    in_flight: int = Field(description="Its messages taken and not finished.")


class HeartbeatRow(BaseModel):
    """A process serving runs, by its heartbeat."""

    host: str
    pid: int
    serves: str
    run_id: str | None
    started: float
    beat: float
    tools: int = Field(description="How many tools it offers.")


class ClusterView(BaseModel):
    """Who serves the mesh: processes, partitions, and each partition's backlog."""

    served: bool = Field(description="Whether a process serves every run.")
    partitions: int
    members: list[MemberRow]
    heartbeats: list[HeartbeatRow]
    unheld: list[int] = Field(description="Partitions no live process holds.")
    backlog: list[int] = Field(description="Unacked mailbox messages, by partition.")


__all__ = [
    "ActorRow",
    "AgentsView",
    "ClusterView",
    "HeartbeatRow",
    "InboxItem",
    "InboxPage",
    "MemberRow",
    "ProfileRow",
    "RunGraph",
    "RunPage",
    "RunRow",
    "TopicRow",
    "TopicsView",
]
