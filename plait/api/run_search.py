"""Searching and paging the run listing: by id or id prefix, graph, agent, status and
start time, one page at a time after an opaque cursor."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from plait.api.views import RunPage, RunRow
from plait.errors import ConfigError
from plait.runs.record import RunSummary
from plait.schedules.model import schedule_of_run

_TERMINAL = {"done", "failed", "cancelled"}


@dataclass(frozen=True)
class RunQuery:
    """What runs to list.

    Attributes:
        q: a run id, or the start of one (``grun_01a2``).
        agent: only this agent's runs.
        graph: only runs of this graph (its name).
        status: only runs in this listing status.
        since: only runs started at or after this (epoch seconds).
        until: only runs started before this (epoch seconds).
        schedule: only runs this schedule started.
    """

    q: str | None = None
    agent: str | None = None
    graph: str | None = None
    status: str | None = None
    since: float | None = None
    until: float | None = None
    schedule: str | None = None

    def matches(self, run: RunSummary) -> bool:
        """Whether ``run`` is one of the runs asked for."""
        if self.q and not run.run_id.startswith(self.q.strip()):
            return False
        if self.agent and run.agent != self.agent:
            return False
        if self.graph and run.graph != self.graph:
            return False
        if self.status and run.status != self.status:
            return False
        if self.since is not None and run.created_at < self.since:
            return False
        if self.until is not None and run.created_at >= self.until:
            return False
        return not self.schedule or schedule_id_of(run.run_id) == self.schedule


def schedule_id_of(run_id: str) -> str | None:
    """The schedule that started ``run_id``, if one did."""
    found = schedule_of_run(run_id)
    return None if found is None else found[0]


def row_of(run: RunSummary) -> RunRow:
    """``run`` as a listed row: with its duration once it ended, and its schedule."""
    ended = run.status in _TERMINAL
    return RunRow(
        **run.model_dump(),
        duration=max(0.0, run.updated_at - run.created_at) if ended else None,
        schedule_id=schedule_id_of(run.run_id),
    )


def _order(run: RunSummary) -> tuple[float, str]:
    return (run.created_at, run.run_id)


def encode_cursor(run: RunSummary) -> str:
    """The cursor of the page after ``run``."""
    text = f"{run.created_at!r} {run.run_id}"
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, str]:
    """The (start time, run id) a cursor continues after.

    Raises:
        ConfigError: it is no cursor this API gave.
    """
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        when, run_id = text.split(" ", 1)
        return float(when), run_id
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(
            f"cursor {cursor[:40]!r} is not one this API gave: pass a page's next_cursor"
        ) from exc


def page_of(
    runs: list[RunSummary],
    query: RunQuery,
    *,
    limit: int,
    offset: int = 0,
    cursor: str | None = None,
) -> RunPage:
    """One page of the runs ``query`` matches, newest first: those after ``cursor``
    (a page's ``next_cursor``), skipping ``offset`` more, at most ``limit``."""
    found = sorted((r for r in runs if query.matches(r)), key=_order, reverse=True)
    start = 0
    if cursor is not None:
        after = decode_cursor(cursor)
        start = next((i for i, r in enumerate(found) if _order(r) < after), len(found))
    chosen = found[start + offset : start + offset + limit]
    more = start + offset + limit < len(found)
    return RunPage(
        items=[row_of(r) for r in chosen],
        total=len(found),
        limit=limit,
        offset=offset,
        next_cursor=encode_cursor(chosen[-1]) if more and chosen else None,
    )


__all__ = ["RunQuery", "decode_cursor", "encode_cursor", "page_of", "row_of", "schedule_id_of"]
