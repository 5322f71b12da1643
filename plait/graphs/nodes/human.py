"""The ``human`` kind: a question to a person; the run parks until the answer arrives."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from pydantic import Field

from plait.graphs.nodes.base import (
    MAX_EXPIRES_AFTER_S,
    Checks,
    NodeBase,
    NodeKind,
    TemplateField,
    Visit,
    quoted,
)
from plait.graphs.ports import Answer, ExecEnv
from plait.graphs.result import NodeResult
from plait.graphs.state import RunState, Waiting
from plait.graphs.template import TemplateContext, render


class HumanNode(NodeBase):
    """A question to a person; the run parks until the answer arrives.

    Attributes:
        options: the allowed answers; None = free text.
        expires_after_s: seconds until the question expires; None = never.
        on_expire: ``fail`` ends the run; ``default`` takes ``default`` as the answer.
    """

    type: Literal["human"]
    ask: str
    options: list[str] | None = None
    expires_after_s: float | None = Field(
        default=None, gt=0, le=MAX_EXPIRES_AFTER_S, allow_inf_nan=False
    )
    on_expire: Literal["fail", "default"] = "fail"
    default: str | None = None


async def _execute(env: ExecEnv, state: RunState, v: Visit, ctx: TemplateContext) -> NodeResult:
    node = v.node
    assert isinstance(node, HumanNode)
    ask = render(node.ask, ctx, node=v.key)
    answer = await env.human.ask(
        key=v.key,
        visit=v.visit,
        ask=ask,
        options=node.options,
        expires_after_s=node.expires_after_s,
        default=node.default,
        on_expire=node.on_expire,
    )
    if isinstance(answer, Waiting):
        return NodeResult(waiting=answer, prompt=ask)
    assert isinstance(answer, Answer)
    return NodeResult(value=answer.text, prompt=ask)


def _templates(node: HumanNode) -> Iterator[TemplateField]:
    yield ".ask", node.ask, False


def _validate(node: HumanNode, path: str, checks: Checks) -> None:
    if node.options is not None and not node.options:
        checks.problem(f"{path}.options", "give at least one option, or leave it out")
    if node.on_expire == "default" and node.default is None:
        checks.problem(f"{path}.default", 'on_expire "default" needs a default answer')
    if node.default is not None and node.options and node.default not in node.options:
        checks.problem(f"{path}.default", f"{quoted(node.default)} is not one of the options")


KIND = NodeKind(
    type="human",
    spec=HumanNode,
    execute=_execute,
    shape=("[/", "/]"),
    templates=_templates,
    validate=_validate,
)
"""The human kind."""

__all__ = ["KIND", "HumanNode"]
