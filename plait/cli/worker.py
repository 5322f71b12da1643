"""``plait worker``: host the runtime and serve every run with pending work."""

from __future__ import annotations

import functools
import signal
from pathlib import Path
from typing import Annotated

import anyio
import typer

from plait.actors import DEFAULT_LEASE_S, LeasedRuntime, ranges, tune_gc_for_serving
from plait.agents import Agents
from plait.cli._common import MeshOption, fail, run
from plait.cli._output import say
from plait.cli._ray import AddressOption, NamespaceOption, ray_worker
from plait.cli._telemetry import OtelOption, count_leases, observe
from plait.cli._worker_pool import (
    Pool,
    bind_to_parent,
    child_args,
    child_argv,
    default_processes,
)
from plait.cluster import RunsSpec
from plait.cluster.kinds import SERVING_KINDS
from plait.errors import ConfigError
from plait.mcp import offered_tools
from plait.mesh import open_mesh
from plait.models import load_model
from plait.programs import DEFAULT_CATALOG
from plait.runs import serve
from plait.telemetry import metrics
from plait.tools import serving_registry


def worker_cmd(
    ctx: typer.Context,
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
    lease_s: Annotated[
        float,
        typer.Option(
            "--lease-s",
            min=0.2,
            help="Seconds a partition lease lasts unrenewed: the takeover time after a crash.",
        ),
    ] = DEFAULT_LEASE_S,
    partitions: Annotated[
        int | None,
        typer.Option(
            "--partitions",
            min=1,
            show_default=False,
            help="Mailbox partitions of a new mesh (default 64; fixed once a mesh is used).",
        ),
    ] = None,
    tools: Annotated[
        str | None,
        typer.Option(
            "--tools",
            envvar="PLAIT_TOOLS",
            show_default=False,
            help="Python tools to offer besides the built-in ones: pkg.module[:NAME], "
            "comma-separated, each a module-level ToolRegistry or a function returning "
            "one (default: PLAIT_TOOLS).",
        ),
    ] = None,
    runtime_name: Annotated[
        str,
        typer.Option(
            "--runtime",
            envvar="PLAIT_RUNTIME",
            help="local: serve in this process; ray: in Ray hosts on a Ray cluster.",
        ),
    ] = "local",
    address: AddressOption = None,
    hosts: Annotated[
        int, typer.Option("--hosts", min=1, help="With --runtime ray: how many hosts.")
    ] = 1,
    namespace: NamespaceOption = "plait",
    keep: Annotated[
        bool,
        typer.Option("--keep", help="With --runtime ray: leave the hosts serving on exit."),
    ] = False,
    otel: OtelOption = False,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            "--metrics-port",
            min=0,
            max=65535,
            show_default=False,
            help="Serve Prometheus metrics at http://0.0.0.0:PORT/metrics.",
        ),
    ] = None,
    processes: Annotated[
        int | None,
        typer.Option(
            "--processes",
            min=1,
            envvar="PLAIT_WORKER_PROCESSES",
            show_default=False,
            help="Serving processes, sharing the partitions (default: the machine's cores; "
            "with --metrics-port, process i serves PORT+i). --runtime local only.",
        ),
    ] = None,
) -> None:
    """Serve every run on the mesh (a dead process's too) until SIGINT or SIGTERM.

    Exits 2 at once, with one line, if ``--model`` names a model that cannot work. A run
    whose graph names a tool this worker does not offer is left for one that does. With
    ``--processes N`` (N > 1; the default on a machine of N cores) N processes serve
    under this one, which restarts any that dies and drains them all on a signal. With
    ``--runtime ray`` the runs are served by ``--hosts`` Ray hosts (started, or adopted
    if running), which this command shows and, on exit, drains.
    """
    if runtime_name not in ("local", "ray"):
        fail(f"--runtime must be local or ray, not {runtime_name!r}", 2)
    try:
        default_model = load_model(model) if model else None
    except ConfigError as exc:
        fail(str(exc), 2)
    refs = tuple(r.strip() for r in (tools or "").split(",") if r.strip())
    if runtime_name == "local":
        count = processes or default_processes()
        if count > 1:
            argv = child_argv(child_args(ctx), metrics_port)
            raise typer.Exit(Pool(count, argv, _say).run())
        bind_to_parent()
    elif processes not in (None, 1):
        fail("--processes is for --runtime local; Ray hosts are counted by --hosts", 2)
    # Under Ray the runs are counted in the hosts: the port serves theirs (see below).
    observe(otel=otel, metrics_port=metrics_port if runtime_name == "local" else None)
    if runtime_name == "ray":
        assert mesh is not None
        spec = RunsSpec(
            tools=refs,
            model=model,
            cwd=str(Path.cwd()),
            lease_s=lease_s,
            partitions=partitions,
            visibility_timeout_ms=int(visibility_timeout * 1000),
            drain_timeout_s=drain_timeout,
        )
        ray_worker(
            mesh, spec, hosts=hosts, namespace=namespace, address=address, keep=keep,
            metrics_port=metrics_port,
        )  # fmt: skip
        return

    async def main() -> None:
        registry = serving_registry(refs)
        tune_gc_for_serving()
        async with open_mesh(mesh) as m, offered_tools(m, registry):

            def held(serving: set[int], count: int) -> None:
                count_leases(serving, count)
                say(f"holding {len(serving)} of {count} partitions: {ranges(serving)}", stderr=True)

            leased = functools.partial(
                LeasedRuntime, lease_s=lease_s, partitions=partitions, on_change=held
            )
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async with serve(
                    m,
                    runtime=leased,
                    model=default_model,
                    tools=registry,
                    visibility_timeout_ms=int(visibility_timeout * 1000),
                    drain_timeout_s=drain_timeout,
                    agents=Agents,
                    programs=DEFAULT_CATALOG,
                    kinds=SERVING_KINDS,
                ) as serving:
                    runtime = serving.runtime
                    metrics.track_in_flight(lambda: runtime.in_flight)
                    # one line however long, as the terminal wraps it: never cut when piped
                    say(
                        f"worker {runtime.host} serving {m.url} with tools "
                        + ", ".join(registry.names()),
                        stderr=True,
                    )
                    async for signum in signals:
                        say(f"{signal.Signals(signum).name}: draining…", stderr=True)
                        break
            say(f"worker stopped after handling {runtime.handled} messages", stderr=True)

    run(main)


def _say(text: str) -> None:
    say(text, stderr=True)
