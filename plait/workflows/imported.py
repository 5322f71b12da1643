"""Storing a workflow in a mesh: the graph of its one node, a new version only when its
code changed."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Protocol

from plait.errors import GraphNotFound
from plait.graphs.nodes.workflow import pinned
from plait.graphs.spec import GraphSpec
from plait.graphs.store import StoredGraph, get_graph, import_graph
from plait.mesh import Mesh


class Importable(Protocol):
    """What storing a workflow reads of it (a :class:`~plait.workflows.Workflow`)."""

    agent: str
    name: str
    ref: str
    source_sha256: str

    @property
    def imported(self) -> MutableMapping[Mesh, StoredGraph]:
        """The version stored in each mesh this process imported it into."""
        ...

    def spec(self, version: int = 1) -> GraphSpec:
        """Its graph, as ``version``."""
        ...


async def import_workflow(mesh: Mesh, wf: Importable) -> StoredGraph:
    """Store ``wf`` as its graph: the stored version if its code is unchanged, else a
    new version (runs in flight stay pinned to theirs). Once per mesh object and
    workflow: a stored version never changes."""
    known = wf.imported.get(mesh)
    if known is not None:
        return known
    stored = await _import(mesh, wf)
    wf.imported[mesh] = stored
    return stored


async def _import(mesh: Mesh, wf: Importable) -> StoredGraph:
    version = 1
    try:
        latest = await get_graph(mesh, wf.agent, wf.name)
    except GraphNotFound:
        latest = None
    if latest is not None:
        if pinned(latest.spec.nodes[0]) == (wf.ref, wf.source_sha256):
            return latest
        version = latest.version + 1
    return await import_graph(mesh, wf.spec(version))


__all__ = ["Importable", "import_workflow"]
