"""The durable run record and where a run's data lives in the mesh.

::

    runs/<run_id>                      the record (RunRecord): small, CAS-written
    runs/<run_id>/audit/<seq>          the run log, one entry per transition: its audit
                                       event(s), output(s), conversation delta and
                                       progress (see plait.runs.log)
    runindex/<run_id>                  a summary for listing runs, written on status change
    runlive/<partition>/<run_id>       present while it is listed running (plait.runs.live)

Runs written before the log kept outputs under ``runs/<run_id>/out/<key>/<visit>``,
conversations under ``runs/<run_id>/hist/<key>/<visit>`` and one audit event per key;
they are still read.

The record never holds output values, so a commit writes the same few bytes on step 5
and on step 5,000.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from plait.graphs.state import RunState, RunStatus
from plait.ids import RUN_ID_PREFIX, ActorId, RunId

OWNER_KIND = "plait.runs.owner:handle"
"""The actor kind of run owners."""

INDEX_PREFIX = "runindex/"
"""Where run listings live: ``runindex/<run id>``."""

MESH_KEYS = (f"runs/{RUN_ID_PREFIX}", INDEX_PREFIX)
"""The mesh key prefixes this service owns: code given the mesh may read them, never
write them (``plait.programs.capabilities`` guards them; a test checks it does)."""

MESH_TOPICS = (f"runs/{RUN_ID_PREFIX}",)
"""The topics (or topic prefixes) this service owns: code given the mesh may not publish
on them (``plait.programs.capabilities`` guards them; a test checks it does)."""


def record_key(run_id: str) -> str:
    """The mesh key of a run's record."""
    return f"runs/{run_id}"


def output_key(run_id: str, key: str, visit: int) -> str:
    """The mesh key of one visit's output."""
    return f"runs/{run_id}/out/{key}/{visit}"


def history_key(run_id: str, key: str) -> str:
    """The mesh key of a node's conversation."""
    return f"runs/{run_id}/hist/{key}"


def audit_prefix(run_id: str) -> str:
    """The key prefix of a run's audit events (in seq order under scan)."""
    return f"runs/{run_id}/audit/"


def audit_key(run_id: str, seq: int) -> str:
    """The mesh key of audit event ``seq``."""
    return f"{audit_prefix(run_id)}{seq:010d}"


def index_key(run_id: str) -> str:
    """The mesh key of a run's listing summary."""
    return f"{INDEX_PREFIX}{run_id}"


def owner_id(run_id: str) -> ActorId:
    """The id of the durable actor that owns a run."""
    return ActorId(f"run:{run_id}")


def parent_run_id(record: RunState) -> str | None:
    """The run a child run belongs to (its ``parent`` is ``<run_id>/<node>``), if any."""
    return record.parent.partition("/")[0] if record.parent else None


def child_run_id(run_id: str, key: str, visit: int) -> RunId:
    """The id of the child run a subgraph node's visit starts: stable, so a visit run
    again after a crash finds its child instead of starting a second one."""
    return RunId(f"{run_id}__{key}_{visit}")


def tick_key(run_id: str) -> str:
    """The schedule key of a run's fallback tick (stable, so a tick is never doubled)."""
    return f"tick:{run_id}"


class RunRecord(RunState):
    """The run state plus what a durable run needs to be served by any process.

    Attributes:
        model: the model spec answering for every agent (``--model``), or None for
            each agent profile's own.
        audit_seq: audit events written so far.
        workspace: the absolute directory the run was started from, where its tools
            work (or in their profile's ``workspace`` relative to it) on any worker;
            None in records from before it was kept: the serving process's own.
        trace: the W3C trace context the run was started under (a parent run's visit,
            a program's node, an agent's turn), whose trace its spans join; None: a
            trace of its own (see :mod:`plait.telemetry.context`).
    """

    model: str | None = None
    audit_seq: int = 0
    workspace: str | None = None
    trace: str | None = None


_RECORD_SERIALIZER = RunRecord.__pydantic_serializer__


class RunSummary(BaseModel):
    """A run as listed by ``plait graph runs``."""

    run_id: str
    agent: str
    graph: str
    version: int
    status: RunStatus
    created_at: float
    updated_at: float
    ended_detail: str | None = None


def listing_status(status: str) -> str:
    """The status shown in listings: ``ready`` and ``running`` are both ``running``."""
    return "running" if status in ("ready", "running") else status


def summary_of(record: RunState) -> RunSummary:
    """The listing summary of a record."""
    return RunSummary(
        run_id=record.run_id,
        agent=record.graph.agent,
        graph=record.graph.name,
        version=record.graph.version,
        status=record.status,
        created_at=record.created_at,
        updated_at=record.updated_at,
        ended_detail=record.ended_detail,
    )


def dump(record: RunRecord) -> dict[str, Any]:
    """The record as stored."""
    # model_dump's defaults, through the serializer itself: once per transition.
    return _RECORD_SERIALIZER.to_python(record)  # type: ignore[no-any-return]


def as_record(state: RunState) -> RunRecord:
    """``state`` as a run record: the engine keeps a record's class, so usually itself."""
    return state if isinstance(state, RunRecord) else RunRecord.model_validate(state.model_dump())


def load(value: Any) -> RunRecord:
    """A stored record."""
    return RunRecord.model_validate(value)


__all__ = [
    "INDEX_PREFIX",
    "MESH_KEYS",
    "MESH_TOPICS",
    "OWNER_KIND",
    "RUN_ID_PREFIX",
    "RunRecord",
    "RunSummary",
    "as_record",
    "audit_key",
    "audit_prefix",
    "child_run_id",
    "dump",
    "history_key",
    "index_key",
    "listing_status",
    "load",
    "output_key",
    "owner_id",
    "parent_run_id",
    "record_key",
    "summary_of",
    "tick_key",
]
