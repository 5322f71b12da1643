"""In-session runs kept under a run key, so a rerun skips the nodes that passed.

``run_graph(spec, input, run_key="K")`` keeps one record per key, in a mesh, at
``sessions/<agent>/<graph>/<K>``: the run's id, its graph version and input hash, and
the result of every visit that passed (by node and visit number), written as each
commits. A rerun under the same key walks the run again from its start, and a visit
that passed before takes its kept result instead of running: the engine routes the
same way, so the run arrives, without calling those nodes again, at the node that
failed (or was in flight when it failed, or waited on a person), and runs it.

A failed visit, a transient error being retried, a visit that parked on a person or a
budget, and a subgraph's child steps are not kept. The record is written with
compare-and-swap on its version, so two runs under one key at once are refused rather
than interleaved. A rerun with another graph version (its sha256) or input is refused
too, unless it asks to start over (``fresh=True``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from pydantic import BaseModel, Field
from pydantic_core import PydanticSerializationError, to_jsonable_python

from plait.errors import GraphError, RunKeyConflict, VersionConflict
from plait.graphs.compiled import CompiledGraph
from plait.graphs.result import NodeResult
from plait.graphs.state import TERMINAL, GraphRef, RunState, RunStatus
from plait.mesh import Mesh, absolute_mesh_url, open_mesh, resolve_mesh_url
from plait.models import Message

KEY_PREFIX = "sessions"
"""Where run-key records live in the mesh: ``sessions/<agent>/<graph>/<run_key>``."""

MESH_KEYS = (f"{KEY_PREFIX}/",)
"""The mesh key prefixes this service owns: code given the mesh may read them, never
write them (``plait.programs.capabilities`` guards them; a test checks it does)."""


class KeptVisit(BaseModel):
    """A visit that passed, as a rerun replays it (see :class:`NodeResult`)."""

    value: Any = None
    verdict: str | None = None
    detail: str | None = None
    tainted: bool = False
    prompt: str | None = None
    items: dict[str, list[Any]] = Field(default_factory=dict)
    history: list[Message] | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    dollars: float = 0.0
    started_at: float = 0.0
    ended_at: float = 0.0

    @classmethod
    def of(cls, result: NodeResult) -> KeptVisit:
        """What of ``result`` is kept: the fields of :class:`NodeResult` this names."""
        return cls(**{name: getattr(result, name) for name in cls.model_fields})

    def result(self) -> NodeResult:
        """The visit's result again, as its executor gave it."""
        kept = {name: getattr(self, name) for name in type(self).model_fields}
        if self.history is not None:
            kept["history"] = list(self.history)  # the run extends its own copy
        return NodeResult(**kept)


class KeyedRecord(BaseModel):
    """What a run key holds.

    Attributes:
        run_key: the key.
        run_id: the id of the run under the key; reruns keep it.
        graph: the graph version the run is pinned to.
        input_sha256: the hash of the run's input (canonical JSON).
        visits: the visits that passed, by ``<node>#<visit>``.
        runs: how many runs (the first and each rerun) went under the key.
        last_status: how the newest run under the key stands.
        last_error: its error, if it failed.
        last_error_node: the node whose failure ended it.
    """

    run_key: str
    run_id: str
    graph: GraphRef
    input_sha256: str
    visits: dict[str, KeptVisit] = Field(default_factory=dict)
    runs: int = 1
    last_status: RunStatus = "ready"
    last_error: str | None = None
    last_error_node: str | None = None


def keyed_record_key(graph: CompiledGraph, run_key: str) -> str:
    """The mesh key of ``run_key``'s record for ``graph``."""
    return f"{KEY_PREFIX}/{graph.agent}/{graph.spec.name}/{run_key}"


def input_sha256(run_key: str, input: Any) -> str:
    """The sha256 of ``input`` as canonical JSON.

    Raises:
        GraphError: the input is not JSON data (a run key keeps it in the mesh).
    """
    try:
        data = json.dumps(
            to_jsonable_python(input), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
    except (PydanticSerializationError, TypeError, ValueError) as exc:
        raise GraphError(
            f"run key {run_key!r}: the input must be JSON data to be kept under a key ({exc})"
        ) from None
    return hashlib.sha256(data.encode()).hexdigest()


def store_url(store: Mesh | str | None, mesh: Mesh | None) -> Mesh | str:
    """Where run-key records go: ``store``, else the run's ``mesh``, else the default
    mesh (``PLAIT_MESH``, else ``mesh.db`` in ``PLAIT_HOME`` or the nearest ``.plait/``),
    its URL made absolute so a later resume finds the same file from anywhere."""
    if store is not None:
        return store
    if mesh is not None:
        return mesh
    return absolute_mesh_url(resolve_mesh_url(None))


@asynccontextmanager
async def opened(store: Mesh | str) -> AsyncIterator[Mesh]:
    """The store as an open mesh: a mesh given is used as it is (its owner closes it);
    a URL is opened for the run and closed after."""
    if isinstance(store, Mesh):
        yield store
        return
    async with open_mesh(store) as mesh:
        yield mesh


class RunKeeper:
    """Reads and writes one run key's record for the run going on under it.

    Attributes:
        record: the record as last read or written; None until a fresh run's first write.
        version: the record's mesh version (0: not written yet).
        reused: the visits this run took from the record, ``<node>#<visit>`` in order.
    """

    def __init__(
        self, mesh: Mesh, run_key: str, key: str, digest: str, record: KeyedRecord | None
    ) -> None:
        self.mesh, self.run_key, self.key, self.input_sha256 = mesh, run_key, key, digest
        self.record = record
        self.version = 0
        self.reused: list[str] = []
        self._replayed: set[str] = set()
        self._replay = dict(record.visits) if record is not None else {}
        self._written: RunState | None = None

    @classmethod
    async def open(
        cls, mesh: Mesh, run_key: str, graph: CompiledGraph, input: Any, *, fresh: bool
    ) -> RunKeeper:
        """The keeper of ``run_key`` for a run of ``graph`` on ``input``.

        Raises:
            RunKeyConflict: the key holds a run of another graph version or input, and
                ``fresh`` is not set.
            GraphError: the key is empty, or the input is not JSON data.
        """
        if not run_key:
            raise GraphError("a run key may not be empty")
        key = keyed_record_key(graph, run_key)
        digest = input_sha256(run_key, input)
        entry = await mesh.get(key)
        record = None if entry is None else KeyedRecord.model_validate(entry.value)
        if record is not None and not fresh:
            _check(record, graph, digest)
        keeper = cls(mesh, run_key, key, digest, None if fresh else record)
        keeper.version = entry.version if entry is not None else 0
        if keeper.record is not None:
            keeper.record.runs += 1
        return keeper

    @classmethod
    async def attach(
        cls, mesh: Mesh, run_key: str, graph: CompiledGraph, version: int
    ) -> RunKeeper:
        """The keeper of a run that parked under ``run_key`` and now resumes; it must
        find the record as that run left it (at ``version``).

        Raises:
            RunKeyConflict: the record changed since, or holds another graph version.
        """
        key = keyed_record_key(graph, run_key)
        entry = await mesh.get(key)
        if entry is None or entry.version != version:
            raise RunKeyConflict(
                run_key,
                "changed",
                f"run key {run_key!r} was written by another run since this one parked; "
                f"run again with run_key={run_key!r} to go on from what it holds now",
            )
        record = KeyedRecord.model_validate(entry.value)
        _check(record, graph, record.input_sha256)
        keeper = cls(mesh, run_key, key, record.input_sha256, record)
        keeper._replay = {}  # the parked run already walked past what it holds
        keeper.version = entry.version
        return keeper

    @property
    def run_id(self) -> str | None:
        """The run's id under the key, if a run went under it before."""
        return self.record.run_id if self.record is not None else None

    def kept(self, key: str, visit: int) -> NodeResult | None:
        """The result of visit ``visit`` of ``key`` if it passed before, which this
        rerun then takes instead of running the node (once)."""
        found = self._replay.pop(f"{key}#{visit}", None)
        if found is None:
            return None
        self.reused.append(f"{key}#{visit}")
        self._replayed.add(f"{key}#{visit}")
        return found.result()

    async def save(self, state: RunState, passed: tuple[str, int, NodeResult] | None) -> None:
        """Write the record: where ``state`` stands and, in ``passed``, a visit that
        passed (its key, visit and result).

        Raises:
            RunKeyConflict: another run wrote the key meanwhile.
            GraphError: a value is not JSON data.
        """
        if passed is not None and f"{passed[0]}#{passed[1]}" in self._replayed:
            passed = None  # a kept visit replayed: the record holds it already
            if not state.terminal and state.waiting is None:
                return  # nothing new to write until the run ends or parks
        if passed is None and state is self._written:
            return
        record = self.record or KeyedRecord(
            run_key=self.run_key,
            run_id=state.run_id,
            graph=state.graph,
            input_sha256=self.input_sha256,
        )
        visits = record.visits
        if passed is not None:
            key, visit, result = passed
            visits = {**visits, f"{key}#{visit}": KeptVisit.of(result)}
        failed = state.status in TERMINAL and state.status != "done"
        record = record.model_copy(
            update={
                "visits": visits,
                "last_status": state.status,
                "last_error": state.error if failed else None,
                "last_error_node": state.error_node if failed else None,
            }
        )
        try:
            data = record.model_dump(mode="json")
        except PydanticSerializationError as exc:
            raise GraphError(
                f"run key {self.run_key!r}: the run's outputs must be JSON data to be kept "
                f"under a key ({exc})"
            ) from None
        try:
            entry = await self.mesh.put(self.key, data, if_version=self.version)
        except VersionConflict:
            raise RunKeyConflict(
                self.run_key,
                "changed",
                f"run key {self.run_key!r} was written by another run meanwhile: run one "
                "graph at a time under a key",
            ) from None
        self.record, self.version, self._written = record, entry.version, state


def passed(result: NodeResult) -> bool:
    """A visit whose result a rerun may reuse: it committed without an error."""
    return result.error is None and result.waiting is None and result.detail != "budget_exhausted"


def _check(record: KeyedRecord, graph: CompiledGraph, digest: str) -> None:
    held = record.graph
    if held.sha256 != graph.sha256:
        raise RunKeyConflict(
            record.run_key,
            "graph",
            f"run key {record.run_key!r} holds a run of graph {held.name!r} version "
            f"{held.version} (sha256 {held.sha256[:12]}), not of this version "
            f"{graph.spec.version} (sha256 {graph.sha256[:12]}): pass fresh=True to start "
            "over under the key, or use another key",
        )
    if record.input_sha256 != digest:
        raise RunKeyConflict(
            record.run_key,
            "input",
            f"run key {record.run_key!r} holds a run of graph {held.name!r} on another input "
            f"(sha256 {record.input_sha256[:12]}, this one {digest[:12]}): pass fresh=True "
            "to start over under the key, or use another key",
        )


__all__ = [
    "KEY_PREFIX",
    "MESH_KEYS",
    "KeptVisit",
    "KeyedRecord",
    "RunKeeper",
    "input_sha256",
    "keyed_record_key",
    "opened",
    "passed",
    "store_url",
]
