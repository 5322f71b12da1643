"""Check a whole graph at once and report every problem with its path.

Nodes are parsed one by one, so a node with a bad field still takes part in the
structural checks (its id counts as known, its ``next`` and verdicts still route) and
never hides the problems of the others.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter, ValidationError

from plait.errors import GraphValidationError
from plait.graphs.nodes import KINDS, kind_of
from plait.graphs.nodes.base import quoted
from plait.graphs.problems import Problem, did_you_mean, shape_problems
from plait.graphs.spec import NODE_TYPES, Edge, GraphSpec, Node, normalize_node_data
from plait.graphs.template import (
    MAX_TEMPLATE_CHARS,
    loose_braces,
    references,
    unclosed_references,
)
from plait.profiles import AgentProfile
from plait.tools import names_match

_NODE = TypeAdapter[Node](Node)
_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_RESERVED = frozenset({"input", "item"})
_TYPES = ", ".join(NODE_TYPES)


@dataclass
class ValidationReport:
    """The outcome of :func:`validate_graph`.

    Attributes:
        spec: the parsed spec when every field parsed (it may still have structural
            problems: check ``ok``), else None.
        problems: what makes the graph unusable, each a :class:`Problem` (a str
            ``path: message``, with a hint where one helps).
        warnings: what is allowed but probably a mistake (unreachable nodes).
    """

    spec: GraphSpec | None
    problems: list[Problem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when there is no problem (warnings allowed)."""
        return not self.problems and self.spec is not None

    def raise_for_problems(self, source: str | None = None) -> GraphSpec:
        """Return the spec, or raise GraphValidationError listing every problem."""
        if self.problems or self.spec is None:
            problems: list[str] = [*self.problems] or ["(root): not a graph"]
            raise GraphValidationError(problems, source)
        return self.spec


@dataclass
class _View:
    """What the structural checks need of a node, parsed or not."""

    index: int
    id: str | None
    type: str | None
    next: str | None
    verdicts: dict[str, str]
    fan_targets: list[str]
    model: Node | None

    @property
    def path(self) -> str:
        return f"nodes[{self.index}]"


_q = quoted


def _path(prefix: str, loc: tuple[int | str, ...]) -> str:
    out = prefix
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(root)"


def _field_problems(exc: ValidationError, prefix: str) -> list[str]:
    out: list[str] = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        if prefix.startswith("nodes[") and loc and loc[0] in NODE_TYPES:
            loc = loc[1:]  # the discriminator tag pydantic puts first
        kind = err["type"]
        if kind == "union_tag_not_found":
            out.append(f"{_path(prefix, loc)}.type: missing node type (one of {_TYPES})")
            continue
        if kind == "union_tag_invalid":
            tag = (err.get("ctx") or {}).get("tag")
            out.append(f"{_path(prefix, loc)}.type: unknown node type {_q(tag)} (one of {_TYPES})")
            continue
        if kind == "missing":
            msg = "missing required field"
        elif kind == "extra_forbidden":
            msg = "unknown field"
        elif kind in ("model_type", "model_attributes_type", "dict_type"):
            msg = "expected an object"
        else:
            msg = err["msg"][:1].lower() + err["msg"][1:]
        out.append(f"{_path(prefix, loc)}: {msg}")
    return out


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _view(index: int, raw: Any, model: Node | None) -> _View:
    if model is not None:
        routes = list(kind_of(model).routes(model))
        verdicts = {r.label: r.target for r in routes if not r.dispatch}
        fan = [r.target for r in routes if r.dispatch]
        return _View(index, model.id, model.type, model.next, verdicts, fan, model)
    try:
        data = normalize_node_data(raw)
    except ValueError:
        data = raw
    if not isinstance(data, Mapping):
        return _View(index, None, None, None, {}, [], None)
    raw_verdicts = data.get("verdicts")
    verdicts = {}
    if isinstance(raw_verdicts, Mapping):
        verdicts = {str(k): v for k, v in raw_verdicts.items() if isinstance(v, str)}
    fan = []
    raw_specs = data.get("specs")
    for spec in raw_specs if isinstance(raw_specs, list) else []:
        if isinstance(spec, Mapping):
            fan += [t for t in [spec.get("target_node_id")] if isinstance(t, str)]
            targets = spec.get("targets")
            fan += [t for t in targets if isinstance(t, str)] if isinstance(targets, list) else []
    return _View(
        index, _str(data.get("id")), _str(data.get("type")), _str(data.get("next")), verdicts,
        fan, None,
    )  # fmt: skip


def _sink(node_type: str | None) -> bool:
    kind = KINDS.get(node_type or "")
    return kind is not None and kind.sink


def _dispatcher(node_type: str | None) -> bool:
    kind = KINDS.get(node_type or "")
    return kind is not None and kind.spawn is not None


class _Checker:
    def __init__(
        self,
        agents: Mapping[str, AgentProfile] | None,
        tool_is_known: Callable[[str], bool] | None,
        max_steps_cap: int,
        tool_schema: Callable[[str], Mapping[str, Any] | None] | None = None,
    ) -> None:
        self.agents = agents
        self.tool_is_known = tool_is_known
        self.schemas = tool_schema
        self.max_steps_cap = max_steps_cap
        self.problems: list[str] = []
        self.warnings: list[str] = []
        self.field_errors = False
        self.ids: dict[str, int] = {}
        # Unknown route targets and the known id each most likely means (None: no guess).
        self.corrections: dict[str, str | None] = {}

    def unknown(self, path: str, what: str, name: str, *, route: bool = True) -> None:
        """Report an unknown node name, with the closest known id as a hint."""
        close = difflib.get_close_matches(name, list(self.ids), n=1, cutoff=0.6)
        self.problems.append(Problem(path, f"{what} {_q(name)}", did_you_mean(name, self.ids)))
        if route:
            self.corrections[name] = close[0] if close else None

    def problem(self, path: str, message: str, hint: str | None = None) -> None:
        """Report a problem at ``path`` (see :class:`plait.graphs.nodes.base.Checks`)."""
        self.problems.append(Problem(path, message, hint))

    def known(self, node_id: str) -> bool:
        """Whether the graph has a node ``node_id``."""
        return node_id in self.ids

    def tool_schema(self, tool: str) -> Mapping[str, Any] | None:
        """The JSON schema of ``tool``'s arguments, when known."""
        return self.schemas(tool) if self.schemas is not None else None

    def fields(self, exc: ValidationError, prefix: str) -> None:
        self.field_errors = True
        self.problems.extend(_field_problems(exc, prefix))

    def run(self, data: Mapping[str, Any]) -> ValidationReport:
        try:
            GraphSpec.model_validate({**data, "nodes": [], "edges": []})
        except ValidationError as exc:
            self.fields(exc, "")
        views = self.parse_nodes(data)
        edges = self.parse_edges(data.get("edges", []))
        self.check_budget(data.get("budget"))
        self.check_ids(views)
        entry = self.check_entry(data, views)
        self.check_routes(views, edges)
        map_targets = self.check_fan_outs(views)
        graph_agent = data.get("agent", "assistant")
        for v in views:
            if v.model is not None:
                self.check_node(v.model, v.path, v.model.id in map_targets, graph_agent)
        if isinstance(graph_agent, str) and self.agents is not None:
            if graph_agent not in self.agents:
                self.problems.append(f"agent: unknown agent {_q(graph_agent)}")
        if entry is not None:
            self.check_reach(entry, views, edges)
        spec = None
        if not self.field_errors:
            try:
                spec = GraphSpec.model_validate(data)
            except ValidationError as exc:  # pragma: no cover - the parts parsed, so the whole does
                self.fields(exc, "")
        return ValidationReport(spec, [Problem.of(p) for p in self.problems], self.warnings)

    def parse_nodes(self, data: Mapping[str, Any]) -> list[_View]:
        raw_nodes = data.get("nodes")
        if not isinstance(raw_nodes, list):
            found = "expected a list of nodes" if "nodes" in data else "missing required field"
            self.problems.append(f"nodes: {found}")
            self.field_errors = True
            return []
        if not raw_nodes:
            self.problems.append("nodes: a graph needs at least one node")
        views = []
        for i, raw in enumerate(raw_nodes):
            model: Node | None = None
            try:
                model = _NODE.validate_python(raw)
            except ValidationError as exc:
                self.fields(exc, f"nodes[{i}]")
            views.append(_view(i, raw, model))
        return views

    def parse_edges(self, raw_edges: Any) -> list[tuple[int, Edge]]:
        if not isinstance(raw_edges, list):
            self.problems.append("edges: expected a list of edges")
            self.field_errors = True
            return []
        edges = []
        for j, raw in enumerate(raw_edges):
            try:
                edges.append((j, Edge.model_validate(raw)))
            except ValidationError as exc:
                self.fields(exc, f"edges[{j}]")
        return edges

    def check_budget(self, raw: Any) -> None:
        # Read steps from the raw data so a bad sibling field does not hide the cap.
        steps = raw.get("steps") if isinstance(raw, Mapping) else raw
        if isinstance(steps, int) and not isinstance(steps, bool) and steps > self.max_steps_cap:
            self.problems.append(f"budget.steps: {steps} is over the cap of {self.max_steps_cap}")

    def check_ids(self, views: list[_View]) -> None:
        for v in views:
            if v.id is None:
                continue
            if not _ID.fullmatch(v.id):
                self.problems.append(
                    f"{v.path}.id: {_q(v.id)} is not a valid id (letters, digits, _ and -, "
                    "starting with a letter or _)"
                )
            elif v.id in _RESERVED:
                self.problems.append(f"{v.path}.id: {_q(v.id)} is reserved for templates")
            if v.id in self.ids:
                first = self.ids[v.id]
                self.problems.append(
                    f"{v.path}.id: duplicate id {_q(v.id)} (first at nodes[{first}])"
                )
            else:
                self.ids[v.id] = v.index

    def check_entry(self, data: Mapping[str, Any], views: list[_View]) -> str | None:
        begins = [v for v in views if v.type == "begin"]
        entry = _str(data.get("entry"))
        begin_form = bool(begins or data.get("edges"))
        if not views:
            return None  # nothing to enter; the nodes problem says so
        if begin_form:
            if len(begins) != 1:
                where = ", ".join(v.path for v in begins) or "none"
                self.problems.append(
                    "nodes: a graph in begin/end form needs exactly one begin node, found "
                    f"{len(begins)} ({where})"
                )
            if len(begins) == 1 and begins[0].id is not None:
                if entry is not None and entry != begins[0].id:
                    self.problems.append(
                        f"entry: {_q(entry)} is not the begin node {_q(begins[0].id)}"
                    )
                entry = entry or begins[0].id
        if entry is None:
            if not begin_form:
                self.problems.append("entry: no entry node (set entry, or add a begin node)")
            return None
        if entry not in self.ids:
            self.unknown("entry", "unknown node", entry, route=False)
            return None
        return entry

    def check_routes(self, views: list[_View], edges: list[tuple[int, Edge]]) -> None:
        types = {v.id: v.type for v in views if v.id is not None}
        for v in views:
            kind = KINDS.get(v.type or "")
            if v.next is not None:
                if kind is not None and kind.no_next is not None:
                    self.problems.append(f"{v.path}.next: {kind.no_next}")
                if v.next not in self.ids:
                    self.unknown(f"{v.path}.next", "unknown target", v.next)
            for word, target in v.verdicts.items():
                if target not in self.ids:
                    self.unknown(f"{v.path}.verdicts.{word}", "unknown target", target)
        for j, edge in edges:
            if edge.source not in self.ids:
                self.unknown(f"edges[{j}].source", "unknown node", edge.source, route=False)
            if edge.target not in self.ids:
                self.unknown(f"edges[{j}].target", "unknown target", edge.target)
            link = f"{_q(edge.source)} -> {_q(edge.target)}"
            source = KINDS.get(types.get(edge.source) or "")
            if source is not None and source.no_edges is not None:
                self.problems.append(f"edges[{j}]: {source.no_edges.format(link=link)}")

    def check_fan_outs(self, views: list[_View]) -> set[str]:
        """Check every node's own routes; the nodes whose ``{{item}}`` a fan-out sets."""
        map_targets: set[str] = set()
        for v in views:
            if v.model is None:
                continue
            kind = kind_of(v.model)
            kind.validate_routes(v.model, v.path, self)
            map_targets.update(target for target, _ in kind.feeds(v.model))
        return map_targets

    def check_node(self, node: Node, path: str, map_target: bool, graph_agent: Any) -> None:
        kind = kind_of(node)
        for where, template, item_ok in kind.templates(node):
            self.check_template(f"{path}{where}", template, item_ok or map_target, node.id)
        kind.validate(node, path, self)
        if node.on_indeterminate == "verify" and node.verify is None:
            self.problems.append(f'{path}.verify: the "verify" policy needs a check tool here')
        self.check_tools_and_agents(node, path, graph_agent)

    def check_template(self, where: str, template: str, item_ok: bool, own_id: str) -> None:
        if len(template) > MAX_TEMPLATE_CHARS:
            self.problems.append(
                Problem(
                    where,
                    f"a template of {len(template)} characters is over the cap of "
                    f"{MAX_TEMPLATE_CHARS}",
                    "pass long text as the run's input and read it with {{input}}",
                )
            )
            return
        for ref in references(template):
            if ref.name == "item" and not item_ok:
                self.problems.append(
                    f"{where}: {ref.raw} is only set in a map fan-out target or a parallel prompt"
                )
            elif ref.name not in ("input", "item") and ref.name not in self.ids:
                self.unknown(where, f"{ref.raw} names unknown node", ref.name, route=False)
            elif ref.name == own_id and not ref.optional and ref.default is None:
                self.problems.append(
                    Problem(
                        where,
                        f"{ref.raw} reads this node's own output, which its first visit "
                        "does not have yet",
                        f"use {{{{{ref.key}?}}}} for no output yet, or a default",
                    )
                )
        for text in unclosed_references(template):
            self.problems.append(
                Problem(where, f"{text} is not closed", 'close the reference with "}}"')
            )
        for text in loose_braces(template):
            self.warnings.append(f"{where}: {text} is not a template and stays as written")

    def check_tools_and_agents(self, node: Node, path: str, graph_agent: Any) -> None:
        agents, known = self.agents, self.tool_is_known
        own = getattr(node, "agent", None)
        if agents is not None and isinstance(own, str) and isinstance(graph_agent, str):
            if own not in agents:
                self.problems.append(f"{path}.agent: unknown agent {_q(own)}")
            elif own != graph_agent and graph_agent in agents:
                if own not in agents[graph_agent].delegates:
                    self.problems.append(
                        f"{path}.agent: agent {_q(graph_agent)} may not use agent {_q(own)} "
                        "(not among its delegates)"
                    )
        runner = own if isinstance(own, str) else graph_agent
        profile = agents.get(runner) if agents is not None and isinstance(runner, str) else None
        for where, tool in ((f"{path}{at}", t) for at, t in kind_of(node).tools(node)):
            if known is not None and not known(tool):
                self.problems.append(f"{where}: unknown tool {_q(tool)}")
            elif profile is not None and not names_match(tool, profile.tools):
                self.problems.append(f"{where}: agent {_q(runner)} does not have tool {_q(tool)}")
        if node.verify is not None and known is not None and not known(node.verify):
            self.problems.append(f"{path}.verify: unknown tool {_q(node.verify)}")

    def check_reach(self, entry: str, views: list[_View], edges: list[tuple[int, Edge]]) -> None:
        out: dict[str, list[str]] = {}
        for v in views:
            if v.id is not None:
                routes = [v.next] if v.next is not None else []
                out.setdefault(v.id, []).extend(routes + list(v.verdicts.values()) + v.fan_targets)
        for _, edge in edges:
            out.setdefault(edge.source, []).append(edge.target)
        # A route to an unknown target most likely means the id it resembles: follow
        # that one too, so that one typo does not also read as unreachable nodes.
        fixed = {
            source: [self.corrections.get(t) or t for t in targets]
            for source, targets in out.items()
        }
        # A route to an unknown node is reported already; count it as a way out so that
        # one typo does not also read as an endless loop.
        ends = {
            v.id
            for v in views
            if v.id is not None
            and (
                _sink(v.type)
                or (not _dispatcher(v.type) and not out.get(v.id))
                or any(t not in self.ids for t in out.get(v.id, []))
            )
        }
        seen, todo = {entry}, [entry]
        while todo:
            for target in out.get(todo.pop(), []):
                if target in self.ids and target not in seen:
                    seen.add(target)
                    todo.append(target)
        if not seen & ends:
            self.problems.append(
                f"entry: no end is reachable from {_q(entry)} (every path loops forever)"
            )
        guessed, todo = {entry}, [entry]
        while todo:
            for target in fixed.get(todo.pop(), []):
                if target in self.ids and target not in guessed:
                    guessed.add(target)
                    todo.append(target)
        for v in views:
            if v.id is not None and v.id not in guessed and self.ids.get(v.id) == v.index:
                self.warnings.append(f"{v.path}: {_q(v.id)} is unreachable from {_q(entry)}")


def validate_graph(
    data: Mapping[str, Any] | GraphSpec,
    *,
    agents: Mapping[str, AgentProfile] | None = None,
    tool_is_known: Callable[[str], bool] | None = None,
    max_steps_cap: int = 100,
    tool_schema: Callable[[str], Mapping[str, Any] | None] | None = None,
) -> ValidationReport:
    """Check a graph and report every problem at once.

    Args:
        data: the graph as loaded from a file, or a spec.
        agents: agent profiles by name; when given, node agents must be the graph's
            agent or its delegates, and tools must be the running agent's.
        tool_is_known: when given, every tool a node names must be known.
        max_steps_cap: the largest step budget allowed.
        tool_schema: when given, the JSON schema of a tool's arguments (None if
            unknown); a tool node's static ``args`` must match it.

    Returns:
        The report; its ``problems`` name paths like
        ``nodes[3].verdicts.fail: unknown target "nowhere"``.
    """
    if isinstance(data, GraphSpec):
        data = data.model_dump(mode="python")
    if not isinstance(data, Mapping):
        found = type(data).__name__
        return ValidationReport(None, [Problem("(root)", f"a graph is an object, found {found}")])
    shape = shape_problems(data)
    if shape:
        return ValidationReport(None, shape)  # unsafe to parse further
    return _Checker(agents, tool_is_known, max_steps_cap, tool_schema).run(data)


__all__ = ["ValidationReport", "validate_graph"]
