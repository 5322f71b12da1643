"""Reading runs: records, pinned graph specs, output values and conversations.

A :class:`RunStore` keeps what a warm process may keep — the record it last wrote per
run (a stale one only costs a CAS retry), the compiled graph of each pinned version
(checked against its hash once), output values and agent conversations (immutable
per key once written) — so a transition on a warm process reads nothing it wrote
itself. It only reads; :mod:`plait.runs.commit` writes and tells it what it wrote.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from plait.errors import GraphError
from plait.graphs.compiled import CompiledGraph, GraphKey, compile_graph
from plait.graphs.engine import node_of
from plait.graphs.store import get_graph
from plait.mesh import Mesh
from plait.runs.log import read_payload
from plait.runs.record import RunRecord, history_key, load, record_key
from plait.runs.shared_loads import SharedLoads

_CACHE_SIZE = 10_000
_GRAPHS_KEPT = 256


class Lru(OrderedDict[str, Any]):
    """A dict that forgets its least recently set entries beyond ``size``."""

    def __init__(self, size: int = _CACHE_SIZE) -> None:
        super().__init__()
        self.size = size

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)


async def read_record(mesh: Mesh, run_id: str) -> tuple[RunRecord | None, int]:
    """A run's stored record and its version (None, 0 if there is none)."""
    entry = await mesh.get(record_key(run_id))
    if entry is None:
        return None, 0
    return load(entry.value), entry.version


async def read_value(mesh: Mesh, ref: str) -> Any:
    """The output value stored at ``ref`` (None if it is gone)."""
    payload = await read_payload(mesh, ref)
    return payload.get("value") if isinstance(payload, dict) else None


async def run_output(mesh: Mesh, rec: RunRecord) -> Any:
    """The output of a finished run (None unless it is done)."""
    if rec.status != "done" or rec.output_node is None:
        return None
    out = rec.outputs.get(rec.output_node)
    if out is None or out.ref is None:
        return None if out is None else out.value
    return await read_value(mesh, out.ref)


class RunStore:
    """The reads of one serving process, cached (see the module docstring).

    Attributes:
        records: the record (and version) this process last wrote or read per run.
        graphs: the compiled graph of each version (with its hash) this process read
            and checked in the store.
        values: output values by their mesh key.
        histories: agent conversations (see :class:`plait.runs.mesh_ports.MeshHistories`).
    """

    def __init__(self, mesh: Mesh) -> None:
        self.mesh = mesh
        self.records: Lru = Lru()
        self.graphs: OrderedDict[GraphKey, CompiledGraph] = OrderedDict()
        self.values: Lru = Lru()
        self.histories: Lru = Lru()
        self._graphs: SharedLoads[GraphKey, CompiledGraph] = SharedLoads()

    async def record(self, run_id: str, *, fresh: bool = False) -> tuple[RunRecord | None, int]:
        """The run's record and version: this process's last write unless ``fresh``."""
        if not fresh:
            cached = self.records.get(run_id)
            if cached is not None:
                return cached  # type: ignore[no-any-return]
        rec, version = await read_record(self.mesh, run_id)
        if rec is not None:
            self.records[run_id] = (rec, version)
        return rec, version

    def remember(self, rec: RunRecord, version: int) -> None:
        """Cache the record this process just committed at ``version``.

        A run that ended or parked leaves the caches, its outputs and conversations
        too: a parked run is read afresh when it wakes (another host may answer for
        it), so a host's memory stays bounded by its live runs, not its parked ones.
        """
        if rec.terminal or rec.waiting is not None:
            self.forget(rec)
        else:
            self.records[rec.run_id] = (rec, version)

    def forget(self, rec: RunRecord) -> None:
        """Drop what the caches hold of ``rec``'s run."""
        self.records.pop(rec.run_id, None)
        for node in rec.visits:
            self.histories.pop(history_key(rec.run_id, node), None)
        for out in rec.outputs.values():
            if out.ref is not None:
                self.values.pop(out.ref, None)

    async def graph(self, rec: RunRecord) -> CompiledGraph:
        """The compiled graph version the run is pinned to, read and compiled once per
        process; refuses a spec whose hash moved."""
        ref = rec.graph
        key = (ref.agent, ref.name, ref.version, ref.sha256)
        found = self.graphs.get(key)
        if found is None:
            found = await self._graphs.load(key, lambda: self._check(rec))
        return found

    async def _check(self, rec: RunRecord) -> CompiledGraph:
        """Read the graph version ``rec`` is pinned to and check its hash."""
        ref = rec.graph
        stored = await get_graph(self.mesh, ref.agent, ref.name, ref.version)
        if stored.sha256 != ref.sha256:
            raise GraphError(
                f"run {rec.run_id} is pinned to {ref.agent}/{ref.name} "
                f"v{ref.version} sha256 {ref.sha256[:12]}, but the store "
                f"holds {stored.sha256[:12]}"
            )
        compiled = compile_graph(stored.spec, sha256=stored.sha256)
        self.graphs[compiled.key] = compiled
        while len(self.graphs) > _GRAPHS_KEPT:
            self.graphs.popitem(last=False)
        return compiled

    async def value(self, ref: str) -> Any:
        """The output value stored at ``ref``."""
        if ref in self.values:
            return self.values[ref]
        value = self.values[ref] = await read_value(self.mesh, ref)
        return value

    async def values_for(self, graph: CompiledGraph, rec: RunRecord, key: str) -> dict[str, Any]:
        """The output values ``key``'s node reads, by node."""
        out: dict[str, Any] = {}
        for name in graph.reads(node_of(graph, rec, key).id):
            found = rec.outputs.get(name)
            if found is not None:
                out[name] = await self.value(found.ref) if found.ref else found.value
        return out

    async def fan_in_values(self, rec: RunRecord, key: str) -> dict[str, Any]:
        """The stored values of ``key``'s fan-out siblings, when ``key`` is the last of
        them to finish (the engine aggregates them); else nothing."""
        plan = rec.instance_of(key)
        if plan is None:
            return {}
        fanout = next(f for f in rec.fanouts.values() if key in f.instances)
        siblings = [k for k, p in fanout.instances.items() if p.target == plan.target]
        if any(k != key and k not in rec.outputs for k in siblings):
            return {}
        values: dict[str, Any] = {}
        for k in siblings:
            found = rec.outputs.get(k)
            if found is not None and found.ref:
                values[k] = await self.value(found.ref)
        return values


__all__ = ["Lru", "RunStore", "read_record", "read_value", "run_output"]
