"""``plait serve``: the HTTP API and web console, optionally hosting runs too."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Annotated

import anyio
import typer

from plait.actors import LeasedRuntime, tune_gc_for_serving
from plait.agents import Agents
from plait.cli._common import MeshOption, fail, run
from plait.cli._foreground import env_tools
from plait.cli._output import say
from plait.cli._telemetry import OtelOption, observe
from plait.cluster.kinds import SERVING_KINDS
from plait.errors import ConfigError
from plait.mesh import Mesh, open_mesh, redact_url
from plait.models import load_model
from plait.programs import DEFAULT_CATALOG
from plait.runs import serve
from plait.telemetry import metrics
from plait.tools import ToolRegistry, serving_registry

MISSING = "plait serve needs the serve extra: pip install 'plait[serve]'"


@asynccontextmanager
async def _hosting(
    mesh: Mesh, registry: ToolRegistry, model: str | None
) -> AsyncIterator[LeasedRuntime]:
    """Serve every run on the mesh in this process, as ``plait worker`` does."""
    tune_gc_for_serving()
    default = load_model(model) if model else None
    async with serve(
        mesh,
        runtime=LeasedRuntime,
        model=default,
        tools=registry,
        agents=Agents,
        programs=DEFAULT_CATALOG,
        kinds=SERVING_KINDS,
    ) as s:
        runtime = s.runtime
        metrics.track_in_flight(lambda: runtime.in_flight)
        yield runtime


def serve_cmd(
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Port to listen on.")
    ] = 8700,
    serve_runs: Annotated[
        bool,
        typer.Option(
            "--serve-runs", help="Also serve every run on the mesh here, as `plait worker` does."
        ),
    ] = False,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            envvar="PLAIT_MODEL",
            show_default=False,
            help="With --serve-runs: the model for runs that name none (default: PLAIT_MODEL).",
        ),
    ] = None,
    mesh: MeshOption = None,
    otel: OtelOption = False,
) -> None:
    """Serve the HTTP API and the web console (at /) until SIGINT or SIGTERM.

    Every request needs a bearer token (`plait tokens create`). Runs started through the
    API are served by a worker, or by this process with --serve-runs.
    """
    try:
        import uvicorn

        from plait.api.app import create_app
    except ImportError:
        fail(MISSING, 2)
    observe(otel=otel, metrics_on=True)
    try:
        if model:
            load_model(model)
        registry = serving_registry(env_tools())
    except ConfigError as exc:
        fail(str(exc), 2)

    class Server(uvicorn.Server):
        # Signals are this command's to handle: it drains the runtime and closes the mesh.
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    async def main() -> None:
        async with open_mesh(mesh) as m:
            app = create_app(m, tools=registry)
            # httptools (in the serve extra) parses HTTP in C; uvicorn's pure-Python h11
            # cost ~100 us more per request. uvloop stays out: the mesh's loop batching
            # is measured on asyncio's own loop.
            config = uvicorn.Config(
                app,
                host=host,
                port=port,
                log_level="warning",
                lifespan="off",
                http="auto",
                loop="asyncio",
            )
            server = Server(config)
            async with contextlib.AsyncExitStack() as stack:
                serves = (
                    ", hosting no runs: runs wait for a `plait worker` "
                    "(or restart with --serve-runs)"
                )
                if serve_runs:
                    runtime = await stack.enter_async_context(_hosting(m, registry, model))
                    serves = f", serving its runs as {runtime.host}"
                failed: list[int] = []
                async with anyio.create_task_group() as tg:

                    async def listen() -> None:
                        try:
                            await server.serve()
                        except SystemExit as exc:  # uvicorn's way of saying it cannot bind
                            failed.append(int(exc.code or 1))
                        tg.cancel_scope.cancel()

                    async def announce() -> None:
                        # uvicorn says it has started with a flag only
                        while not server.started:  # noqa: ASYNC110
                            await anyio.sleep(0.02)
                        # one line however long, as the terminal wraps it: never cut when piped
                        say(
                            f"plait serve on http://{host}:{port}/ over {redact_url(m.url)}"
                            + serves,
                            stderr=True,
                        )

                    async def stop_on_signal() -> None:
                        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as sigs:
                            async for signum in sigs:
                                say(f"{signal.Signals(signum).name}: stopping…", stderr=True)
                                server.should_exit = True
                                return

                    tg.start_soon(listen)
                    tg.start_soon(announce)
                    tg.start_soon(stop_on_signal)
        if failed:
            fail(f"cannot listen on {host}:{port} (is the port taken?)")

    run(main)


__all__ = ["serve_cmd"]
