"""The ``program`` kind: one run of a program with the run's capabilities.

``{"id": "fetch", "type": "program", "ref": "graph-fetch", "input": {...},
"require_promoted": true}``: the ref is a registered program, an import path
(``pkg.module:fn``) or a saved program (``name`` or ``name@version``); string values of
``input`` are templates. With ``verdicts`` the program decides the route: it returns
one of their words (a Python-decided edge), and the flow goes where that word leads.
A registered ref, or an import path whose module is loaded already, is checked when
the graph is validated; a saved one when it is imported into a mesh
(:func:`program_problems`). Checking imports nothing: a graph may come over the
network, and its ref must not make the server import a module (an import path's
module is imported only when the node runs).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from plait.decisions.principals import Human, Principal
from plait.errors import NotPermitted, ProgramError, ToolNotPermitted
from plait.graphs.nodes.base import (
    Checks,
    IndeterminatePolicy,
    NodeBase,
    NodeKind,
    Route,
    TemplateField,
    Visit,
    quoted,
    strings,
)
from plait.graphs.ports import ExecEnv
from plait.graphs.result import NodeResult
from plait.graphs.state import RunState, Waiting
from plait.graphs.template import TemplateContext, render_value
from plait.mesh import Mesh
from plait.programs import (
    DEFAULT_CATALOG,
    ProgramCatalog,
    SharedBudget,
    grant_all,
    resolve_saved,
    run_program,
)
from plait.programs.registry import loaded_program


class ProgramNode(NodeBase):
    """One run of a program; its result is the node's output.

    Attributes:
        ref: a registered program, an import path or a saved program.
        input: the program's input; its strings are templates.
        require_promoted: a saved program must be a promoted version.
        verdicts: word -> the node to run next; the program returns the word.
    """

    type: Literal["program"]
    ref: str
    input: Any = "{{input}}"
    require_promoted: bool = True
    verdicts: dict[str, str] = Field(default_factory=dict)

    @model_serializer(mode="wrap")
    def _without_empty_verdicts(self, dump: SerializerFunctionWrapHandler) -> Any:
        # Left out when empty, so a program node's canonical JSON (and the sha256 a
        # stored graph is pinned by) is what it was before nodes could route.
        data = dump(self)
        if isinstance(data, dict) and not data.get("verdicts"):
            data.pop("verdicts", None)
        return data


async def _execute(env: ExecEnv, state: RunState, v: Visit, ctx: TemplateContext) -> NodeResult:
    node = v.node
    assert isinstance(node, ProgramNode)
    profile = env.profile(None)

    async def approve(tool: str, args: dict[str, Any]) -> bool:
        verdict = await env.approvals.approve(key=v.key, visit=v.visit, tool=tool, args=args)
        if isinstance(verdict, Waiting):
            raise ToolNotPermitted(
                f"node {v.key!r}: program {node.ref!r} calls {tool!r}, which needs approval; "
                f"pre-approve it for agent {profile.name!r} (a program cannot park mid-run)"
            )
        return verdict

    grants = grant_all(
        env.mesh,
        tools=env.tools,
        profile=profile,
        context=env.tool_context(v.key, profile),
        approve=approve,
        trusted=v.trusted,
        me={"id": None, "run": env.run_id, "node": v.key},
        by=v.key,
        agents=env.agents,
        programs=env.programs,
        # The program spends within the visit's budget: its agents.run turns and tool
        # calls are checked against the run's limits and counted in its record.
        budget=SharedBudget(within=v.budget, node=v.key),
    )
    value = render_value(node.input, ctx, node=v.key)
    out = await run_program(node.ref, value, grants, require_promoted=node.require_promoted)
    return v.budget.charge(_result(node, out))


def _result(node: ProgramNode, out: Any) -> NodeResult:
    if not node.verdicts:
        return NodeResult(value=out)
    if isinstance(out, str) and out in node.verdicts:
        return NodeResult(value=out, verdict=out)
    return NodeResult(
        value=out,
        error=f"program {node.ref!r} returned {out!r}, not one of {sorted(node.verdicts)}",
        detail="no_valid_verdict",
    )


def _templates(node: ProgramNode) -> Iterator[TemplateField]:
    for path, text in strings(node.input, ".input"):
        yield path, text, False


def _validate(node: ProgramNode, path: str, checks: Checks) -> None:
    for word in node.verdicts:
        if not word or any(c.isspace() for c in word):
            checks.problem(f"{path}.verdicts.{word}", "a verdict is a single word")
    if ":" not in node.ref:
        if not node.ref.strip():
            checks.problem(f"{path}.ref", "a program ref may not be empty")
        return  # a name: the serving process's catalog, or a saved program, answers
    if "<" in node.ref:
        return  # a builder's local function: in-session only, the builder says so
    try:
        loaded_program(node.ref)  # checked as text; a loaded module is looked in, none imported
    except ProgramError as exc:
        checks.problem(f"{path}.ref", str(exc))


async def program_problems(
    mesh: Mesh, nodes: Iterator[NodeBase], programs: ProgramCatalog = DEFAULT_CATALOG
) -> list[str]:
    """Why the saved programs the program nodes name cannot run (empty if they can).

    A ref that is neither in ``programs`` nor an import path must be a saved program in
    ``mesh``, and a promoted version where the node requires one.
    """
    problems: list[str] = []
    for index, node in enumerate(nodes):
        if not isinstance(node, ProgramNode):
            continue
        try:
            if ":" in node.ref:  # an import path: checked as text, imported when it runs
                loaded_program(node.ref)
            elif programs.get(node.ref) is None:
                await resolve_saved(node.ref, mesh, require_promoted=node.require_promoted)
        except ProgramError as exc:
            problems.append(f"nodes[{index}].ref: program {quoted(node.ref)}: {exc}")
    return problems


def unpromoted_texts(
    nodes: Iterable[NodeBase], programs: ProgramCatalog = DEFAULT_CATALOG
) -> list[str]:
    """The refs of program nodes that would run a saved text unpromoted
    (``require_promoted: false`` on a ref that is not a program in ``programs`` or an
    import path): only a person may ask for that, never a service token or a model."""
    return [
        node.ref
        for node in nodes
        if isinstance(node, ProgramNode)
        and not node.require_promoted
        and ":" not in node.ref
        and programs.get(node.ref) is None
    ]


def refuse_unpromoted(by: Principal, nodes: Iterable[NodeBase], act: str) -> None:
    """Refuse ``act`` (importing or running a graph) by a non-person when a program node
    would run a saved text unpromoted.

    Raises:
        NotPermitted: ``by`` is not a human and :func:`unpromoted_texts` names some.
    """
    refs = unpromoted_texts(nodes)
    if refs and not isinstance(by, Human):
        raise NotPermitted(
            f"{by} may not {act} a graph whose program nodes run saved programs unpromoted "
            f"(require_promoted: false on {', '.join(map(repr, refs))}): only a person may; "
            "promote them (plait programs promote) and drop require_promoted: false"
        )


def _routes(node: ProgramNode) -> Iterator[Route]:
    for word, target in node.verdicts.items():
        yield Route(target, word)


def _next_nodes(node: ProgramNode, result: NodeResult, successors: Sequence[str]) -> Sequence[str]:
    if result.verdict is not None:
        return [node.verdicts[result.verdict]]
    return successors


def _on_indeterminate(node: ProgramNode, tool_is_read_only: bool) -> IndeterminatePolicy:
    # A program may have had effects: a person decides whether it runs again.
    return "escalate"


KIND = NodeKind(
    type="program",
    spec=ProgramNode,
    execute=_execute,
    shape=("[[", "]]"),
    templates=_templates,
    validate=_validate,
    routes=_routes,
    next_nodes=_next_nodes,
    on_indeterminate=_on_indeterminate,
)
"""The program kind."""

__all__ = [
    "KIND",
    "ProgramNode",
    "program_problems",
    "refuse_unpromoted",
    "unpromoted_texts",
]
