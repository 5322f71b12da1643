"""Ids as a person types them: a unique prefix stands for the whole id.

Every command that takes the id of a run, a decision, a schedule, an agent actor or a token
resolves what was typed with :func:`resolve`, once, against the keys the mesh keeps
for that kind: an id that exists is itself; else the one id starting with what was
typed; several are refused with one line naming them (``ambiguous: 3 runs match
'grun_01': ...``); where none is, the service the command calls says so. Tables
shorten ids on a terminal to the shortest prefix unique among those shown
(:func:`plait.cli._output.short_ids`), so what a table shows can be typed back.

The key prefixes are written here rather than imported, so that a light command
(``plait graph runs``) does not import the decision desk or the actor directory to
resolve an id; tests/cli/test_ids.py checks them against the services' own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import typer

from plait.cli._common import fail
from plait.mesh import Mesh

SHOWN = 5
"""How many of the ids an ambiguous prefix matches its error line names."""


@dataclass(frozen=True, slots=True)
class IdKind:
    """A kind of id a command takes, and where the mesh keeps one key per id.

    Attributes:
        noun: what one is called in messages (``run``).
        plural: what several are called (``runs``).
        key_prefix: the mesh key of each is this prefix and the id.
    """

    noun: str
    plural: str
    key_prefix: str


RUNS = IdKind("run", "runs", "runindex/")
"""Runs, by their listing summaries (``runindex/<run id>``)."""

DECISIONS = IdKind("decision", "decisions", "decisions/")
"""Decisions (``decisions/<id>``)."""

SCHEDULES = IdKind("schedule", "schedules", "schedules/")
"""Schedules (``schedules/<id>``)."""

AGENT_ACTORS = IdKind("agent actor", "agent actors", "actors/agent:")
"""Agent actors by name (their directory entries, ``actors/agent:<name>``)."""

TOKENS = IdKind("token", "tokens", "tokens/")
"""API tokens by id (their records, ``tokens/<id>``; the secret is never a key)."""


RunArgument = Annotated[
    str, typer.Argument(metavar="RUN", help="The run's id, or a prefix unique to it.")
]
"""The RUN argument of a command (resolved with :func:`resolve` and :data:`RUNS`)."""


async def matching(mesh: Mesh, kind: IdKind, typed: str, limit: int) -> list[str]:
    """At most ``limit`` ids of ``kind`` starting with ``typed``, in key order."""
    start = len(kind.key_prefix)
    return [e.key[start:] async for e in mesh.scan(kind.key_prefix + typed, limit=limit)]


async def resolve(mesh: Mesh, kind: IdKind, typed: str) -> str:
    """The whole id ``typed`` stands for: itself if it exists, else the one id of
    ``kind`` it begins; where none does, ``typed`` as it is, for the command's own
    service to say that there is no such id.

    Exits 1 with one line when several ids begin with it, naming the first few.
    """
    if not typed or await mesh.get(kind.key_prefix + typed) is not None:
        return typed  # an id that exists wins, even where it begins longer ones
    found = await matching(mesh, kind, typed, SHOWN + 1)
    if not found:
        return typed
    if len(found) == 1:
        return found[0]
    count = len(found) if len(found) <= SHOWN else len(await matching(mesh, kind, typed, 1000))
    named = ", ".join(found[:SHOWN]) + (", ..." if len(found) > SHOWN else "")
    fail(f"ambiguous: {count} {kind.plural} match {typed!r}: {named} (type more of the id)")


__all__ = [
    "AGENT_ACTORS",
    "DECISIONS",
    "RUNS",
    "SCHEDULES",
    "TOKENS",
    "IdKind",
    "RunArgument",
    "matching",
    "resolve",
]
