"""Starting runs: a run a person starts, and the child run a subgraph node starts.

Starting a run writes its record, its owner actor, its first audit event and its first
wake in one transaction (:meth:`RunCommit.start`); some process serving the mesh then
runs it. A subgraph node's child run is started the same way from inside its parent's
owner, so this module needs no service and no human surface.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from plait.actors import ActorRecord, load_partitions
from plait.errors import GraphError, VersionConflict
from plait.graphs import engine
from plait.graphs.compiled import compile_graph
from plait.graphs.engine import NodeResult
from plait.graphs.ports import SubgraphRunner
from plait.graphs.state import Waiting
from plait.graphs.store import get_graph
from plait.ids import RunId, new_run_id
from plait.mesh import Mesh
from plait.models import check_model_spec
from plait.models.scripted import pin_model_spec
from plait.runs.commit import RunCommit
from plait.runs.record import (
    OWNER_KIND,
    RunRecord,
    child_run_id,
    owner_id,
)
from plait.runs.store import read_record, run_output
from plait.telemetry import current_traceparent, metrics

OWNER_CONCURRENCY = 8
"""How many wakes of one run (fan-out instances) may run at once."""

_P = ParamSpec("_P")
_R = TypeVar("_R")


class _OnMesh(Protocol):
    mesh: Mesh


def on_mesh(
    fn: Callable[Concatenate[Mesh, _P], Awaitable[_R]],
) -> Callable[Concatenate[_OnMesh, _P], Awaitable[_R]]:
    """``fn(mesh, ...)`` as a method of an object with a ``mesh``: the same parameters
    (checked as ``fn``'s), docstring and signature, without the mesh."""

    @functools.wraps(fn)
    async def method(self: _OnMesh, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        return await fn(self.mesh, *args, **kwargs)

    # help() and inspect show fn's parameters, ``self`` in the mesh's place.
    signature = inspect.signature(fn)
    mesh, *rest = signature.parameters.values()
    self_param = mesh.replace(name="self", annotation=inspect.Parameter.empty)
    method.__signature__ = signature.replace(parameters=[self_param, *rest])  # type: ignore[attr-defined]
    return method


async def start_run(
    mesh: Mesh,
    agent: str,
    name: str,
    input: Any = None,
    *,
    version: int | None = None,
    model: str | None = None,
    run_id: RunId | None = None,
    parent: str | None = None,
    input_untrusted: bool = False,
    workspace: str | os.PathLike[str] | None = None,
) -> RunRecord:
    """Start a run of the newest (or the given) version of a stored graph.

    ``parent`` (``<run_id>/<node>``) makes it the child run of that subgraph node,
    whose run its last commit wakes. ``input_untrusted`` marks the input as outside
    content: what reads it is tainted and loses its pre-approved tools. ``workspace``
    (default: this process's working directory) is pinned in the record: the run's
    tools work there on any worker. A relative ``scripted:`` model path is pinned as
    an absolute one. A ``run_id`` already taken raises VersionConflict.

    :meth:`plait.runs.Runs.start` is this on the service's mesh.

    Raises:
        ConfigError: ``model`` is a spec that cannot work (see
            :func:`~plait.models.check_model_spec`); nothing is written.
    """
    if model is not None:
        check_model_spec(model)
    # Mail goes to the owner's partition: a process that hosts no runtime must read P.
    await load_partitions(mesh)
    stored = await get_graph(mesh, agent, name, version)
    run_id = run_id or new_run_id()
    graph = compile_graph(stored.spec, sha256=stored.sha256)
    state = engine.start(graph, run_id, input, now=time.time(), parent=parent)
    where = Path.cwd() / (workspace if workspace is not None else "")
    model = pin_model_spec(model)
    rec = RunRecord(**state.model_dump(), model=model, workspace=str(where))
    rec.input_tainted = input_untrusted
    rec.trace = current_traceparent()
    detail: dict[str, Any] = {"input": input, "graph": rec.graph.model_dump(), "model": model}
    if input_untrusted:
        detail["input_untrusted"] = True
    owner = ActorRecord(
        id=owner_id(run_id),
        kind=OWNER_KIND,
        config={"max_concurrency": OWNER_CONCURRENCY},
        created_at=rec.created_at,
    )
    started = await RunCommit(mesh).start(graph, rec, owner, detail)
    metrics.run_started()
    return started


def child_runner(mesh: Mesh, rec: RunRecord, workspace: Path) -> SubgraphRunner:
    """Runs a subgraph node's child of run ``rec`` as a durable run of its own.

    The visit's first run starts the child (its id derives from the run, the node and
    the visit, so a visit run again after a crash finds it) and parks the node; the
    child's last commit wakes this run, and the visit run again then answers the
    child's output and what it spent, or fails if the child did not finish.
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
        child_id = child_run_id(rec.run_id, key, visit)
        child, _ = await read_record(mesh, child_id)
        if child is None:
            with contextlib.suppress(VersionConflict):  # a second wake of this visit
                await start_run(
                    mesh,
                    agent,
                    name,
                    child_input,
                    version=version,
                    model=rec.model,
                    run_id=child_id,
                    parent=f"{rec.run_id}/{key}",
                    input_untrusted=untrusted,
                    workspace=workspace,
                )
            return _waiting_on(child_id, key, visit, agent, name)
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
            value=await run_output(mesh, child),
            tainted=last is not None and last.tainted,
            input_tokens=spent.input_tokens,
            output_tokens=spent.output_tokens,
            dollars=spent.dollars,
        )

    return run_child


def _waiting_on(child_id: str, key: str, visit: int, agent: str, name: str) -> Waiting:
    return Waiting(
        node=key,
        kind="subgraph",
        ask=f"waits on its subgraph {agent}/{name}, running as {child_id}",
        visit=visit,
        child=child_id,
    )


__all__ = ["OWNER_CONCURRENCY", "child_runner", "on_mesh", "start_run"]
