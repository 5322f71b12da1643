"""Running programs: resolve a ref, validate the input, run with the caller's capabilities.

A ref is a name in the caller's catalog (``@plait.program("graph-fetch")``), an import path
(``pkg.module:fn``), or a saved program's name, optionally pinned (``name@3``; the newest
version otherwise). Registered callables and import paths are code shipped with the
process, so they need no promotion; a saved text must be promoted when the caller
requires it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import CodeType
from typing import Any

from pydantic import BaseModel, ValidationError

from plait.decisions import DecisionAsker
from plait.errors import (
    NotPermitted,
    ProgramInputInvalid,
    ProgramNotFound,
    ProgramNotPromoted,
)
from plait.mesh import Mesh
from plait.profiles import DEFAULT_ASSISTANT, AgentProfile
from plait.programs.budget import SharedBudget
from plait.programs.capabilities import (
    AgentsCapability,
    AgentsPort,
    Approver,
    DecisionsCapability,
    MeshCapability,
    Missing,
    Payload,
    Taint,
    ToolsCapability,
    Wake,
)
from plait.programs.registry import DEFAULT_CATALOG, CallableProgram, ProgramCatalog
from plait.programs.sandbox import run_sandboxed
from plait.programs.store import StoredProgram, get_program
from plait.programs.text import compile_text
from plait.tools import ToolContext, ToolRegistry, default_registry

_CODE: dict[str, CodeType] = {}  # compiled texts by sha256: a stored version never changes


_DROPPABLE = ("mesh", "decisions", "tools", "agents")


@dataclass(frozen=True)
class Grants:
    """The capabilities one program run was given, and the budget it spends from.

    A nested run gets these same grants (or fewer, never more).

    Attributes:
        mesh: the mesh capability, if granted.
        decisions: the decisions capability, if granted.
        tools: the tools capability, if granted.
        agents: the agents capability, if granted.
        budget: shared by this run and every run nested in it.
        store: where saved programs are read from (None: only callables run).
        programs: the catalog program refs are looked up in (nested runs share it).
        taint: shared by the capabilities above; set once the run reads outside
            content, so its caller learns that what it returns carries some.
    """

    mesh: MeshCapability | None = None
    decisions: DecisionsCapability | None = None
    tools: ToolsCapability | None = None
    agents: AgentsCapability | None = None
    budget: SharedBudget = field(default_factory=SharedBudget)
    store: Mesh | None = field(default=None, repr=False)
    programs: ProgramCatalog = field(default=DEFAULT_CATALOG, repr=False)
    taint: Taint = field(default_factory=Taint)

    def without(self, *names: str) -> Grants:
        """These grants less the capabilities ``names``."""
        dropped: dict[str, Any] = {n: None for n in names if n in _DROPPABLE}
        if "decisions" in names and self.tools is not None and "tools" not in names:
            # tools.call("decisions.raise") must not reach what the caller lacks
            dropped["tools"] = self.tools._without_decisions()
        return replace(self, **dropped)


class ProgramsCapability:
    """Run programs nested, with the caller's capabilities and budget."""

    __slots__ = ("__grants",)

    def __init__(self, grants: Grants) -> None:
        self.__grants = grants

    async def run(
        self,
        ref: str,
        input: Any = None,
        require_promoted: bool = True,
    ) -> Any:
        """Run program ``ref`` on ``input`` nested in this one, and return its result.

        Raises:
            ProgramNotFound: nothing answers to ``ref``.
            ProgramNotPromoted: the saved version is not promoted.
            NotPermitted: ``require_promoted`` is False for a saved program: only a
                person runs an unpromoted text, never a program.
            ProgramInputInvalid: ``input`` breaks the program's input model.
        """
        if not require_promoted and self.__grants.programs.find(ref) is None:
            raise NotPermitted(
                f"programs.run({ref!r}, require_promoted=False) is refused: a program runs "
                "only promoted saved programs (a person promotes one with plait programs "
                "promote, or runs it with plait programs run)"
            )
        return await run_program(ref, input, self.__grants, require_promoted=require_promoted)


def grant_all(
    mesh: Mesh | None,
    *,
    tools: ToolRegistry | None = None,
    profile: AgentProfile = DEFAULT_ASSISTANT,
    context: ToolContext | None = None,
    approve: Approver | None = None,
    trusted: bool = True,
    budget: SharedBudget | None = None,
    me: Mapping[str, Any] | None = None,
    by: str = "program",
    agents: AgentsPort | None = None,
    programs: ProgramCatalog | None = None,
    raise_scope: tuple[str, ...] | None = None,
    wake: Wake | None = None,
) -> Grants:
    """Every capability there is to give over ``mesh`` (mesh and decisions need one).

    Args:
        mesh: the mesh; None grants neither mesh nor decisions, and no saved programs.
        tools: the tool registry (the built-in tools by default).
        profile: the agent whose tools and pre-approvals gate tool calls.
        context: where tool calls run (this directory by default).
        approve: asks a person to approve a gated tool call; None refuses such calls.
        trusted: whether the caller runs trusted (a tainted caller loses pre-approvals).
        budget: the budget to share (tool calls, nested runs and ``agents.run`` turns
            spend from it); a fresh unlimited one by default. A node visit passes one
            spending ``within`` its own budget.
        me: what ``mesh.self()`` answers.
        by: the principal name decisions are raised by.
        agents: the agent actors' service; None grants an agents capability that refuses.
        programs: the catalog refs are looked up in (default: :data:`DEFAULT_CATALOG`).
        raise_scope: what a decision raised without an id derives its id from (an
            actor and its message), so a message run again raises it once.
        wake: the event each decision raised publishes when it closes (the raising
            actor's mail).
    """
    decisions = (
        DecisionsCapability(DecisionAsker(mesh), by, scope=raise_scope, wake=wake)
        if mesh is not None
        else None
    )
    taint = Taint(not trusted)  # one for the run: what one capability reads taints them all
    return Grants(
        mesh=MeshCapability(mesh, me or {"id": None, "run": None, "node": None}, taint=taint)
        if mesh is not None
        else None,
        decisions=decisions,
        tools=ToolsCapability(
            tools if tools is not None else default_registry(),
            profile,
            context or ToolContext(profile=profile),
            budget := budget or SharedBudget(),
            approve=approve,
            decisions=decisions,
            taint=taint,
        ),
        agents=AgentsCapability(agents, taint=taint, budget=budget),
        budget=budget,
        store=mesh,
        programs=programs if programs is not None else DEFAULT_CATALOG,
        taint=taint,
    )


async def run_program(
    ref: str,
    input: Any,
    grants: Grants,
    *,
    require_promoted: bool = True,
) -> Any:
    """Run program ``ref`` on ``input`` with ``grants``: see :class:`ProgramsCapability`."""
    grants.budget.step(ref, "program run")
    found = grants.programs.find(ref)
    if found is not None:
        return await _run_callable(found, input, grants)
    stored = await resolve_saved(ref, grants.store, require_promoted=require_promoted)
    return await run_source(stored.text, input, grants, sha256=stored.sha256, filename=ref)


async def resolve_saved(ref: str, mesh: Mesh | None, *, require_promoted: bool) -> StoredProgram:
    """The saved version ``ref`` (``name`` or ``name@version``) names, promoted if required.

    Raises:
        ProgramNotFound: no mesh to read saved programs from, or no such program.
        ProgramNotPromoted: ``require_promoted`` and that version is not promoted.
    """
    name, _, pinned = ref.partition("@")
    if mesh is None:
        raise ProgramNotFound(
            f"no registered program {ref!r}, and saved programs cannot be read here (no "
            "mesh): register it with @plait.program, or refer to it as pkg.module:function"
        )
    if pinned and not pinned.isdigit():
        raise ProgramNotFound(f"program ref {ref!r}: the version after '@' must be a number")
    stored = await get_program(mesh, name, int(pinned) if pinned else None)
    if require_promoted and stored.promotion is None:
        raise ProgramNotPromoted(name, stored.version)
    return stored


async def run_source(
    text: str,
    input: Any,
    grants: Grants,
    *,
    sha256: str | None = None,
    filename: str = "<program>",
) -> Any:
    """Run a program text (top-level ``await`` and ``return``) with ``grants``.

    The text runs in a sandboxed process (:mod:`plait.programs.sandbox`), reaching the
    granted capabilities only through calls this process answers.
    """
    code = _CODE.get(sha256) if sha256 else None
    if code is None:
        code = compile_text(text, filename)
        if sha256:
            _CODE[sha256] = code
    return _plain(await run_sandboxed(code, filename, _plain(input), _names(grants, input)))


async def _run_callable(found: CallableProgram, input: Any, grants: Grants) -> Any:
    value = input
    if found.input_model is not None:
        try:
            value = found.input_model.model_validate(input)
        except ValidationError as exc:
            raise ProgramInputInvalid(
                f"program {found.ref!r}: the input does not fit {found.input_model.__name__}: "
                + "; ".join(
                    f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}"
                    for e in exc.errors()
                )
            ) from None
    names = _names(grants, input)
    names["input"] = value
    result = await found.fn(**{n: names[n] for n in found.wants})
    if found.output_model is not None and not isinstance(result, found.output_model):
        result = found.output_model.model_validate(result)
    return _plain(result)


def _names(grants: Grants, input: Any) -> dict[str, Any]:
    def granted(name: str, value: Any) -> Any:
        return value if value is not None else Missing(name)

    return {
        "mesh": granted("mesh", grants.mesh),
        "decisions": granted("decisions", grants.decisions),
        "tools": granted("tools", grants.tools),
        "agents": granted("agents", grants.agents),
        "programs": ProgramsCapability(grants),
        "payload": Payload(input if input is not None else {}),
    }


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


__all__ = [
    "Grants",
    "ProgramsCapability",
    "grant_all",
    "resolve_saved",
    "run_program",
    "run_source",
]
