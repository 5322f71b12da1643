"""``plait worker``: host the runtime and serve every run with pending work."""

from __future__ import annotations

import signal
from typing import Annotated

import anyio
import typer

from plait.actors import LocalRuntime, tune_gc_for_serving
from plait.cli._common import MeshOption, err_console, fail, run
from plait.errors import ConfigError
from plait.mesh import open_mesh
from plait.models import load_model
from plait.runs import RunHost


def worker_cmd(
    mesh: MeshOption = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            envvar="PLAIT_MODEL",
            show_default=False,
            help="Model for runs that name none (default: PLAIT_MODEL).",
        ),
    ] = None,
    visibility_timeout: Annotated[
        float,
        typer.Option(
            "--visibility-timeout",
            min=0.1,
            help="Seconds before a dead process's unacked work is taken over.",
        ),
    ] = 10.0,
    drain_timeout: Annotated[
        float,
        typer.Option(
            "--drain-timeout", min=0.0, help="Seconds to let work in flight finish on exit."
        ),
    ] = 30.0,
) -> None:
    """Serve every run on the mesh (a dead process's too) until SIGINT or SIGTERM.

    Exits 2 at once, with one line, if ``--model`` names a model that cannot work.
    """
    try:
        default_model = load_model(model) if model else None
    except ConfigError as exc:
        fail(str(exc), 2)

    async def main() -> None:
        tune_gc_for_serving()
        async with open_mesh(mesh) as m:
            runtime = LocalRuntime(
                m,
                visibility_timeout_ms=int(visibility_timeout * 1000),
                drain_timeout_s=drain_timeout,
            )
            RunHost(runtime, model=default_model)
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async with runtime:
                    err_console.print(f"worker {runtime.host} serving {m.url}", highlight=False)
                    async for signum in signals:
                        err_console.print(f"{signal.Signals(signum).name}: draining…")
                        break
            err_console.print(f"worker stopped after handling {runtime.handled} messages")

    run(main)
