"""The HTTP API: requests per second through ``plait serve`` against the Python API.

- ``api_list_runs``: ``GET /api/runs`` (a page of 50 of 200 runs) through httpx against
  a ``plait serve`` process on 127.0.0.1, beside :meth:`plait.runs.Runs.list` called in
  this process on the same mesh.
- ``api_answer_decision``: ``POST /api/decisions/{id}/answer`` against
  :meth:`plait.decisions.DecisionAnswerer.answer`, each answering a decision raised before
  the clock started.

Both on one SQLite mesh in a temporary directory; the server is its own process (the
command ``plait serve``), so the figure is what a client sees: HTTP, JSON, the token
check and the same service call. The ratio is API / Python.

Run: ``python bench/api.py [--json] [--seconds 1.0]``.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from _common import Figure, Measure, best_of, parse_args, rate, report

from plait.api.tokens import create_token
from plait.decisions import Agent, DecisionAnswerer, DecisionAsker, Human
from plait.graphs.loader import load_graph
from plait.graphs.store import import_graph
from plait.mesh import open_mesh
from plait.runs import Runs

BENCH = "api"
RUNS = 200
POOL = 2500  # decisions raised per side before measuring; more are raised if it runs dry
GRAPH = {
    "name": "bench",
    "agent": "assistant",
    "entry": "one",
    "nodes": [{"id": "one", "type": "agent", "prompt": "{{input}}"}],
}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def _serving(mesh_url: str, cwd: Path) -> Iterator[str]:
    """``plait serve`` on a free port; its base URL."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", "from plait.cli import main; main()", "serve",
         "--port", str(port), "--mesh", mesh_url],
        cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(url + "/openapi.json", timeout=1)
                break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"plait serve did not start (exit {proc.poll()})") from None
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def main(argv: list[str] | None = None) -> None:
    """Measure and print the figures."""
    args = parse_args(__doc__ or "", argv)
    with tempfile.TemporaryDirectory() as tmp:
        mesh_url = f"sqlite:///{Path(tmp) / 'mesh.db'}"
        async with open_mesh(mesh_url) as mesh:
            await import_graph(mesh, load_graph(GRAPH))
            runs, desk, board = Runs(mesh), DecisionAnswerer(mesh), DecisionAsker(mesh)
            for n in range(RUNS):
                await runs.start("assistant", "bench", str(n))
            _, token = await create_token(mesh, "human", "bench")
            asker, ana = Agent("bench"), Human("bench")
            pools: dict[str, list[str]] = {"api": [], "python": []}
            for side, pool in pools.items():
                for n in range(POOL):
                    pool.append((await board.raise_(f"{side} {n}?", by=asker)).id)

            async def next_decision(side: str) -> str:
                pool = pools[side]
                return pool.pop() if pool else (await board.raise_("more?", by=asker)).id

            with _serving(mesh_url, Path(tmp)) as url:
                async with httpx.AsyncClient(
                    base_url=url, headers={"Authorization": f"Bearer {token}"}
                ) as client:

                    async def api_list(_: int) -> None:
                        (await client.get("/api/runs")).raise_for_status()

                    async def py_list(_: int) -> None:
                        (await runs.list())[:50]

                    async def api_answer(_: int) -> None:
                        decision = await next_decision("api")
                        answered = await client.post(
                            f"/api/decisions/{decision}/answer", json={"option": "yes"}
                        )
                        answered.raise_for_status()

                    async def py_answer(_: int) -> None:
                        await desk.answer(await next_decision("python"), option="yes", by=ana)

                    def measure(op: Callable[[int], Awaitable[object]]) -> Measure:
                        return lambda seconds: rate(op, seconds)

                    listing = await best_of([measure(api_list), measure(py_list)], args.seconds)
                    answers = await best_of([measure(api_answer), measure(py_answer)], args.seconds)
    figures = [
        Figure(BENCH, "api_list_runs", listing[0], "req/s", listing[1], target=0.1,
               note=f"Runs.list() of {RUNS} runs in process"),
        Figure(BENCH, "api_answer_decision", answers[0], "req/s", answers[1], target=0.1,
               note="DecisionAnswerer.answer() in process"),
    ]  # fmt: skip
    report(figures, as_json=args.json, title="HTTP API")


if __name__ == "__main__":
    asyncio.run(main())
