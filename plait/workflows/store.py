"""Workflows in a mesh: import one (a graph of its one node), start a durable run of
it, read a run's journal, and list the runs pinned to code that has changed since."""

from __future__ import annotations

import importlib
import os
from typing import Any

from plait.errors import ConfigError, ProgramNotFound
from plait.graphs.nodes.workflow import pinned
from plait.graphs.store import get_graph
from plait.ids import RunId
from plait.mesh import Mesh
from plait.programs.registry import check_import_ref
from plait.runs import RunRecord, Runs
from plait.runs.store import read_record
from plait.workflows.imported import import_workflow
from plait.workflows.journal import Entry, read_journal
from plait.workflows.workflow import NODE, Workflow


def load_workflow(ref: str) -> Workflow[Any, Any]:
    """The workflow at import path ``ref`` (``pkg.module:fn``), imported.

    Raises:
        ConfigError: the path is malformed, cannot be imported, or names no workflow.
    """
    try:
        module_name, qualname = check_import_ref(ref)
    except ProgramNotFound:
        raise ConfigError(f"{ref!r} is not an import path, pkg.module:fn") from None
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"workflow {ref!r} cannot be imported: {exc}") from None
    for part in qualname.split("."):
        target = getattr(target, part, None)
    if not isinstance(target, Workflow):
        raise ConfigError(f"{ref!r} is not a workflow (decorate it with @plait.workflow)")
    return target


async def start_workflow(
    mesh: Mesh,
    wf: Workflow[Any, Any],
    *args: Any,
    run_id: RunId | None = None,
    workspace: str | os.PathLike[str] | None = None,
    model: str | None = None,
    **kwargs: Any,
) -> RunRecord:
    """Start a durable run of ``wf`` with these arguments (importing it first if its
    code is new); any process serving the mesh that can import it runs it. ``model``
    answers its agent turns (see :func:`plait.runs.start.start_run`)."""
    stored = await import_workflow(mesh, wf)
    return await Runs(mesh).start(
        wf.agent,
        wf.name,
        wf.bind(*args, **kwargs),
        version=stored.version,
        run_id=run_id,
        workspace=workspace,
        model=model,
    )


async def journal(mesh: Mesh, run_id: str) -> list[Entry]:
    """The steps a workflow run has journaled, in position order."""
    found = await read_journal(mesh, run_id, NODE)
    return [found[pos] for pos in sorted(found)]


async def stale_runs(mesh: Mesh) -> list[tuple[RunRecord, str]]:
    """Workflow runs in flight pinned to code that has changed: each run with the ref
    whose source now differs (or cannot be imported) in this process."""
    found: list[tuple[RunRecord, str]] = []
    for summary in await Runs(mesh).list():
        if summary.status in ("done", "failed", "cancelled"):
            continue
        rec, _ = await read_record(mesh, summary.run_id)
        if rec is None:
            continue
        stored = await get_graph(mesh, rec.graph.agent, rec.graph.name, rec.graph.version)
        pin = pinned(stored.spec.nodes[0]) if stored.spec.nodes else None
        if pin is None:
            continue
        try:
            current = load_workflow(pin[0]).source_sha256
        except ConfigError:
            current = ""
        if current != pin[1]:
            found.append((rec, pin[0]))
    return found


__all__ = [
    "import_workflow",
    "journal",
    "load_workflow",
    "stale_runs",
    "start_workflow",
]
