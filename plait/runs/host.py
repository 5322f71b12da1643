"""What one process needs to serve runs: settings, caches, and the mesh I/O of a step.

A :class:`RunHost` belongs to one actor runtime. It keeps what a warm host may keep —
the record it last wrote per run (a stale one only costs a CAS retry), pinned graph
specs, output values and agent conversations (immutable per key once written) — so a
transition on a warm host reads nothing it wrote itself.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import time
import weakref
from collections import OrderedDict
from pathlib import Path
from typing import Any, ClassVar

from plait.actors import ActorRuntime
from plait.decisions import Agent, DecisionBoard
from plait.errors import ConfigError, GraphError, VersionConflict
from plait.graphs.compiled import GraphKey, cached_graph, compile_graph, node_reads
from plait.graphs.engine import NodeResult, node_of
from plait.graphs.ports import ExecEnv, SubgraphRunner
from plait.graphs.spec import GraphSpec
from plait.graphs.state import Waiting
from plait.graphs.store import get_graph
from plait.ids import DecisionId
from plait.mesh import Transaction
from plait.models import Model, load_model
from plait.profiles import AgentProfile, profiles_map
from plait.runs.audit import output_digest
from plait.runs.ports import MeshHistories, RunDecisions, decision_id, wake_notify
from plait.runs.record import (
    PROGRESS_KEPT_S,
    RunRecord,
    child_run_id,
    load,
    output_key,
    owner_id,
    record_key,
)
from plait.runs.serving import graph_tools, missing_tools, serves_run
from plait.tools import ToolContext, ToolRegistry, default_registry

log = logging.getLogger("plait.runs")

_CACHE_SIZE = 10_000

PROFILE_TTL_S = 5.0
"""How long a host uses agent profiles it read before reading them again."""


class _Lru(OrderedDict[str, Any]):
    def __init__(self, size: int = _CACHE_SIZE) -> None:
        super().__init__()
        self.size = size

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)


class RunHost:
    """Serves the runs of one runtime.

    Args:
        runtime: the actor runtime whose run owners this host serves.
        model: a model answering for every agent of every run that names none.
        tools: the tool registry (default: the built-in tools).
        cwd: where tools work for runs whose record pins no workspace.
        tick_ms: how often a parked run re-checks its decision as a fallback.
        progress_kept_s: how long a finished run's progress topic is kept.
        only_run: serve only this run and its child runs (a foreground ``graph run``);
            the runtime hands other actors' messages back for another process.

    Installed on its runtime, it decides which actors the runtime activates: a run
    whose graph names a tool this host does not offer is left for a host that does,
    before any of its nodes runs here.
    """

    _hosts: ClassVar[weakref.WeakKeyDictionary[ActorRuntime, RunHost]] = weakref.WeakKeyDictionary()

    def __init__(
        self,
        runtime: ActorRuntime,
        *,
        model: Model | None = None,
        tools: ToolRegistry | None = None,
        cwd: Path | None = None,
        tick_ms: int = 60_000,
        progress_kept_s: float = PROGRESS_KEPT_S,
        only_run: str | None = None,
    ) -> None:
        self.runtime = runtime
        self.only_run = only_run
        self.mesh = runtime.mesh
        self.id = runtime.host
        self.model = model
        self.tools = tools or default_registry()
        self.cwd = cwd or Path.cwd()
        self.tick_ms = tick_ms
        self.progress_kept_s = progress_kept_s
        self.board = DecisionBoard(self.mesh)
        self.records: _Lru = _Lru()
        self.checked: set[GraphKey] = set()  # graph versions this host checked in the store
        self.values: _Lru = _Lru()
        self.histories: _Lru = _Lru()
        self._models: dict[str, Model] = {}
        self._profile_cache: dict[str, tuple[float, dict[str, AgentProfile]]] = {}
        self._servable: _Lru = _Lru()
        self._hosts[runtime] = self
        runtime.accepts = self.accepts

    @classmethod
    def of(cls, runtime: ActorRuntime) -> RunHost:
        """The host installed on ``runtime`` (one with defaults if none was)."""
        host = cls._hosts.get(runtime)
        if host is None:
            model = os.environ.get("PLAIT_MODEL")
            host = cls(runtime, model=load_model(model) if model else None)
        return host

    async def accepts(self, actor_id: str) -> bool:
        """Whether this host's runtime activates ``actor_id`` (see the class docstring)."""
        owners = owner_id("")
        if not actor_id.startswith(owners):
            return self.only_run is None
        if self.only_run is not None and not serves_run(self.only_run, actor_id):
            return False
        run_id = actor_id[len(owners) :]
        if self._servable.get(run_id) is True:
            return True
        rec, _ = await self.record(run_id)
        if rec is None or rec.terminal:
            return True  # its owner drops what it cannot serve
        missing = await self.missing_tools(rec)
        if missing:
            if self._servable.get(run_id) is None:
                log.warning(
                    "run %s needs tool(s) %s that this process does not offer: left queued "
                    "for a worker started with --tools that offers them",
                    run_id,
                    ", ".join(missing),
                )
                self._servable[run_id] = False
            return False
        self._servable[run_id] = True
        return True

    async def missing_tools(self, rec: RunRecord) -> list[str]:
        """The tools ``rec``'s graph names that this host does not offer."""
        return missing_tools(await self.needed_tools(rec), self.tools.names())

    async def needed_tools(self, rec: RunRecord) -> set[str]:
        """Every tool ``rec``'s graph may call (see :func:`plait.runs.serving.graph_tools`)."""
        try:
            spec = await self.spec(rec)
            profiles = await self._profiles(sorted(_agents(spec)))
        except (ConfigError, GraphError):
            return set()  # the run's owner fails the run, with that message
        return graph_tools(spec, profiles)

    def principal(self, run_id: str) -> Agent:
        """Who a run's owner acts as: never a human."""
        return Agent(owner_id(run_id))

    # -- records and specs -------------------------------------------------------------

    async def record(self, run_id: str, *, fresh: bool = False) -> tuple[RunRecord | None, int]:
        """The run's record and version: this host's last write unless ``fresh``."""
        if not fresh:
            cached = self.records.get(run_id)
            if cached is not None:
                return cached  # type: ignore[no-any-return]
        entry = await self.mesh.get(record_key(run_id))
        if entry is None:
            return None, 0
        rec = load(entry.value)
        self.records[run_id] = (rec, entry.version)
        return rec, entry.version

    def remember(self, rec: RunRecord, version: int) -> None:
        """Cache the record this host just wrote."""
        if rec.terminal:
            self.records.pop(rec.run_id, None)
        else:
            self.records[rec.run_id] = (rec, version)

    async def spec(self, rec: RunRecord) -> GraphSpec:
        """The graph version the run is pinned to; refuses a spec whose hash moved."""
        ref = rec.graph
        key = (ref.agent, ref.name, ref.version, ref.sha256)
        compiled = cached_graph(key) if key in self.checked else None
        if compiled is None:
            stored = await get_graph(self.mesh, ref.agent, ref.name, ref.version)
            if stored.sha256 != ref.sha256:
                raise GraphError(
                    f"run {rec.run_id} is pinned to {ref.agent}/{ref.name} "
                    f"v{ref.version} sha256 {ref.sha256[:12]}, but the store "
                    f"holds {stored.sha256[:12]}"
                )
            compiled = compile_graph(stored.spec, sha256=stored.sha256)
            self.checked.add(key)
        return compiled.spec

    async def env(self, spec: GraphSpec, rec: RunRecord) -> ExecEnv:
        """The executor environment of one run."""
        profiles = await self._profiles(sorted(_agents(spec)))
        decisions = RunDecisions(self.board, rec.run_id, self.mesh)
        return ExecEnv(
            agent=spec.agent,
            run_id=rec.run_id,
            model=self._model(rec.model),
            profiles=profiles,
            tools=self.tools,
            human=decisions,
            approvals=decisions,
            histories=MeshHistories(self.mesh, rec.run_id, self.histories, rec.visits),
            subgraphs=self._subgraph_runner(rec),
            cwd=self.workspace(rec),
            protected=self.mesh.local_files,
        )

    def workspace(self, rec: RunRecord) -> Path:
        """Where the run's tools work: pinned in its record, else this host's ``cwd``."""
        return Path(rec.workspace) if rec.workspace else self.cwd

    def _subgraph_runner(self, rec: RunRecord) -> SubgraphRunner:
        """Runs a subgraph node's child as a durable run of its own.

        The visit's first run starts the child (its id derives from the run, the node
        and the visit, so a visit run again after a crash finds it) and parks the node;
        the child's last commit wakes this run, and the visit run again then answers
        the child's output and what it spent, or fails if the child did not finish.
        """

        async def run_child(
            agent: str,
            name: str,
            version: int | None,
            child_input: Any,
            key: str,
            visit: int,
            untrusted: bool,
        ) -> Any:
            from plait.runs.service import Runs  # here: the service builds on this module

            runs = Runs(self.mesh)
            child_id = child_run_id(rec.run_id, key, visit)
            entry = await self.mesh.get(record_key(child_id))
            if entry is None:
                with contextlib.suppress(VersionConflict):  # a second wake of this visit
                    await runs.start(
                        agent,
                        name,
                        child_input,
                        version=version,
                        model=rec.model,
                        run_id=child_id,
                        parent=f"{rec.run_id}/{key}",
                        input_untrusted=untrusted,
                        workspace=self.workspace(rec),
                    )
                return _waiting_on(child_id, key, visit, agent, name)
            child = load(entry.value)
            if not child.terminal:
                return _waiting_on(child_id, key, visit, agent, name)
            if child.status != "done":
                raise GraphError(
                    f"subgraph {agent}/{name} under {key!r} (run {child_id}) ended "
                    f"{child.status}: {child.ended_detail or ''} {child.error or ''}".strip()
                )
            spent = child.usage
            last = child.outputs.get(child.output_node or "")
            return NodeResult(
                value=await runs.output(child),
                tainted=last is not None and last.tainted,
                input_tokens=spent.input_tokens,
                output_tokens=spent.output_tokens,
                dollars=spent.dollars,
            )

        return run_child

    async def _profiles(self, names: list[str]) -> dict[str, AgentProfile]:
        """Agent profiles, re-read at most every PROFILE_TTL_S seconds."""
        key = ",".join(names)
        cached = self._profile_cache.get(key)
        now = time.monotonic()
        if cached is None or now - cached[0] > PROFILE_TTL_S:
            cached = (now, await profiles_map(self.mesh, names))
            self._profile_cache[key] = cached
        return dict(cached[1])

    def _model(self, spec: str | None) -> Model | None:
        if spec is None:
            return self.model
        model = self._models.get(spec)
        if model is None:
            model = self._models[spec] = load_model(spec)
        return model

    # -- output values -----------------------------------------------------------------

    async def value(self, ref: str) -> Any:
        """The output value stored at ``ref``."""
        if ref in self.values:
            return self.values[ref]
        entry = await self.mesh.get(ref)
        value = entry.value.get("value") if entry is not None else None
        self.values[ref] = value
        return value

    async def values_for(self, spec: GraphSpec, rec: RunRecord, key: str) -> dict[str, Any]:
        """The output values ``key``'s node reads."""
        out: dict[str, Any] = {}
        for name in node_reads(spec, node_of(spec, rec, key)):
            found = rec.outputs.get(name)
            if found is not None:
                out[name] = await self.value(found.ref) if found.ref else found.value
        return out

    async def hydrate(self, spec: GraphSpec, rec: RunRecord, key: str) -> RunRecord:
        """A copy of ``rec`` with the values a fan-in of ``key``'s siblings needs."""
        plan = rec.instance_of(key)
        if plan is None:
            return rec
        fanout = next(f for f in rec.fanouts.values() if key in f.instances)
        siblings = [k for k, p in fanout.instances.items() if p.target == plan.target]
        if any(k != key and k not in rec.outputs for k in siblings):
            return rec
        outputs = dict(rec.outputs)
        for k in siblings:
            found = outputs.get(k)
            if found is not None and found.ref:
                outputs[k] = found.model_copy(update={"value": await self.value(found.ref)})
        return rec.model_copy(update={"outputs": outputs})

    def store_outputs(
        self,
        tx: Transaction,
        new: RunRecord,
        key: str | None,
        result: NodeResult | None,
        digests: dict[str, str] | None = None,
    ) -> dict[str, str]:
        """Move the values of this transition's outputs under their own keys in ``tx``.

        ``new`` must own its ``outputs`` dict (the caller copied it); its entries are
        replaced, never changed in place, since they may be shared with older states.

        Returns the output key written per node (for the audit event's reference);
        ``digests``, if given, receives each written payload's sha256 per node.
        """
        refs: dict[str, str] = {}
        outputs = new.outputs
        for name, out in list(outputs.items()):
            if out.value is None and name != key:
                continue
            if out.seq == new.seq and out.ref is None:
                ref = output_key(new.run_id, name, out.visit)
                payload: dict[str, Any] = {"value": out.value}
                if name == key and result is not None:
                    payload.update(prompt=result.prompt, error=result.error)
                tx.put(ref, payload)
                if digests is not None:
                    digests[name] = output_digest(payload)
                self.values[ref] = out.value
                refs[name] = ref
                outputs[name] = out.model_copy(update={"value": None, "ref": ref})
            elif out.value is not None:  # hydrated for a fan-in: the value lives at its ref
                outputs[name] = out.model_copy(update={"value": None})
        return refs

    # -- policies ----------------------------------------------------------------------

    async def verify_effect(
        self, spec: GraphSpec, rec: RunRecord, key: str, visit: int
    ) -> NodeResult | None:
        """Run the node's ``verify`` check; a result if the effect is already there."""
        check = getattr(node_of(spec, rec, key), "verify", None)
        if not check:
            return None
        started = time.time()
        found = await self.tools.call(
            check,
            {"run_id": rec.run_id, "node": key, "visit": visit},
            ToolContext(
                run_id=rec.run_id,
                node=key,
                cwd=self.workspace(rec),
                protected=self.mesh.local_files,
            ),
        )
        if isinstance(found, dict) and found.get("done"):
            return NodeResult(value=found.get("value"), started_at=started, ended_at=time.time())
        return None

    async def raise_budget_decision(self, rec: RunRecord) -> DecisionId:
        """Raise the decision a person answers to raise an exhausted budget."""
        # Stable for one exhaustion, new after each raise: a raise too small to go on
        # parks the run again on a fresh decision, not on the one just answered.
        raised = ",".join(f"{k}={v:g}" for k, v in sorted(rec.budget_extra.items()))
        did = decision_id(
            rec.run_id,
            "budget",
            "run",
            rec.seq,
            hashlib.sha256(raised.encode()).hexdigest()[:8] if raised else "",
        )
        ask = rec.waiting.ask if rec.waiting else "The run's budget is exhausted."
        await self.board.raise_(
            ask,
            "choice",
            ["raise", "stop"],
            id=did,
            run_id=rec.run_id,
            node="budget",
            data={"usage": rec.usage.model_dump()},
            notify=wake_notify(self.mesh, rec.run_id, "budget"),
            by=self.principal(rec.run_id),
        )
        return did


def _agents(spec: GraphSpec) -> set[str]:
    named = {spec.agent} | {
        a for n in spec.nodes if isinstance(a := getattr(n, "agent", None), str)
    }
    return {a for a in named if a}


def _waiting_on(child_id: str, key: str, visit: int, agent: str, name: str) -> Waiting:
    return Waiting(
        node=key,
        kind="subgraph",
        ask=f"waits on its subgraph {agent}/{name}, running as {child_id}",
        visit=visit,
        child=child_id,
    )


__all__ = ["RunHost"]
