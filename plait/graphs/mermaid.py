"""Draw a graph spec as a Mermaid flowchart."""

from __future__ import annotations

import re

from plait.graphs.compiled import compile_graph
from plait.graphs.nodes import kind_of
from plait.graphs.spec import GraphSpec

_WORD = re.compile(r"[A-Za-z0-9_-]+")
_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


def _escape(text: str) -> str:
    return (
        text.replace("&", "#amp;").replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")
    )


def _label(text: str) -> str:
    return text if _WORD.fullmatch(text) else f'"{_escape(text)}"'


class _Ids:
    """Mermaid-safe ids (``end`` and punctuation are not allowed as they are)."""

    def __init__(self) -> None:
        self._ids: dict[str, str] = {}
        self._taken: set[str] = set()

    def __call__(self, node_id: str) -> str:
        if node_id not in self._ids:
            safe = "n_" + _UNSAFE.sub("_", node_id)
            while safe in self._taken:
                safe += "_"
            self._ids[node_id] = safe
            self._taken.add(safe)
        return self._ids[node_id]


def to_mermaid(spec: GraphSpec) -> str:
    """Render ``spec`` as a ``flowchart LR``.

    Shapes follow the node kind; ``next`` and edges are solid arrows, verdicts solid
    arrows labelled by their word, fan-out dispatch dotted arrows labelled by strategy.
    The entry node is drawn with a thick border.
    """
    ids = _Ids()
    graph = compile_graph(spec)
    lines = ["flowchart LR"]
    for node in spec.nodes:
        left, right = kind_of(node).shape
        text = _escape(node.id) + "<br/><i>" + node.type.replace("_", " ") + "</i>"
        lines.append(f'    {ids(node.id)}{left}"{text}"{right}')
    arrows: list[str] = []

    def arrow(line: str) -> None:
        if line not in arrows:
            arrows.append(line)

    for node in spec.nodes:
        for target in graph.successors(node.id):
            arrow(f"    {ids(node.id)} --> {ids(target)}")
        for route in kind_of(node).routes(node):
            line = "-.->" if route.dispatch else "-->"
            arrow(f"    {ids(node.id)} {line}|{_label(route.label)}| {ids(route.target)}")
    lines += arrows
    if any(n.id == spec.entry or n.type == "begin" for n in spec.nodes):
        entry = spec.entry_id
        lines += ["    classDef entry stroke-width:3px", f"    class {ids(entry)} entry"]
    return "\n".join(lines) + "\n"


__all__ = ["to_mermaid"]
