"""Helpers for durable-run tests: graphs, an in-process host, the CLI as a process.

In-process tests serve runs with :func:`plait.runs.serve` (as ``plait graph run`` and
``plait worker`` do) over a mesh of each backend; subprocess tests run ``.venv/bin/plait`` against a
SQLite file in the test's own directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio

from plait.actors import LocalRuntime
from plait.graphs.loader import load_graph
from plait.graphs.store import import_graph
from plait.graphs.trajectory import TrajectoryStep
from plait.mesh import Mesh, open_mesh
from plait.models.scripted import ScriptedModel
from plait.profiles import AgentProfile, put_profile
from plait.runs import OwnerServices, RunRecord, Runs, serve
from plait.tools import ToolRegistry
from tests._support.cli import in_a_coroutine, run_in_process
from tests._support.timing import scaled

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
EXAMPLES = ROOT / "examples"
PLAIT = Path(sys.executable).with_name("plait")

T = TypeVar("T")


def agent_chain(name: str, ids: Sequence[str], **node_extra: Mapping[str, Any]) -> dict[str, Any]:
    """A graph of agent nodes run one after another, each reading the one before."""
    nodes = []
    for index, node_id in enumerate(ids):
        prompt = "Begin with {{input}}" if index == 0 else f"Go on from {{{{{ids[index - 1]}}}}}"
        node: dict[str, Any] = {"id": node_id, "type": "agent", "prompt": prompt}
        if index + 1 < len(ids):
            node["next"] = ids[index + 1]
        node.update(node_extra.get(node_id, {}))
        nodes.append(node)
    return {"name": name, "agent": "assistant", "entry": ids[0], "nodes": nodes}


async def store(mesh: Mesh, graph: Mapping[str, Any] | Path) -> None:
    """Validate and import a graph (a mapping, or a file's path)."""
    await import_graph(mesh, load_graph(graph if isinstance(graph, Mapping) else str(graph)))


@asynccontextmanager
async def hosting(
    mesh: Mesh,
    model: ScriptedModel | None = None,
    *,
    visibility_timeout_ms: int = 1_000,
    tick_ms: int = 60_000,
    drain_timeout_s: float = 5.0,
    tools: ToolRegistry | None = None,
) -> AsyncIterator[tuple[LocalRuntime, OwnerServices]]:
    """Serve runs in this process (no heartbeat): its runtime and owner services.

    With a short ``drain_timeout_s``, leaving the block cancels the handlers still
    running, leaving their messages unacked: as if the host had died mid-node.
    """
    async with serve(
        mesh,
        model=model,
        tools=tools,
        tick_ms=tick_ms,
        visibility_timeout_ms=visibility_timeout_ms,
        drain_timeout_s=drain_timeout_s,
        beat=False,
    ) as serving:
        yield serving.runtime, serving.owner_services


async def settle(runs: Runs, run_id: str, timeout: float = 10.0, **kw: Any) -> RunRecord:
    """Wait until the run is done, failed, cancelled or waiting on a person (``timeout``
    stretched on a busy machine)."""
    return await runs.wait(run_id, timeout=scaled(timeout), **kw)


async def eventually(
    check: Callable[[], Awaitable[T | None]], timeout: float = 10.0, every: float = 0.02
) -> T:
    """Poll ``check`` until it returns something truthy; that value (``timeout``
    stretched on a busy machine)."""
    with anyio.fail_after(scaled(timeout)):
        while True:
            found = await check()
            if found:
                return found
            await anyio.sleep(every)


def commits(trajectory: Sequence[TrajectoryStep | dict[str, Any]]) -> list[tuple[str, int]]:
    """The (node, visit) pairs of a trajectory (steps, or as the CLI prints them)."""
    steps = [s if isinstance(s, TrajectoryStep) else TrajectoryStep(**s) for s in trajectory]
    return [(step.node, step.visit) for step in steps]


# -- the CLI as a real process ---------------------------------------------------------


class Cli:
    """Runs ``plait`` as a subprocess in a directory, by default on a SQLite file there.

    With ``in_process``, a call that runs a command to its end runs it in this process
    (:func:`tests._support.cli.run_in_process`): for tests of what a command prints or
    stores, not of the process itself. :meth:`spawn` always starts a process.
    """

    def __init__(self, cwd: Path, mesh_url: str | None = None, *, in_process: bool = False) -> None:
        self.cwd = cwd
        self.in_process = in_process
        self.mesh_url = mesh_url or f"sqlite:///{cwd / 'mesh.db'}"
        self.env = {
            **os.environ,
            "PLAIT_USER": "ana",
            "COLUMNS": "200",
            "PLAIT_MESH": self.mesh_url,
        }
        self.env.pop("PLAIT_MODEL", None)

    def argv(self, *args: str) -> list[str]:
        """The command line of ``plait ARGS --mesh URL``."""
        return [str(PLAIT), *args, "--mesh", self.mesh_url]

    def __call__(
        self, *args: str, ok: bool = True, timeout: float = 30.0
    ) -> subprocess.CompletedProcess[str]:
        """Run ``plait ARGS`` to its end (``timeout`` stretched on a busy machine); by
        default it must exit 0."""
        return self._run(args, in_process=self.in_process, ok=ok, timeout=timeout)

    def setup(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run ``plait ARGS``, a command that only sets the stage for a test of something
        else (import a graph, save a program), to its end: in this process when the test
        is synchronous, else as a process. It must exit 0."""
        return self._run(args, in_process=not in_a_coroutine(), ok=True, timeout=30.0)

    def _run(
        self, args: Sequence[str], *, in_process: bool, ok: bool, timeout: float
    ) -> subprocess.CompletedProcess[str]:
        if in_process:
            done = run_in_process(self.argv(*args)[1:], cwd=self.cwd, env=self.env)
        else:
            done = subprocess.run(
                self.argv(*args),
                cwd=self.cwd,
                env=self.env,
                text=True,
                capture_output=True,
                timeout=scaled(timeout),
                check=False,
            )
        if ok and done.returncode != 0:
            raise AssertionError(
                f"plait {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
            )
        return done

    def json(self, *args: str) -> Any:
        """Run ``plait ARGS --json`` and parse what it prints."""
        return json.loads(self(*args, "--json").stdout)

    def profile(self, profile: AgentProfile) -> None:
        """Store an agent profile in this CLI's mesh."""

        async def put() -> None:
            async with open_mesh(self.mesh_url) as mesh:
                await put_profile(mesh, profile)

        anyio.run(put)

    def spawn(self, *args: str) -> subprocess.Popen[str]:
        """Start ``plait ARGS`` and return without waiting."""
        return subprocess.Popen(
            self.argv(*args),
            cwd=self.cwd,
            env=self.env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )


def poll(check: Callable[[], T | None], timeout: float = 20.0, every: float = 0.05) -> T:
    """Poll a blocking ``check`` until it returns something truthy; that value
    (``timeout`` stretched on a busy machine)."""
    timeout = scaled(timeout)
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout:.0f}s waiting on {check}")
        time.sleep(every)


# A child graph that asks a person, under a parent that runs it as a subgraph.
ASKING_CHILD = {
    "name": "sign-off",
    "agent": "assistant",
    "entry": "draft",
    "nodes": [
        {"id": "draft", "type": "agent", "prompt": "Draft {{input}}", "next": "approve"},
        {"id": "approve", "type": "human", "ask": "Ship {{draft}}?", "next": "ship"},
        {"id": "ship", "type": "agent", "prompt": "Ship {{draft}} ({{approve}})"},
    ],
}  # fmt: skip
ASKING_PARENT = {
    "name": "release",
    "agent": "assistant",
    "entry": "child",
    "nodes": [
        {"id": "child", "type": "subgraph", "graph": "sign-off", "input": "{{input}}",
         "next": "announce"},
        {"id": "announce", "type": "agent", "prompt": "Announce {{child}}"},
    ],
}  # fmt: skip


def asking_model_rules() -> list[dict[str, Any]]:
    """A script for the two graphs above: the child drafts, ships once approved."""
    return [
        {"node": "draft", "text": "v2 notes"},
        {"node": "ship", "match": "yes", "text": "shipped v2"},
        {"node": "announce", "match": "shipped v2", "text": "announced"},
    ]


def asking_model() -> ScriptedModel:
    """The scripted model of :func:`asking_model_rules`."""
    return ScriptedModel(asking_model_rules())
