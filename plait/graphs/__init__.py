"""Graphs: what a graph is and how one step of it runs, with no storage of its own.

The room holds the spec (:mod:`~plait.graphs.spec`, the models of a graph file, loaded
by :mod:`~plait.graphs.loader` and checked whole by :mod:`~plait.graphs.validate`), the
node kinds (:mod:`plait.graphs.nodes`, one module per kind, found through one table),
the compiled graph (:mod:`~plait.graphs.compiled`, built once per stored version), the
pure step engine (:mod:`~plait.graphs.engine`: compiled graph, run state and node result
in, new state and typed :mod:`~plait.graphs.events` out), the executors that do a
visit's I/O through small ports (:mod:`~plait.graphs.ports`), the graph store and the
in-session runner: :func:`run_graph` runs a graph in this process; :class:`Graph`
writes one in Python (:mod:`~plait.graphs.builder`). Durable runs
(:mod:`plait.runs`, the layer above) drive the same engine one node per mailbox message.
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from plait.graphs.builder import Graph
    from plait.graphs.live import SessionEvent
    from plait.graphs.loader import load_graph, load_graph_file
    from plait.graphs.session import GraphRun, TrajectoryStep, resume_graph, run_graph
    from plait.graphs.spec import Budget, Edge, GraphSpec, Node, graph_json_schema
    from plait.graphs.state import RunState, RunStatus, Waiting
    from plait.graphs.validate import ValidationReport, validate_graph

# Each name is imported on first use (`import plait.graphs` alone stays cheap: the CLI and
# the layers above import one submodule of it, not all of them).
_EXPORTS: dict[str, tuple[str, str]] = {
    "Graph": ("plait.graphs.builder", "Graph"),
    "SessionEvent": ("plait.graphs.live", "SessionEvent"),
    "load_graph": ("plait.graphs.loader", "load_graph"),
    "load_graph_file": ("plait.graphs.loader", "load_graph_file"),
    "GraphRun": ("plait.graphs.session", "GraphRun"),
    "TrajectoryStep": ("plait.graphs.session", "TrajectoryStep"),
    "resume_graph": ("plait.graphs.session", "resume_graph"),
    "run_graph": ("plait.graphs.session", "run_graph"),
    "Budget": ("plait.graphs.spec", "Budget"),
    "Edge": ("plait.graphs.spec", "Edge"),
    "GraphSpec": ("plait.graphs.spec", "GraphSpec"),
    "Node": ("plait.graphs.spec", "Node"),
    "graph_json_schema": ("plait.graphs.spec", "graph_json_schema"),
    "RunState": ("plait.graphs.state", "RunState"),
    "RunStatus": ("plait.graphs.state", "RunStatus"),
    "Waiting": ("plait.graphs.state", "Waiting"),
    "ValidationReport": ("plait.graphs.validate", "ValidationReport"),
    "validate_graph": ("plait.graphs.validate", "validate_graph"),
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


__all__ = [
    "Budget",
    "Edge",
    "Graph",
    "GraphRun",
    "GraphSpec",
    "Node",
    "RunState",
    "RunStatus",
    "SessionEvent",
    "TrajectoryStep",
    "ValidationReport",
    "Waiting",
    "graph_json_schema",
    "load_graph",
    "load_graph_file",
    "resume_graph",
    "run_graph",
    "validate_graph",
]
