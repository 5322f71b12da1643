"""The ``begin`` kind: the entry of the begin/end form; its output is the run's input."""

from __future__ import annotations

from typing import Any, Literal

from plait.graphs.nodes.base import Checks, NodeBase, NodeKind, Visit, check_schema
from plait.graphs.ports import ExecEnv
from plait.graphs.result import NodeResult
from plait.graphs.state import RunState
from plait.graphs.template import TemplateContext


class BeginNode(NodeBase):
    """The entry of the begin/end form; its output is the run's input."""

    type: Literal["begin"]
    input_schema: dict[str, Any] | None = None


async def _execute(env: ExecEnv, state: RunState, v: Visit, ctx: TemplateContext) -> NodeResult:
    return NodeResult(value=state.input)


def _validate(node: BeginNode, path: str, checks: Checks) -> None:
    check_schema(checks, f"{path}.input_schema", node.input_schema)


def _reads_input(node: BeginNode) -> bool:
    return True


KIND = NodeKind(
    type="begin",
    spec=BeginNode,
    execute=_execute,
    shape=("([", "])"),
    validate=_validate,
    reads_input=_reads_input,
)
"""The begin kind."""

__all__ = ["KIND", "BeginNode"]
