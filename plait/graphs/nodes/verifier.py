"""The ``verifier`` kind: a model call whose reply ends on a verdict word that routes."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Literal

from pydantic import Field

from plait.graphs.agent_loop import find_verdict, run_turn
from plait.graphs.nodes._turn import finish, first_call, start_turn
from plait.graphs.nodes.base import (
    MAX_ATTEMPTS,
    Checks,
    NodeBase,
    NodeKind,
    Route,
    TemplateField,
    Visit,
    named_agent,
)
from plait.graphs.ports import ExecEnv
from plait.graphs.result import NodeResult
from plait.graphs.state import RunState
from plait.graphs.template import TemplateContext
from plait.models import Message


class VerifierNode(NodeBase):
    """A model call whose reply ends on a verdict word that routes the flow.

    Attributes:
        verdicts: verdict word -> the node to run next (possibly an earlier one).
        max_attempts: total tries for a reply that ends on a valid verdict.
    """

    type: Literal["verifier"]
    prompt: str
    verdicts: dict[str, str] = Field(default_factory=dict)
    agent: str | None = None
    max_attempts: int = Field(default=2, ge=1, le=MAX_ATTEMPTS)


async def _execute(env: ExecEnv, state: RunState, v: Visit, ctx: TemplateContext) -> NodeResult:
    node = v.node
    assert isinstance(node, VerifierNode)
    mv = await start_turn(env, state, v, ctx, prompt_template=node.prompt, agent=node.agent)
    result = await first_call(mv)
    usage, dollars = result.usage, result.dollars
    out = NodeResult(prompt=mv.prompt, tainted=result.used_external)
    if result.waiting is not None:
        out.waiting, out.history = result.waiting, None
    else:
        verdict, tries = find_verdict(result.text, node.verdicts), 1
        while verdict is None and tries < node.max_attempts:
            tries += 1
            words = ", ".join(node.verdicts)
            retry = [
                *result.messages,
                Message(
                    role="user",
                    content=f"End your reply with a last line holding exactly one of: {words}.",
                ),
            ]
            result = await run_turn(mv.turn, retry)
            usage, dollars = usage + result.usage, dollars + result.dollars
            verdict = find_verdict(result.text, node.verdicts)
        if verdict is None:
            last = next((ln for ln in reversed(result.text.splitlines()) if ln.strip()), "")
            out.error = (
                f"no valid verdict after {tries} tries: the last line {last!r} holds "
                f"none or several of {sorted(node.verdicts)}"
            )
            out.detail = "no_valid_verdict"
        out.value, out.verdict = result.text, verdict
    return finish(mv, out, result, usage, dollars)


def _templates(node: VerifierNode) -> Iterator[TemplateField]:
    yield ".prompt", node.prompt, False


def _validate(node: VerifierNode, path: str, checks: Checks) -> None:
    if not node.verdicts:
        checks.problem(f"{path}.verdicts", "a verifier needs at least one verdict")
    for word in node.verdicts:
        if not word or any(c.isspace() for c in word):
            checks.problem(f"{path}.verdicts.{word}", "a verdict is a single word")


def _routes(node: VerifierNode) -> Iterator[Route]:
    for word, target in node.verdicts.items():
        yield Route(target, word)


def _next_nodes(node: VerifierNode, result: NodeResult, successors: Sequence[str]) -> Sequence[str]:
    if result.verdict is not None:
        return [node.verdicts[result.verdict]]
    return successors  # a verifier fanned out has one verdict per instance: edges route the whole


def _carries_history(node: VerifierNode) -> bool:
    return True


KIND = NodeKind(
    type="verifier",
    calls_model=True,
    spec=VerifierNode,
    execute=_execute,
    shape=("{", "}"),
    templates=_templates,
    validate=_validate,
    routes=_routes,
    next_nodes=_next_nodes,
    agent=named_agent,
    carries_history=_carries_history,
)
"""The verifier kind."""

__all__ = ["KIND", "VerifierNode"]
