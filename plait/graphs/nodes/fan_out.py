"""The ``fan_out`` kind: a pure dispatcher starting instances of its targets."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Literal

from pydantic import Field

from plait.errors import TemplateError
from plait.graphs.nodes.base import (
    MAX_CONCURRENCY,
    MAX_FAN_OUT_COUNT,
    Checks,
    GraphView,
    NodeBase,
    NodeKind,
    Route,
    Spawn,
    SpecModel,
    Visit,
    quoted,
)
from plait.graphs.ports import ExecEnv
from plait.graphs.result import NodeResult
from plait.graphs.state import RunState
from plait.graphs.template import TemplateContext, parse_path, resolve_path


class FanOutSpec(SpecModel):
    """One dispatch strategy of a fan-out node.

    Attributes:
        kind: ``broadcast`` runs ``target_node_id`` ``count`` times; ``tee`` runs each
            of ``targets`` once; ``map`` runs ``target_node_id`` once per element of the
            list at ``source_path`` in ``source_node_id``'s output.
        source_path: a dotted path (``"urls"``, ``"a.b[2]"``); ``""`` is the output itself.
        on_failure: ``fail_fast`` ends the run at the first failed instance;
            ``drain_then_fail`` waits for all siblings first; ``collect`` records the
            error in the aggregated list and goes on.
        max_concurrency: instances in flight at once; None = all.
    """

    kind: Literal["broadcast", "tee", "map"]
    target_node_id: str | None = None
    count: int | None = Field(default=None, ge=1, le=MAX_FAN_OUT_COUNT)
    targets: list[str] | None = None
    source_node_id: str | None = None
    source_path: str = ""
    on_failure: Literal["fail_fast", "drain_then_fail", "collect"] = "fail_fast"
    max_concurrency: int | None = Field(default=None, ge=1, le=MAX_CONCURRENCY)


class FanOutNode(NodeBase):
    """A pure dispatcher: its targets live on ``specs``, never on edges or ``next``."""

    type: Literal["fan_out"]
    specs: list[FanOutSpec] = Field(min_length=1)


def _items(node: FanOutNode, outputs: Mapping[str, Any], key: str) -> dict[str, list[Any]]:
    """The elements each ``map`` target runs over, read from ``outputs``."""
    items: dict[str, list[Any]] = {}
    for spec_ in node.specs:
        if spec_.kind != "map":
            continue
        source = spec_.source_node_id or ""
        if source not in outputs:
            raise TemplateError(key, source, "the map's source node has no output yet")
        found = resolve_path(
            outputs[source],
            spec_.source_path or "",
            node=key,
            key=f"{source}.{spec_.source_path}".rstrip("."),
        )
        if not isinstance(found, list):
            raise TemplateError(
                key,
                f"{source}.{spec_.source_path}",
                f"is a {type(found).__name__}, not a list to map over",
            )
        items[spec_.target_node_id or ""] = found
    return items


async def _execute(env: ExecEnv, state: RunState, v: Visit, ctx: TemplateContext) -> NodeResult:
    node = v.node
    assert isinstance(node, FanOutNode)
    items = _items(node, ctx.outputs, v.key)
    counts: dict[str, int] = {}
    for spec_ in node.specs:
        if spec_.kind == "map":
            counts[spec_.target_node_id or ""] = len(items[spec_.target_node_id or ""])
        elif spec_.kind == "broadcast":
            counts[spec_.target_node_id or ""] = spec_.count or 0
        else:
            counts.update({t: 1 for t in spec_.targets or []})
    return NodeResult(value={"instances": counts}, items=items)


def _spawn(node: FanOutNode, result: NodeResult) -> list[Spawn]:
    out: list[Spawn] = []
    for spec_ in node.specs:
        if spec_.kind == "broadcast":
            out.append(Spawn(spec_.target_node_id or "", spec_.count or 0, spec_.on_failure))
        elif spec_.kind == "tee":
            out += [Spawn(target, 1, spec_.on_failure) for target in spec_.targets or []]
        else:
            target = spec_.target_node_id or ""
            items = list(result.items.get(target, []))
            out.append(Spawn(target, len(items), spec_.on_failure, items))
    return out


def _label(spec_: FanOutSpec) -> str:
    if spec_.kind == "broadcast" and spec_.count is not None:
        return f"broadcast x{spec_.count}"
    return spec_.kind


def _routes(node: FanOutNode) -> Iterator[Route]:
    for spec_ in node.specs:
        targets = [spec_.target_node_id] if spec_.target_node_id else []
        for target in targets + (spec_.targets or []):
            yield Route(target, _label(spec_), dispatch=True)


def _feeds(node: FanOutNode) -> Iterator[tuple[str, str]]:
    for s in node.specs:
        if s.kind == "map" and s.target_node_id is not None:
            yield s.target_node_id, s.source_node_id or ""


def _reads(node: FanOutNode, graph: GraphView) -> Iterator[str]:
    yield from (s.source_node_id for s in node.specs if s.source_node_id)


def _validate_routes(node: FanOutNode, path: str, checks: Checks) -> None:
    for k, spec in enumerate(node.specs):
        p = f"{path}.specs[{k}]"
        if spec.kind in ("broadcast", "map") and spec.target_node_id is None:
            checks.problem(f"{p}.target_node_id", f"{spec.kind} needs a target_node_id")
        if spec.kind == "broadcast" and spec.count is None:
            checks.problem(f"{p}.count", "broadcast needs a count")
        if spec.kind == "tee" and not spec.targets:
            checks.problem(f"{p}.targets", "tee needs at least one target")
        if spec.kind == "map":
            if spec.source_node_id is None:
                checks.problem(f"{p}.source_node_id", "map needs a source_node_id")
            try:
                parse_path(spec.source_path)
            except TemplateError:
                checks.problem(f"{p}.source_path", f"malformed path {quoted(spec.source_path)}")
        if spec.target_node_id is not None and not checks.known(spec.target_node_id):
            checks.unknown(f"{p}.target_node_id", "unknown target", spec.target_node_id)
        for m, target in enumerate(spec.targets or []):
            if not checks.known(target):
                checks.unknown(f"{p}.targets[{m}]", "unknown target", target)
        if spec.source_node_id is not None and not checks.known(spec.source_node_id):
            checks.unknown(f"{p}.source_node_id", "unknown node", spec.source_node_id, route=False)


KIND = NodeKind(
    type="fan_out",
    spec=FanOutNode,
    execute=_execute,
    shape=("{{", "}}"),
    validate_routes=_validate_routes,
    reads=_reads,
    routes=_routes,
    feeds=_feeds,
    spawn=_spawn,
    items=_items,
    no_next="a fan_out node dispatches through its specs, not next",
    no_edges="a fan_out node has no real outgoing edges ({link}); name its targets in its specs",
)
"""The fan-out kind."""

__all__ = ["KIND", "FanOutNode", "FanOutSpec"]
