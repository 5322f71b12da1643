"""Graphs stored in the mesh, by agent, name and immutable version.

Layout::

    graphs/<agent>/<name>/<version>   {"spec": <canonical spec>, "sha256": ..., "imported_at": ...}
    graphs/<agent>/<name>             {"latest": N, "versions": [1, 2, ...]}

A version and its index entry are written in one transaction, the index with a CAS on
its version, so concurrent imports of different versions of one graph all land. A
stored version never changes: importing a different spec under the same version raises
:class:`GraphVersionExists`; importing the same spec again returns the stored one.
"""

from __future__ import annotations

import re
import time
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, ValidationError

from plait.errors import GraphError, GraphNotFound, GraphVersionExists, VersionConflict
from plait.graphs.problems import Problem
from plait.graphs.spec import GraphSpec
from plait.graphs.validate import validate_graph
from plait.mesh import Entry, Mesh, skip_corrupt, skip_unreadable

PREFIX = "graphs/"
"""The mesh key prefix of stored graphs."""

MESH_KEYS = (PREFIX,)
"""The mesh key prefixes this service owns: code given the mesh may read them, never
write them (``plait.programs.capabilities`` guards them; a test checks it does)."""

_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_MAX_ATTEMPTS = 64


class StoredGraph(BaseModel):
    """One stored version of a graph.

    Attributes:
        agent: the agent the graph belongs to.
        name: the graph's name.
        version: the stored version.
        sha256: the hex SHA-256 of the spec's canonical JSON, which runs pin.
        spec: the spec.
        imported_at: when this version was first imported, in epoch seconds.
    """

    model_config = ConfigDict(frozen=True)

    agent: str
    name: str
    version: int
    sha256: str
    spec: GraphSpec
    imported_at: float


class GraphSummary(BaseModel):
    """One stored graph and its versions, as listed.

    Attributes:
        agent: the agent the graph belongs to.
        name: the graph's name.
        latest: the newest version.
        versions: every stored version, ascending.
        description: the newest version's description.
    """

    model_config = ConfigDict(frozen=True)

    agent: str
    name: str
    latest: int
    versions: list[int]
    description: str = ""


def name_problems(agent: str, name: str) -> list[str]:
    """Why ``agent`` or ``name`` cannot be part of a graph's mesh keys (empty if they can)."""
    rule = "use 1-128 letters, digits, '_', '.' or '-', starting with a letter or digit"
    return [
        f"{field}: {value!r} cannot name a stored graph ({rule})"
        for field, value in (("agent", agent), ("name", name))
        if not _valid(value)
    ]


def graph_key(agent: str, name: str, version: int | None = None) -> str:
    """The mesh key of a graph's index entry, or of one of its versions."""
    base = f"{PREFIX}{agent}/{name}"
    return base if version is None else f"{base}/{version}"


def _checked(spec: GraphSpec) -> tuple[dict[str, Any], str]:
    """``spec`` as stored, and its sha256, once it passes the structural checks."""
    report = validate_graph(spec)
    report.problems.extend(Problem.of(p) for p in name_problems(spec.agent, spec.name))
    report.raise_for_problems(f"graph {spec.agent}/{spec.name}")
    return spec.model_dump(mode="json"), spec.sha256()


async def import_graph(mesh: Mesh, spec: GraphSpec) -> StoredGraph:
    """Store ``spec`` as version ``spec.version`` of ``spec.agent``/``spec.name``.

    Checking agents and tools is the caller's job (see ``validate_graph``); the spec
    must still pass the structural checks.

    Returns:
        The stored graph: the new one, or the one already stored if it is identical.

    Raises:
        GraphValidationError: the spec has structural problems, or its agent or name
            cannot be part of a mesh key.
        GraphVersionExists: a different spec is stored under this version.
    """
    # Off the loop: a serving process's leases and requests would wait on it.
    dumped, sha = await anyio.to_thread.run_sync(_checked, spec)
    agent, name, version = spec.agent, spec.name, spec.version
    index_key, version_key = graph_key(agent, name), graph_key(agent, name, version)
    imported_at = time.time()
    record = {"spec": dumped, "sha256": sha, "imported_at": imported_at}
    attempts = 0
    while True:
        attempts += 1
        index = await mesh.get(index_key)
        versions = _index_versions(index)
        found = await mesh.get(version_key)
        if found is not None:
            stored = _decode_version(found)
            if stored.sha256 != sha:
                raise GraphVersionExists(
                    f"graph {agent}/{name} version {version} is already stored with sha256 "
                    f"{stored.sha256[:12]}…, and this spec has sha256 {sha[:12]}…: stored "
                    "versions are immutable, so bump the version"
                )
            if version in versions:
                return stored
        merged = sorted({*versions, version})
        tx = mesh.transact()
        if found is None:
            tx.put(version_key, record, if_version=0)
        tx.put(
            index_key,
            {"latest": merged[-1], "versions": merged},
            if_version=index.version if index is not None else 0,
        )
        try:
            await tx.commit()
        except VersionConflict:
            if attempts == _MAX_ATTEMPTS:
                raise
            continue  # another import moved the index or wrote this version: re-read
        if found is not None:
            return _decode_version(found)
        return StoredGraph(
            agent=agent, name=name, version=version, sha256=sha, spec=spec, imported_at=imported_at
        )


async def get_graph(mesh: Mesh, agent: str, name: str, version: int | None = None) -> StoredGraph:
    """One stored version of a graph; ``version=None`` means the newest.

    Raises:
        GraphNotFound: no such graph or version; the message lists what exists.
    """
    if name_problems(agent, name):
        raise GraphNotFound(f"no graph {agent}/{name}: {'; '.join(name_problems(agent, name))}")
    index = await mesh.get(graph_key(agent, name))
    versions = _index_versions(index)
    if not versions:
        raise GraphNotFound(f"no graph {agent}/{name}; {await _what_exists(mesh, agent)}")
    wanted = versions[-1] if version is None else version
    found = await mesh.get(graph_key(agent, name, wanted))
    if found is None:
        listed = ", ".join(str(v) for v in versions)
        raise GraphNotFound(f"graph {agent}/{name} has no version {wanted} (versions: {listed})")
    return _decode_version(found)


async def list_graphs(mesh: Mesh, agent: str | None = None) -> list[GraphSummary]:
    """Every stored graph (of ``agent``, if given), sorted by agent then name."""
    prefix = PREFIX if agent is None else f"{PREFIX}{agent}/"
    indexes: dict[tuple[str, str], list[int]] = {}
    descriptions: dict[tuple[str, str, int], str] = {}
    # One pass: index entries and version entries interleave in key order.
    async for entry in mesh.scan(prefix, on_corrupt=skip_corrupt):
        parts = entry.key[len(PREFIX) :].split("/")
        if len(parts) == 2:
            try:
                indexes[(parts[0], parts[1])] = _index_versions(entry)
            except GraphError as exc:
                skip_unreadable(entry.key, str(exc))
        elif len(parts) == 3 and isinstance(entry.value, dict):
            spec = entry.value.get("spec")
            text = spec.get("description") if isinstance(spec, dict) else None
            if isinstance(text, str) and parts[2].isdigit():
                descriptions[(parts[0], parts[1], int(parts[2]))] = text
    return [
        GraphSummary(
            agent=a,
            name=n,
            latest=versions[-1],
            versions=versions,
            description=descriptions.get((a, n, versions[-1]), ""),
        )
        for (a, n), versions in sorted(indexes.items())
        if versions
    ]


async def _what_exists(mesh: Mesh, agent: str) -> str:
    graphs = await list_graphs(mesh, agent) if _valid(agent) else []
    if not graphs:
        return f"agent {agent!r} has no stored graphs (import one with: plait graph import FILE)"
    listed = ", ".join(
        f"{g.name} (version{'s' if len(g.versions) > 1 else ''} "
        f"{', '.join(str(v) for v in g.versions)})"
        for g in graphs
    )
    return f"graphs of agent {agent!r}: {listed}"


def _valid(segment: str) -> bool:
    return isinstance(segment, str) and _SEGMENT.match(segment) is not None


def _index_versions(entry: Entry | None) -> list[int]:
    if entry is None:
        return []
    value = entry.value
    versions = value.get("versions") if isinstance(value, dict) else None
    if not isinstance(versions, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in versions
    ):
        raise GraphError(f"the graph index at {entry.key!r} is malformed: {value!r}")
    return sorted(versions)


def _decode_version(entry: Entry) -> StoredGraph:
    value: Any = entry.value
    try:
        if not isinstance(value, dict):
            raise TypeError(f"expected a mapping, found {type(value).__name__}")
        spec = GraphSpec.model_validate(value["spec"])
        return StoredGraph(
            agent=spec.agent,
            name=spec.name,
            version=spec.version,
            sha256=value["sha256"],
            spec=spec,
            imported_at=value["imported_at"],
        )
    except (KeyError, TypeError, ValidationError) as exc:
        raise GraphError(f"the stored graph at {entry.key!r} is unreadable: {exc}") from None


__all__ = [
    "MESH_KEYS",
    "PREFIX",
    "GraphSummary",
    "StoredGraph",
    "get_graph",
    "graph_key",
    "import_graph",
    "list_graphs",
    "name_problems",
]
