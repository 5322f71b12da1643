"""``plait graph``: validate, import, list and show graphs, and print their schema."""

from __future__ import annotations

import importlib
import json
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from plait.cli._common import (
    CreatingMeshOption,
    MeshOption,
    ReadingMeshOption,
    console,
    err_console,
    fail,
    print_json,
    run,
)
from plait.cli._foreground import known_tools
from plait.cli._graph_app import graph_app
from plait.cli._output import Output, OutputOption, mode, rows
from plait.decisions import Agent, Human
from plait.errors import GraphNotFound, GraphValidationError, NotPermitted
from plait.graphs.builder import Graph
from plait.graphs.loader import MAX_FILE_BYTES, load_graph_file
from plait.graphs.mermaid import to_mermaid
from plait.graphs.nodes.program import program_problems, refuse_unpromoted, unpromoted_texts
from plait.graphs.problems import Problem
from plait.graphs.spec import GraphSpec, graph_json_schema
from plait.graphs.store import (
    GraphSummary,
    StoredGraph,
    get_graph,
    import_graph,
    list_graphs,
    name_problems,
)
from plait.graphs.validate import ValidationReport, validate_graph
from plait.mesh import Mesh, open_mesh
from plait.profiles import list_profiles
from plait.tools import names_match

FileArgument = Annotated[
    Path,
    typer.Argument(
        metavar="FILE",
        help="A graph file (.json, .yaml or .yml), or a Python graph as pkg.module:NAME.",
    ),
]

_PYTHON_REF = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]


async def _check(mesh: Mesh, file: Path) -> ValidationReport:
    """Load and validate ``file`` against the mesh's agents and the tools offered: the
    built-in ones, those of ``PLAIT_TOOLS`` and those of the live workers."""
    built: Graph | None = None
    try:
        if _is_python_ref(file):
            built = _python_graph(str(file))
            data = built.data()
        else:
            data = load_graph_file(file)
    except GraphValidationError as exc:
        return ValidationReport(None, [Problem.of(p) for p in exc.problems])
    agents = {profile.name: profile for profile in await list_profiles(mesh)}
    registry, known = await known_tools(mesh)

    def tool_schema(tool: str) -> dict[str, Any] | None:
        return registry.get(tool).parameters if tool in registry else None

    checks: dict[str, Any] = {
        "agents": agents,
        "tool_is_known": lambda tool: names_match(tool, known),
        "tool_schema": tool_schema,
    }
    if built is not None:
        try:
            report = ValidationReport(built.compile(durable=True, **checks))
        except GraphValidationError as exc:
            report = ValidationReport(None, [Problem.of(p) for p in exc.problems])
    else:
        report = validate_graph(data, **checks)
    if report.spec is not None:
        saved = await program_problems(mesh, iter(report.spec.nodes))
        report.problems.extend(Problem.of(p) for p in saved)
        report.problems.extend(Problem("(root)", p) for p in _unpromoted_problems(report.spec))
    agent, name = data.get("agent", "assistant"), data.get("name")
    if isinstance(agent, str) and isinstance(name, str) and name:
        report.problems.extend(Problem.of(p) for p in name_problems(agent, name))
    return report


def _unpromoted_problems(spec: GraphSpec) -> list[str]:
    """Why this process may not take a graph that runs saved texts unpromoted: only the
    person at the terminal may, never a process a tool (so a model) started."""
    if not unpromoted_texts(spec.nodes):
        return []
    try:
        Human.at_terminal()
    except NotPermitted:
        try:
            refuse_unpromoted(Agent("tool-process"), spec.nodes, "import or run")
        except NotPermitted as exc:
            return [str(exc)]
    return []


def _is_python_ref(file: Path) -> bool:
    """Whether FILE names a Python graph (``pkg.module:NAME``) rather than a file."""
    return not file.exists() and _PYTHON_REF.fullmatch(str(file)) is not None


def _python_graph(ref: str) -> Graph:
    """The :class:`~plait.graphs.builder.Graph` at ``pkg.module:NAME``, imported as
    ``python -m`` would (the working directory importable, after installed packages).

    Raises:
        GraphValidationError: the module does not import, or NAME is not a Graph.
    """
    module_name, _, attr = ref.partition(":")
    if str(Path.cwd()) not in sys.path:
        sys.path.append(str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # any error of the user's module is a problem to report
        raise GraphValidationError(
            [f"(file): cannot import {module_name}: {type(exc).__name__}: {exc}"], ref
        ) from None
    found = getattr(module, attr, None)
    if not isinstance(found, Graph):
        what = "nothing" if found is None else type(found).__name__
        raise GraphValidationError(
            [f"(file): {module_name}.{attr} is {what}, not a plait.Graph"], ref
        )
    return found


def _source(file: Path) -> str | None:
    """The file's text for locating problems (None if it cannot be read as text)."""
    try:
        if _is_python_ref(file) or file.stat().st_size > MAX_FILE_BYTES:
            return None
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _say(line: str, *, stderr: bool = False, style: str | None = None) -> None:
    """Print user-supplied text as written (no markup, no highlighting)."""
    out = err_console if stderr else console
    out.print(line, markup=False, highlight=False, soft_wrap=True, style=style)


def _print_report(file: Path, report: ValidationReport, *, stderr: bool) -> None:
    for warning in report.warnings:
        _say(f"warning: {warning}", stderr=True, style="yellow")
    if report.problems:
        _say(f"{file}: {len(report.problems)} problem(s):", stderr=stderr, style="bold red")
        for problem in report.problems:
            _say(f"  {problem}", stderr=stderr)


def _short(sha256: str) -> str:
    return f"{sha256[:12]}…"


@graph_app.command("validate")
def validate(
    file: FileArgument, as_json: JsonOption = False, mesh: ReadingMeshOption = None
) -> None:
    """Check FILE and list every problem with its path (exit 1 if there is any).

    With --json, each problem is an object: path, message, line, column, hint.
    """

    async def main() -> ValidationReport:
        async with open_mesh(mesh) as m:
            return await _check(m, file)

    report = run(main)
    if as_json:
        source = _source(file) if report.problems else None
        problems = [p.as_dict(source) for p in report.problems]
        print_json({"ok": report.ok, "problems": problems, "warnings": report.warnings})
    else:
        _print_report(file, report, stderr=False)
        if report.ok and report.spec is not None:
            s = report.spec
            _say(f"{file}: ok ({s.agent}/{s.name} version {s.version})", style="green")
    if not report.ok:
        raise typer.Exit(1)


@graph_app.command("import")
def import_(file: FileArgument, mesh: CreatingMeshOption = None) -> None:
    """Validate FILE and store it as its agent's graph, at the version it names."""

    async def main() -> tuple[ValidationReport, StoredGraph | None, bool]:
        async with open_mesh(mesh) as m:
            report = await _check(m, file)
            if not report.ok or report.spec is None:
                return report, None, False
            existed = await _is_stored(m, report.spec)
            return report, await import_graph(m, report.spec), existed

    report, stored, existed = run(main)
    _print_report(file, report, stderr=True)
    if stored is None:
        fail(f"{file} was not imported")
    note = ", already stored and unchanged" if existed else ""
    _say(
        f"imported {stored.agent}/{stored.name} version {stored.version} "
        f"(sha256 {_short(stored.sha256)}{note})"
    )


async def _is_stored(mesh: Mesh, spec: GraphSpec) -> bool:
    try:
        await get_graph(mesh, spec.agent, spec.name, spec.version)
    except GraphNotFound:
        return False
    return True


@graph_app.command("list")
def list_(
    agent: Annotated[str | None, typer.Option("--agent", help="Only this agent's graphs.")] = None,
    as_json: JsonOption = False,
    output: OutputOption = None,
    mesh: MeshOption = None,
) -> None:
    """List stored graphs with their newest version and every version."""
    shown = mode(output, as_json)

    async def main() -> list[GraphSummary]:
        async with open_mesh(mesh) as m:
            return await list_graphs(m, agent)

    graphs = run(main)
    if shown is Output.json:
        print_json([g.model_dump(mode="json") for g in graphs])
        return
    if not graphs:
        whose = f" for agent {agent!r}" if agent else ""
        _say(f"no graphs stored{whose} (import one with: plait graph import FILE)")
        return
    rows(
        ("agent", "name", "latest", "versions", "description"),
        [
            (g.agent, g.name, g.latest, ", ".join(str(v) for v in g.versions), g.description)
            for g in graphs
        ],
        fit=(3, 4),
        wide=shown is Output.wide,
    )


@graph_app.command("show")
def show(
    agent: Annotated[str, typer.Argument(metavar="AGENT", help="The graph's agent.")],
    name: Annotated[str, typer.Argument(metavar="NAME", help="The graph's name.")],
    version: Annotated[
        int | None, typer.Option("--version", min=1, help="This version (default: newest).")
    ] = None,
    mermaid: Annotated[bool, typer.Option("--mermaid", help="Print a Mermaid flowchart.")] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the stored record as one line of JSON.")
    ] = False,
    mesh: MeshOption = None,
) -> None:
    """Print a stored graph: its spec as JSON, or a Mermaid flowchart with --mermaid."""
    if mermaid and as_json:
        fail("choose one of --mermaid and --json")

    async def main() -> StoredGraph:
        async with open_mesh(mesh) as m:
            return await get_graph(m, agent, name, version)

    stored = run(main)
    if mermaid:
        sys.stdout.write(to_mermaid(stored.spec).rstrip("\n") + "\n")
    elif as_json:
        print_json(stored.model_dump(mode="json"))
    else:
        when = datetime.fromtimestamp(stored.imported_at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        _say(
            f"{stored.agent}/{stored.name} version {stored.version} "
            f"(sha256 {_short(stored.sha256)}, imported {when})",
            stderr=True,
            style="bold",
        )
        console.print_json(json.dumps(stored.spec.model_dump(mode="json")))


@graph_app.command("schema")
def schema() -> None:
    """Print the JSON Schema of graph files (point a file's "$schema" at it)."""
    sys.stdout.write(json.dumps(graph_json_schema(), indent=2, ensure_ascii=False) + "\n")


__all__ = ["graph_app"]
