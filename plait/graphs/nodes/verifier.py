"""The ``verifier`` kind: a model call whose verdict word routes the flow.

Two ways to get the verdict (``verdict_mode``):

- ``structured``: the call asks for ``{"critique": str, "verdict": one of the verdicts}``
  as its ``response_format`` (see :func:`verdict_schema`): grammar-constrained on
  llama.cpp, vLLM, Ollama and OpenAI, a forced tool on Anthropic. The node's value is the
  critique with the verdict on its last line, as a ``last_line`` reply reads.
- ``last_line``: free text whose last non-empty line holds exactly one verdict word.
- ``auto`` (the default): ``structured`` when the model says it constrains replies to a
  schema (:attr:`plait.models.Model.structured_output`), else ``last_line``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Literal, TypeAlias

from pydantic import Field

from plait.errors import ModelError
from plait.graphs.agent_loop import find_verdict, parse_structured, run_turn
from plait.graphs.nodes._turn import finish, first_call, start_turn
from plait.graphs.nodes.base import (
    MAX_ATTEMPTS,
    Checks,
    NodeBase,
    NodeKind,
    Route,
    Visit,
    named_agent,
)
from plait.graphs.nodes.prompt_source import SourcedPrompt, prompt_templates, prompt_tools
from plait.graphs.ports import ExecEnv
from plait.graphs.result import NodeResult
from plait.graphs.state import RunState
from plait.graphs.template import TemplateContext
from plait.models import Message

VerdictMode: TypeAlias = Literal["auto", "structured", "last_line"]
"""How a verifier gets its verdict.

- ``"auto"``: ``structured`` if the model constrains replies to a schema, else ``last_line``.
- ``"structured"``: a JSON reply ``{"critique", "verdict"}``, the verdict from an enum.
- ``"last_line"``: free text ending on a line that holds exactly one verdict word.
"""


class VerifierNode(NodeBase, SourcedPrompt):
    """A model call whose verdict word routes the flow; its ``prompt`` and
    ``prompt_from`` are those of :class:`SourcedPrompt`.

    Attributes:
        verdicts: verdict word -> the node to run next (possibly an earlier one).
        max_attempts: total tries for a reply that holds a valid verdict.
        verdict_mode: how the verdict is asked for and read (see :data:`VerdictMode`).
    """

    type: Literal["verifier"]
    verdicts: dict[str, str] = Field(default_factory=dict)
    agent: str | None = None
    max_attempts: int = Field(default=2, ge=1, le=MAX_ATTEMPTS)
    verdict_mode: VerdictMode = "auto"


CRITIQUE_MAX_CHARS = 300
"""The longest critique a structured verdict may hold: a grammar-constrained small model
otherwise writes on until its token limit cuts the JSON off before the verdict (Gemma 3
270M ran 1000 characters of LaTeX past a 400-token limit: a character can be a token)."""


def verdict_schema(verdicts: Sequence[str]) -> dict[str, Any]:
    """The JSON schema of a structured verdict: a critique, then one of ``verdicts``."""
    return {
        "type": "object",
        "properties": {
            "critique": {"type": "string", "maxLength": CRITIQUE_MAX_CHARS},
            "verdict": {"type": "string", "enum": list(verdicts)},
        },
        "required": ["critique", "verdict"],
        "additionalProperties": False,
    }


def structured_instruction(verdicts: Sequence[str]) -> str:
    """What a structured verdict's fields mean, said after the node's prompt.

    Without it a small model sees only the grammar's field names and answers the first
    enum value, or always the same one; with it each verdict has a meaning to choose by.
    """
    words = ", ".join(f'"{v}"' for v in verdicts)
    text = (
        'Reply with a JSON object: "critique", one or two sentences on how the text meets '
        f'the request above, then "verdict", one of: {words}.'
    )
    if "pass" in verdicts:
        text += (
            ' "pass" means the text meets the request: give it when it does, even if it '
            "could be better. Give another verdict only for a problem your critique names."
        )
    return text


def read_structured(text: str, schema: dict[str, Any]) -> tuple[str, str]:
    """The verdict of a structured reply, and its value: the critique, verdict last.

    Raises:
        ModelError: the reply is not JSON matching ``schema``.
    """
    reply = parse_structured(text, schema)
    critique, verdict = str(reply["critique"]).strip(), str(reply["verdict"])
    return verdict, f"{critique}\n{verdict}" if critique else verdict


async def _execute(env: ExecEnv, state: RunState, v: Visit, ctx: TemplateContext) -> NodeResult:
    node = v.node
    assert isinstance(node, VerifierNode)
    mv = await start_turn(env, state, v, ctx, prompt=node, agent=node.agent)
    mode = node.verdict_mode
    if mode == "auto":
        mode = "structured" if mv.turn.model.structured_output else "last_line"
    if mode == "structured":
        mv.turn.response_format = verdict_schema(list(node.verdicts))
        asked = mv.messages[-1]
        mv.messages[-1] = asked.model_copy(
            update={"content": f"{asked.content}\n\n{structured_instruction(list(node.verdicts))}"}
        )
    result = await first_call(mv)
    usage, dollars = result.usage, result.dollars
    out = NodeResult(prompt=mv.prompt, tainted=result.used_external or mv.outside)
    if result.waiting is not None:
        out.waiting, out.history = result.waiting, None
        return finish(mv, out, result, usage, dollars)
    read = _read_structured if mode == "structured" else _read_last_line
    verdict, value, problem = read(node, result.text)
    tries = 1
    while verdict is None and tries < node.max_attempts:
        tries += 1
        retry = [*result.messages, Message(role="user", content=_again(node, mode, problem))]
        result = await run_turn(mv.turn, retry)
        usage, dollars = usage + result.usage, dollars + result.dollars
        verdict, value, problem = read(node, result.text)
    if verdict is None:
        out.error = f"no valid verdict after {tries} tries: {problem}"
        out.detail = "no_valid_verdict"
    out.value, out.verdict = value, verdict
    return finish(mv, out, result, usage, dollars)


def _read_last_line(node: VerifierNode, text: str) -> tuple[str | None, str, str]:
    verdict = find_verdict(text, node.verdicts)
    last = next((ln for ln in reversed(text.splitlines()) if ln.strip()), "")
    problem = f"the last line {last!r} holds none or several of {sorted(node.verdicts)}"
    return verdict, text, problem


def _read_structured(node: VerifierNode, text: str) -> tuple[str | None, str, str]:
    try:
        verdict, value = read_structured(text, verdict_schema(list(node.verdicts)))
    except ModelError as exc:
        return None, text, f"{exc} (reply {text[:200]!r})"
    return verdict, value, ""


def _again(node: VerifierNode, mode: str, problem: str) -> str:
    words = ", ".join(node.verdicts)
    if mode == "structured":
        return (
            f"That reply was not valid: {problem}. Reply with only a JSON object "
            f'{{"critique": "...", "verdict": "..."}} whose verdict is one of: {words}.'
        )
    return f"End your reply with a last line holding exactly one of: {words}."


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
    templates=prompt_templates,
    validate=_validate,
    tools=prompt_tools,
    routes=_routes,
    next_nodes=_next_nodes,
    agent=named_agent,
    carries_history=_carries_history,
)
"""The verifier kind."""

__all__ = [
    "CRITIQUE_MAX_CHARS",
    "KIND",
    "VerdictMode",
    "VerifierNode",
    "read_structured",
    "structured_instruction",
    "verdict_schema",
]
