"""The house rules of the package's imports: a line of layers, no circles.

Every module under ``plait/`` is parsed (not imported) and every ``import`` in it counts:
top-level ones, ones under ``if TYPE_CHECKING:`` and ones inside functions alike, because
each is a dependency a reader has to hold in mind. Two rules follow from DESIGN.md
"Layers":

- no import cycle between modules;
- no module imports a layer above its own.

The layers, top to bottom, are :data:`LAYERS`. ``plait/__init__.py`` is the public
surface above them all (no module of the package imports it); ``errors.py`` and ``ids.py``
are the foundation beneath them all (every layer may import them, they import no layer).

A cycle known to be on its way out is listed in :data:`KNOWN_CYCLES` as the import edge
that closes it; its test is an expected failure, strict, so the change that removes the
cycle turns it into an unexpected pass and the entry must go.
"""

from __future__ import annotations

import ast
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "plait"

LAYERS = [
    "cli",
    "cluster",
    "mcp",
    "api",
    "workflows",
    "agents",
    "schedules",
    "runs",
    "graphs",
    "programs",
    "decisions",
    "actors",
    "models",
    "tools",
    "profiles",
    "langgraph",
    "mesh",
    "telemetry",
]
"""The layers, highest first; each may import only the ones after it."""

LAYER_ROLES = {
    "cli": "the `plait` command (thin: parse, call, print)",
    "mcp": "MCP servers as tool sources (declared, kept, gated); `plait mcp serve`",
    "cluster": "Ray hosts: the host set of a cluster, scaling, what each host serves",
    "api": "HTTP API and web console (`plait serve`) over the services below",
    "workflows": "durable Python workflows: @workflow, @step, Context, the journal",
    "agents": "agent actors: instructions + model + tools, one turn per message; topics",
    "schedules": "cron schedules and delivery sinks",
    "runs": "durable runs: record, store, commit, owner, service; serving a process",
    "graphs": "spec, compiled graph, nodes/ (one module per kind), engine, session runner",
    "programs": "saved programs: versioned store, promotion, the sandbox; capabilities",
    "decisions": "human decisions: raise, wait, answer, cancel, expire; principals",
    "actors": "the ActorRuntime contract, the actor directory, runtimes local and ray",
    "models": "model adapters: scripted, openai-compatible, anthropic",
    "tools": "tool registry: schemas, approval gates, trust, workspaces",
    "profiles": "agent profiles: the small record graphs and tools gate by",
    "langgraph": "LangGraph on the mesh: a checkpointer (PlaitSaver) and a store (PlaitStore)",
    "mesh": "versioned key-value store with CAS, durable topics, delayed publish",
    "telemetry": "OpenTelemetry spans and Prometheus metrics; off: one flag test",
}
"""What each layer holds, one line each: the layer list of DESIGN.md is made from it."""

DESIGN = ROOT.parent / "DESIGN.md"
"""The repository's design notes, whose "Layers" section lists :data:`LAYERS`."""

FOUNDATION = {"plait.errors", "plait.ids"}
"""Modules beneath every layer."""

SURFACE = "plait"
"""The package's public surface, above every layer."""

KNOWN_CYCLES: list[tuple[str, str]] = []
"""Import edges ``(importer, imported)`` that close a cycle being removed elsewhere."""


@dataclass(frozen=True)
class Import:
    """One import statement's dependency: who imports what, and where."""

    importer: str
    imported: str
    line: int

    def __str__(self) -> str:
        return f"{self.importer} -> {self.imported} ({path_of(self.importer)}:{self.line})"


def module_name(path: Path) -> str:
    """The dotted module name of a file under :data:`ROOT`."""
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def path_of(module: str) -> str:
    """The repository-relative path of ``module``."""
    base = ROOT.parent / Path(*module.split("."))
    return str(
        (base / "__init__.py" if base.is_dir() else base.with_suffix(".py")).relative_to(
            ROOT.parent
        )
    )


def all_modules() -> dict[str, Path]:
    """Every module of the package, by dotted name."""
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def imports_of(module: str, path: Path, known: set[str]) -> list[Import]:
    """The package modules ``module`` imports, anywhere in its body."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[Import] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    found.append(Import(module, alias.name, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, node.module] if node.module else anchor)
            else:
                base = node.module or ""
            for alias in node.names:
                target = f"{base}.{alias.name}"
                if target in known:  # ``from plait.tools import registry``
                    found.append(Import(module, target, node.lineno))
                if base in known:  # the names come from ``base``'s namespace
                    found.append(Import(module, base, node.lineno))
    return [i for i in found if i.imported != module]


def import_graph() -> dict[str, dict[str, Import]]:
    """For every module, the modules it imports (first import statement of each)."""
    modules = all_modules()
    known = set(modules)
    graph: dict[str, dict[str, Import]] = {}
    for name, path in modules.items():
        edges: dict[str, Import] = {}
        for imp in imports_of(name, path, known):
            edges.setdefault(imp.imported, imp)
        graph[name] = edges
    return graph


def chain(graph: dict[str, dict[str, Import]], start: str, goal: str) -> list[Import] | None:
    """The shortest import chain from ``start`` to ``goal``, or None."""
    came: dict[str, Import | None] = {start: None}
    queue = deque([start])
    while queue:
        here = queue.popleft()
        for there, imp in graph.get(here, {}).items():
            if there in came:
                continue
            came[there] = imp
            if there == goal:
                path: list[Import] = []
                step: Import | None = imp
                while step is not None:
                    path.append(step)
                    step = came[step.importer]
                return path[::-1]
            queue.append(there)
    return None


def find_cycle(graph: dict[str, dict[str, Import]]) -> list[Import] | None:
    """Some import cycle in ``graph``, as its chain of imports, or None."""
    for module in sorted(graph):
        for there in sorted(graph[module]):
            back = chain(graph, there, module)
            if back is not None:
                return [graph[module][there], *back]
    return None


def layer_of(module: str) -> int | None:
    """The layer index of ``module`` (0 is the top), None for the foundation."""
    if module == SURFACE:
        return -1
    if module in FOUNDATION:
        return None
    room = module.split(".")[1]
    if room not in LAYERS:
        raise AssertionError(
            f"{module} is in no layer: add {room!r} to LAYERS in tests/test_layers.py "
            "where DESIGN.md puts it"
        )
    return LAYERS.index(room)


def render(imports: list[Import]) -> str:
    return "\n  ".join(str(i) for i in imports)


def without_known(graph: dict[str, dict[str, Import]]) -> dict[str, dict[str, Import]]:
    return {
        m: {t: i for t, i in edges.items() if (m, t) not in KNOWN_CYCLES}
        for m, edges in graph.items()
    }


def test_the_walk_sees_every_kind_of_import(tmp_path: Path) -> None:
    source = tmp_path / "probe.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "import plait.mesh._base\n"
        "from plait.tools import registry\n"
        "if TYPE_CHECKING:\n"
        "    from plait.runs.record import RunRecord\n"
        "def later() -> None:\n"
        "    from plait.graphs.spec import GraphSpec\n"
    )
    known = set(all_modules())
    found = {i.imported for i in imports_of("plait.probe", source, known)}
    assert found == {
        "plait.mesh._base",
        "plait.tools",
        "plait.tools.registry",
        "plait.runs.record",
        "plait.graphs.spec",
    }
    assert "plait.mesh._base" in import_graph()["plait.mesh"]


def test_no_import_cycle() -> None:
    cycle = find_cycle(without_known(import_graph()))
    assert cycle is None, "import cycle:\n  " + render(cycle or [])


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        pytest.param(
            a,
            b,
            id=f"{a}->{b}",
            marks=pytest.mark.xfail(strict=True, reason=f"known cycle {a} <-> {b}"),
        )
        for a, b in KNOWN_CYCLES
    ],
)
def test_known_cycle_is_gone(importer: str, imported: str) -> None:
    graph = import_graph()
    forth, back = chain(graph, importer, imported), chain(graph, imported, importer)
    assert forth is None or back is None, (
        f"{importer} and {imported} still import each other:\n  " + render([*forth, *back])
    )


def test_no_module_imports_a_layer_above_it() -> None:
    graph = import_graph()
    upward: list[str] = []
    for module, edges in sorted(graph.items()):
        mine = layer_of(module)
        for target, imp in sorted(edges.items()):
            theirs = layer_of(target)
            if target == SURFACE:
                upward.append(f"{imp}: nothing in the package imports the public surface")
            elif mine is None and theirs is not None:
                upward.append(f"{imp}: the foundation imports no layer")
            elif mine is not None and theirs is not None and theirs < mine:
                upward.append(f"{imp}: {LAYERS[mine]} is below {LAYERS[theirs]}")
    assert not upward, "imports of a higher layer:\n  " + "\n  ".join(upward)


def design_layer_block() -> str:
    """The layer list DESIGN.md shows: one line per layer, highest first."""
    width = max(len(f"plait/{name}/") for name in LAYERS) + 2
    return "\n".join(f"{f'plait/{name}/':<{width}}{LAYER_ROLES[name]}" for name in LAYERS)


def design_listed_block(text: str) -> str:
    """The fenced block that follows DESIGN.md's "## Layers" heading."""
    _, found, rest = text.partition("\n## Layers\n")
    assert found, 'DESIGN.md has no "## Layers" section'
    _, fence, body = rest.partition("```\n")
    assert fence, 'DESIGN.md\'s "## Layers" section has no fenced layer list'
    block, closed, _ = body.partition("\n```")
    assert closed, "DESIGN.md's layer list has no closing fence"
    return block


def test_every_layer_has_a_role() -> None:
    assert sorted(LAYER_ROLES) == sorted(LAYERS)


def test_design_lists_the_layers_of_this_test() -> None:
    listed = design_listed_block(DESIGN.read_text())
    assert listed == design_layer_block(), (
        "DESIGN.md's layer list differs from tests/test_layers.py: replace the block under "
        '"## Layers" with the output of `python tests/test_layers.py`'
    )


if __name__ == "__main__":
    print(design_layer_block())
