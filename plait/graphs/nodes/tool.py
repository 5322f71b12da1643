"""The ``tool`` kind: one direct call of a tool the graph's agent has."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Literal

import jsonschema
from pydantic import Field

from plait.graphs.agent_loop import ToolRejected, as_text
from plait.graphs.nodes.base import (
    Checks,
    IndeterminatePolicy,
    NodeBase,
    NodeKind,
    TemplateField,
    Visit,
    quoted,
    strings,
)
from plait.graphs.ports import ExecEnv
from plait.graphs.result import NodeResult
from plait.graphs.state import RunState, Waiting
from plait.graphs.template import TemplateContext, references, render_value
from plait.tools import check_allowed, gate


class ToolNode(NodeBase):
    """One direct call of a tool the graph's agent has; string args are templates."""

    type: Literal["tool"]
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)


async def _execute(env: ExecEnv, state: RunState, v: Visit, ctx: TemplateContext) -> NodeResult:
    node = v.node
    assert isinstance(node, ToolNode)
    profile = env.profile(None)
    tool = check_allowed(node.tool, profile, registry=env.tools)
    args = env.tools.validate_args(node.tool, render_value(node.args, ctx, node=v.key))
    trusted = v.trusted
    v.budget.check_tool(node.tool)
    if gate(tool, trusted=trusted, pre_approved=profile.pre_approved) == "needs_approval":
        verdict = await env.approvals.approve(key=v.key, visit=v.visit, tool=node.tool, args=args)
        if isinstance(verdict, Waiting):
            return NodeResult(waiting=verdict)
        if not verdict:
            raise ToolRejected(node.tool)
    value = await env.tools.call(node.tool, args, env.tool_context(v.key, profile))
    return NodeResult(value=value, prompt=as_text(args), tainted=tool.external)


def _templates(node: ToolNode) -> Iterator[TemplateField]:
    for path, text in strings(node.args, ".args"):
        yield path, text, False


def _validate(node: ToolNode, path: str, checks: Checks) -> None:
    schema = checks.tool_schema(node.tool)
    if schema is not None:
        _check_args(node, path, schema, checks)


def _check_args(node: ToolNode, path: str, schema: Mapping[str, Any], checks: Checks) -> None:
    """Check the static part of a tool node's args against the tool's JSON schema.

    A value holding a template reference is known only when the node runs, so what
    is at or under it is not checked here (the call is checked again then).
    """
    validator = jsonschema.validators.validator_for(schema)(schema)
    for error in sorted(validator.iter_errors(node.args), key=lambda e: list(e.path)):
        value: Any = node.args
        templated = False
        for part in error.absolute_path:
            templated = templated or (isinstance(value, str) and bool(references(value)))
            try:
                value = value[part]
            except (KeyError, IndexError, TypeError):
                break
        if templated or (isinstance(value, str) and references(value)):
            continue
        where = f"{path}.args" + "".join(
            f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path
        )
        checks.problem(where, error.message, f"see the parameters of tool {quoted(node.tool)}")


def _tools(node: ToolNode) -> Iterator[tuple[str, str]]:
    yield ".tool", node.tool


def _on_indeterminate(node: ToolNode, tool_is_read_only: bool) -> IndeterminatePolicy:
    # An effect might have happened: only a read-only tool is safe to call again.
    return "retry" if tool_is_read_only else "escalate"


KIND = NodeKind(
    type="tool",
    spec=ToolNode,
    execute=_execute,
    shape=(">", "]"),
    templates=_templates,
    validate=_validate,
    tools=_tools,
    on_indeterminate=_on_indeterminate,
)
"""The tool kind."""

__all__ = ["KIND", "ToolNode"]
