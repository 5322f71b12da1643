"""Progress: what a watcher shows of one committed transition, as one typed model.

:class:`~plait.runs.commit.RunCommit` writes a :class:`Progress` into the log entry of
every transition it audits (see :mod:`plait.runs.log`); ``plait graph run`` prints it,
``GET /api/runs/{id}/progress`` and the ``progress`` server-sent events carry it (its
schema is in the API's OpenAPI document), and the console reads it from there. One
model, so a field added here reaches every watcher, and a reader never guesses a key.

Stored with its unset (None) fields left out, so a claim's progress stays a few bytes.

Why the log and no topic: runs once had a durable ``runs/<id>/events`` topic that owners
subscribed to and every finished run scheduled a sweep to delete (kept for
``progress_kept_s``), while nothing ever published on it. It is gone, with its sweep
and its knob. A durable topic written on every transition would put a publish into
every commit whether anyone watches or not; the live channel watchers need (typed
progress, token deltas, resumable by offset, across failover) is a bounded, ephemeral
per-run buffer a watcher subscribes to, which costs nothing when no one does. Until it
exists, watchers follow the log (:class:`plait.runs.log.LogFollower`), whose entries
are written in the commit anyway.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from plait.graphs.state import Attempt, RunStatus, Waiting, copied


class StartedVisit(BaseModel):
    """A visit a transition claimed: it runs from now on.

    Attributes:
        node: the node (or fan-out instance) id.
        visit: its visit number.
        at: when it was claimed (epoch seconds).
    """

    node: str
    visit: int
    at: float

    @classmethod
    def of(cls, attempt: Attempt) -> StartedVisit:
        """The visit ``attempt`` claimed."""
        # The attempt's fields are typed already: once per claim, no validation.
        return copied(
            _NO_VISIT, {"node": attempt.node, "visit": attempt.visit, "at": attempt.started_at}
        )

    def stored(self) -> dict[str, Any]:
        """The stored form (as ``model_dump``)."""
        return {"node": self.node, "visit": self.visit, "at": self.at}


_NO_VISIT = StartedVisit(node="", visit=0, at=0.0)


class Progress(BaseModel):
    """What a watcher shows of one transition of a run.

    Attributes:
        status: the run's status after it.
        audit_seq: the record's ``audit_seq`` after it (orders a run's progress).
        node: the node whose visit it committed, claimed or parked on (None for a
            transition of the whole run: start, cancel, retry, fork).
        visit: the visit it committed (or, with ``at``, the visit it claimed).
        at: for a claim by the wake that runs it: when the visit started.
        error: the visit's error, if it failed.
        verdict: a verifier's verdict.
        elapsed: how long the visit ran (seconds).
        critique: a verifier's reply, when it gave a verdict.
        ended_detail: why the run ended, once it has.
        waiting: what the run waits on, once parked.
        started: the visits it claimed, to run next.
        retry_in: for a visit that failed on a transient error: seconds until it runs again.
    """

    status: RunStatus
    audit_seq: int
    node: str | None = None
    visit: int | None = None
    at: float | None = None
    error: str | None = None
    verdict: str | None = None
    elapsed: float | None = None
    critique: Any = None
    ended_detail: str | None = None
    waiting: Waiting | None = None
    started: list[StartedVisit] = Field(default_factory=list)
    retry_in: float | None = None

    @classmethod
    def of(cls, status: RunStatus, audit_seq: int, **fields: Any) -> Progress:
        """A progress built by the commit from values typed already: not validated
        again (once per transition). ``fields`` are the other fields, by name."""
        return copied(
            _NO_PROGRESS, {"started": [], "status": status, "audit_seq": audit_seq, **fields}
        )

    def stored(self) -> dict[str, Any]:
        """The stored form: its fields, those still None left out (as
        ``model_dump(exclude_none=True)``, without the serializer: once per transition)."""
        out: dict[str, Any] = {}
        for name, value in self.__dict__.items():
            if value is None:
                continue
            if name == "started":
                value = [visit.stored() for visit in value]
            elif name == "waiting" or isinstance(value, BaseModel):
                value = value.model_dump(exclude_none=True)
            elif not isinstance(value, str | int | float):
                # A critique may be any value: the serializer's form of it.
                value = _ANY.dump_python(value, exclude_none=True)
            out[name] = value
        return out

    @classmethod
    def parse(cls, value: Any) -> Progress | None:
        """A stored progress (None for one that is not: an older or damaged entry)."""
        if not isinstance(value, dict):
            return None
        try:
            return cls.model_validate(value)
        except ValidationError:
            return None


_NO_PROGRESS = Progress(status="running", audit_seq=0)
_ANY: TypeAdapter[Any] = TypeAdapter(Any)


__all__ = ["Progress", "StartedVisit"]
