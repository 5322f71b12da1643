"""Graphs: the spec, validation, templating, the pure step engine and node executors.

A graph file (JSON or YAML) is loaded into a :class:`GraphSpec` and validated whole;
:func:`run_graph` runs it in this process. Durable runs (:mod:`plait.runs`) drive the
same engine one node per mailbox message.
"""

from __future__ import annotations

from plait.graphs.loader import load_graph, load_graph_file
from plait.graphs.session import GraphRun, TrajectoryStep, resume_graph, run_graph
from plait.graphs.spec import Budget, Edge, GraphSpec, Node, graph_json_schema
from plait.graphs.state import RunState, RunStatus, Waiting
from plait.graphs.validate import ValidationReport, validate_graph

__all__ = [
    "Budget",
    "Edge",
    "GraphRun",
    "GraphSpec",
    "Node",
    "RunState",
    "RunStatus",
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
