"""Durable runs: a graph's run that survives process and host restarts.

The room is a line, each module importing only those before it:

- :mod:`~plait.runs.record` — the run record and where a run's data lives;
- :mod:`~plait.runs.channel` — a run's live channel, as the serving process writes it;
- :mod:`~plait.runs.store` — reads (records, pinned specs, output values);
- :mod:`~plait.runs.watch` — following a run's live channel until it settles;
- :mod:`~plait.runs.commit` — :class:`RunCommit`, the one writer of run transitions;
- :mod:`~plait.runs.replay` — a run's state at any point of its audit chain;
- :mod:`~plait.runs.start` — starting a run, and a subgraph node's child run;
- :mod:`~plait.runs.rerun` — retrying a failed run, forking a run at a visit;
- :mod:`~plait.runs.owner` — the run owner actor: read → engine → execute → commit;
- :mod:`~plait.runs.service` — :class:`Runs`, the human API: start, watch, answer,
  cancel, raise a budget, retry, fork, list, prune, inspect;
- :mod:`~plait.runs.services` — :class:`RunServices`, what a serving process hands
  its actors: the owner services, the programs catalog, the agents service;
- :mod:`~plait.runs.serve` — :func:`serve`, which builds a serving process (an actor
  runtime, its :class:`RunServices`, its heartbeat) with its tools, model, programs
  and actor kinds given explicitly.

The engine (:mod:`plait.graphs.engine`) decides every state change; this room reads,
executes and commits.
"""

from __future__ import annotations

from plait.runs.audit import AuditEvent
from plait.runs.commit import RunCommit
from plait.runs.owner import OWNER_KIND
from plait.runs.owner_services import OwnerServices
from plait.runs.record import RunRecord, RunSummary
from plait.runs.serve import Serving, serve
from plait.runs.service import Runs
from plait.runs.services import RunServices

__all__ = [
    "OWNER_KIND",
    "AuditEvent",
    "OwnerServices",
    "RunCommit",
    "RunRecord",
    "RunServices",
    "RunSummary",
    "Runs",
    "Serving",
    "serve",
]
