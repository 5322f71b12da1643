"""The ``workflow`` kind: a Python workflow (:mod:`plait.workflows`), one batch of steps
per visit.

``{"id": "workflow", "type": "workflow", "ref": "pkg.module:fn", "source_sha256": "..."}``:
each visit runs the function from the top over its journal (the outputs of the node's
earlier visits); the steps already journaled return their results, the first new ones
run, and the visit's output is what they returned. The node runs again
(verdict ``step``: a route decided at run time, so the graph reads as one node that
ends the run) until the function returns; its return value is the run's output.
The function is found by its import path (imported when the node runs, never when a
graph is checked); what it names must answer :class:`WorkflowDriver`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from plait.errors import ConfigError, ProgramNotFound
from plait.graphs.nodes.base import (
    Checks,
    GraphView,
    IndeterminatePolicy,
    NodeBase,
    NodeKind,
    TemplateField,
    Visit,
    strings,
)
from plait.graphs.ports import ExecEnv
from plait.graphs.result import NodeResult
from plait.graphs.state import RunState
from plait.graphs.template import TemplateContext, render_value
from plait.programs.registry import check_import_ref

STEP = "step"
"""The verdict of a visit that journaled steps: the node runs again."""


class WorkflowNode(NodeBase):
    """A Python workflow run step by step.

    Attributes:
        ref: the workflow's import path, ``pkg.module:fn``.
        source_sha256: the sha256 of the function's source when it was imported: the
            code version the run is pinned to (shown, and compared by ``--stale``).
        input: the workflow's arguments by parameter name; its strings are templates.
    """

    type: Literal["workflow"]
    ref: str
    source_sha256: str = ""
    input: Any = "{{input}}"


@runtime_checkable
class WorkflowDriver(Protocol):
    """What a workflow's import path names (a ``@plait.workflow`` function)."""

    async def visit(self, env: ExecEnv, state: RunState, v: Visit, input: Any) -> NodeResult:
        """Run the function over its journal until new steps ran (their entries as the
        value, verdict :data:`STEP`) or it returned (its value, no verdict)."""
        ...


def pinned(node: NodeBase) -> tuple[str, str] | None:
    """``(ref, source sha256)`` of a workflow node; None for a node of another kind."""
    return (node.ref, node.source_sha256) if isinstance(node, WorkflowNode) else None


def driver_of(ref: str) -> WorkflowDriver:
    """The workflow at import path ``ref``, imported.

    Raises:
        ConfigError: the path is malformed, names nothing, or no workflow.
    """
    try:
        module_name, qualname = check_import_ref(ref)
        # Looked up each visit (a module's workflow may be replaced, as in a deploy or a
        # test): from sys.modules, imported only the first time.
        target: Any = sys.modules.get(module_name) or importlib.import_module(module_name)
    except (ImportError, ProgramNotFound) as exc:
        raise ConfigError(f"workflow {ref!r} cannot be imported: {exc}") from None
    for part in qualname.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise ConfigError(f"workflow {ref!r}: {module_name} has no {qualname}")
    if not callable(getattr(target, "visit", None)):
        raise ConfigError(f"{ref!r} is not a workflow (decorate it with @plait.workflow)")
    driver: WorkflowDriver = target
    return driver


async def _execute(env: ExecEnv, state: RunState, v: Visit, ctx: TemplateContext) -> NodeResult:
    node = v.node
    assert isinstance(node, WorkflowNode)
    value = render_value(node.input, ctx, node=v.key)
    return await driver_of(node.ref).visit(env, state, v, value)


def _templates(node: WorkflowNode) -> Iterator[TemplateField]:
    for path, text in strings(node.input, ".input"):
        yield path, text, False


def _reads(node: WorkflowNode, graph: GraphView) -> Iterator[str]:
    # Its own last output (the last batch of its journal): a warm process hands it
    # over from its cache, and what it carries (taint) the next visit carries too.
    yield node.id


def _validate(node: WorkflowNode, path: str, checks: Checks) -> None:
    if node.ref.count(":") != 1 or not all(node.ref.split(":")):
        checks.problem(f"{path}.ref", "a workflow ref is an import path, pkg.module:fn")
    if node.next is not None:
        checks.problem(f"{path}.next", "a workflow node ends the run when its function returns")


def _next_nodes(node: WorkflowNode, result: NodeResult, successors: Sequence[str]) -> Sequence[str]:
    return [node.id] if result.verdict == STEP else []


def _on_indeterminate(node: WorkflowNode, tool_is_read_only: bool) -> IndeterminatePolicy:
    # A visit run again replays its journal; each step's own policy decides on the
    # step that was in flight (see plait.workflows.replay).
    return "retry"


KIND = NodeKind(
    type="workflow",
    spec=WorkflowNode,
    execute=_execute,
    shape=("[[", "]]"),
    templates=_templates,
    validate=_validate,
    next_nodes=_next_nodes,
    reads=_reads,
    on_indeterminate=_on_indeterminate,
    reads_input=lambda node: True,
)
"""The workflow kind."""

__all__ = ["KIND", "STEP", "WorkflowDriver", "WorkflowNode", "driver_of", "pinned"]
