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
from plait.programs import ProgramCatalog, gather, program
from plait.runs import OwnerServices, RunRecord, Runs, RunServices, serve

# Earlier names of the public API, kept for callers written against them.
RunHost = OwnerServices  # old-name alias
DecisionBoard = DecisionAsker  # old-name alias
DecisionDesk = DecisionAnswerer  # old-name alias

__all__ = [
    "Agent",
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
    "gather",
    "load_graph",
    "load_model",
    "open_mesh",
    "program",
    "resume_graph",
    "run_graph",
    "serve",
    "validate_graph",
]
