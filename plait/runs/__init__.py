"""Durable runs: a graph's run that survives process and host restarts.

The room is a line, each module importing only those before it:

- :mod:`~plait.runs.record` — the run record and where a run's data lives;
- :mod:`~plait.runs.listing` — listing runs by status, newest first;
- :mod:`~plait.runs.telemetry` — what a transition tells the traces and metrics;
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

import importlib as _importlib
import sys as _sys
import types as _types
import typing as _typing

if _typing.TYPE_CHECKING:
    from plait.runs.audit import AuditEvent
    from plait.runs.commit import RunCommit
    from plait.runs.owner import OWNER_KIND
    from plait.runs.owner_services import OwnerServices
    from plait.runs.record import RunRecord, RunSummary
    from plait.runs.serve import Serving, serve
    from plait.runs.service import Runs
    from plait.runs.services import RunServices

# Each name is imported on first use (`import plait.runs` alone stays cheap: the CLI and
# the layers above import one submodule of it, not all of them).
_EXPORTS: dict[str, tuple[str, str]] = {
    "AuditEvent": ("plait.runs.audit", "AuditEvent"),
    "RunCommit": ("plait.runs.commit", "RunCommit"),
    "OWNER_KIND": ("plait.runs.owner", "OWNER_KIND"),
    "OwnerServices": ("plait.runs.owner_services", "OwnerServices"),
    "RunRecord": ("plait.runs.record", "RunRecord"),
    "RunSummary": ("plait.runs.record", "RunSummary"),
    "Serving": ("plait.runs.serve", "Serving"),
    "serve": ("plait.runs.serve", "serve"),
    "Runs": ("plait.runs.service", "Runs"),
    "RunServices": ("plait.runs.services", "RunServices"),
}


def __getattr__(name: str) -> _typing.Any:
    try:
        module, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(_importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class _Package(_types.ModuleType):
    # `serve` names both a submodule and the function exported from it. Importing the
    # submodule binds it as the package's attribute; the exported function keeps the name.
    def __setattr__(self, name: str, value: object) -> None:
        if name in _EXPORTS and isinstance(value, _types.ModuleType):
            return
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package

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
