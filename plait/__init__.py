"""plait: a durable actor-mesh runtime for LLM agent graphs.

- :func:`open_mesh` — versioned state with CAS, durable topics, transactions.
- :func:`run_graph` / :func:`resume_graph` — run a graph in this process.
- :class:`Graph` — a graph written in Python, nodes as async functions.
- :class:`Runs` — durable runs; :func:`serve` builds a process that serves them, with
  the :class:`ProgramCatalog` it runs programs from and the :class:`RunServices` it
  hands its actors.
- :class:`DecisionAsker` / :class:`DecisionAnswerer` — decisions: the first raises and
  waits (models, node code), the second also answers and cancels (people).

Earlier names, kept so code written against them keeps working (DESIGN.md's glossary
says what each word means):

- ``RunHost``: old-name alias of :class:`OwnerServices`;
- ``DecisionBoard``: old-name alias of :class:`DecisionAsker`;
- ``DecisionDesk``: old-name alias of :class:`DecisionAnswerer`.
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from plait.actors import LocalRuntime
    from plait.decisions import Agent, Decision, DecisionAnswerer, DecisionAsker, Human
    from plait.errors import PlaitError, VersionConflict
    from plait.graphs import (
        Graph,
        GraphRun,
        GraphSpec,
        SessionEvent,
        load_graph,
        resume_graph,
        run_graph,
        validate_graph,
    )
    from plait.mesh import Entry, Mesh, open_mesh
    from plait.models import Model, ScriptedModel, load_model
    from plait.programs import ProgramCatalog, program
    from plait.runs import OwnerServices, RunRecord, Runs, RunServices, serve
    from plait.workflows.context import Context
    from plait.workflows.gather import gather
    from plait.workflows.workflow import Workflow, step, workflow

    # Earlier names of the public API, kept for callers written against them.
    RunHost = OwnerServices  # old-name alias
    DecisionBoard = DecisionAsker  # old-name alias
    DecisionDesk = DecisionAnswerer  # old-name alias

# Each public name is imported on first use, so `import plait` (and with it every
# `plait.x` import, the CLI's among them) costs only what is used: the whole surface
# pulls in pydantic, httpx, jsonschema and the graph engine.
_EXPORTS: dict[str, tuple[str, str]] = {
    "LocalRuntime": ("plait.actors", "LocalRuntime"),
    "Agent": ("plait.decisions", "Agent"),
    "Decision": ("plait.decisions", "Decision"),
    "DecisionAnswerer": ("plait.decisions", "DecisionAnswerer"),
    "DecisionAsker": ("plait.decisions", "DecisionAsker"),
    "Human": ("plait.decisions", "Human"),
    "PlaitError": ("plait.errors", "PlaitError"),
    "VersionConflict": ("plait.errors", "VersionConflict"),
    "Graph": ("plait.graphs", "Graph"),
    "GraphRun": ("plait.graphs", "GraphRun"),
    "GraphSpec": ("plait.graphs", "GraphSpec"),
    "SessionEvent": ("plait.graphs", "SessionEvent"),
    "load_graph": ("plait.graphs", "load_graph"),
    "resume_graph": ("plait.graphs", "resume_graph"),
    "run_graph": ("plait.graphs", "run_graph"),
    "validate_graph": ("plait.graphs", "validate_graph"),
    "Entry": ("plait.mesh", "Entry"),
    "Mesh": ("plait.mesh", "Mesh"),
    "open_mesh": ("plait.mesh", "open_mesh"),
    "Model": ("plait.models", "Model"),
    "ScriptedModel": ("plait.models", "ScriptedModel"),
    "load_model": ("plait.models", "load_model"),
    "ProgramCatalog": ("plait.programs", "ProgramCatalog"),
    "gather": ("plait.workflows", "gather"),
    "program": ("plait.programs", "program"),
    "OwnerServices": ("plait.runs", "OwnerServices"),
    "RunRecord": ("plait.runs", "RunRecord"),
    "Runs": ("plait.runs", "Runs"),
    "RunServices": ("plait.runs", "RunServices"),
    "serve": ("plait.runs", "serve"),
    "Context": ("plait.workflows", "Context"),
    "Workflow": ("plait.workflows", "Workflow"),
    "step": ("plait.workflows", "step"),
    "workflow": ("plait.workflows", "workflow"),
    # Earlier names of the public API, kept for callers written against them.
    "RunHost": ("plait.runs", "OwnerServices"),  # old-name alias
    "DecisionBoard": ("plait.decisions", "DecisionAsker"),  # old-name alias
    "DecisionDesk": ("plait.decisions", "DecisionAnswerer"),  # old-name alias
}


def __getattr__(name: str) -> _typing.Any:
    try:
        module, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'plait' has no attribute {name!r}") from None
    value = getattr(_importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "Agent",
    "Context",
    "Decision",
    "DecisionAnswerer",
    "DecisionAsker",
    "DecisionBoard",  # old-name alias
    "DecisionDesk",  # old-name alias
    "Entry",
    "Graph",
    "GraphRun",
    "GraphSpec",
    "Human",
    "LocalRuntime",
    "Mesh",
    "Model",
    "OwnerServices",
    "PlaitError",
    "ProgramCatalog",
    "RunHost",  # old-name alias
    "RunRecord",
    "RunServices",
    "Runs",
    "ScriptedModel",
    "SessionEvent",
    "VersionConflict",
    "Workflow",
    "gather",
    "load_graph",
    "load_model",
    "open_mesh",
    "program",
    "resume_graph",
    "run_graph",
    "serve",
    "step",
    "validate_graph",
    "workflow",
]
