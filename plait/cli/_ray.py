"""The Ray side of the CLI: ``plait worker --runtime ray`` and ``plait cluster scale``."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer

from plait.actors import ranges
from plait.actors.leases import read_leases, read_members
from plait.actors.partitions import load_partitions
from plait.actors.ray import NAMESPACE, ray_host_of, refuse_unshared, require_ray
from plait.cli._common import err_console, fail, run
from plait.cli._output import say
from plait.cluster import RunsSpec, drain, scale, started_with
from plait.cluster.metrics import hosts_registry, start_counting
from plait.errors import ConfigError
from plait.mesh import Mesh, open_mesh, redact_url
from plait.telemetry import metrics

AddressOption = Annotated[
    str | None,
    typer.Option(
        "--address",
        envvar="RAY_ADDRESS",
        show_default=False,
        help="The Ray cluster: auto, HOST:6379 or ray://HOST:10001 (default: RAY_ADDRESS, "
        "else a cluster running on this machine, else a new local one).",
    ),
]
NamespaceOption = Annotated[
    str, typer.Option("--namespace", help="The Ray namespace of the hosts.")
]


def connect(address: str | None, namespace: str) -> Any:
    """Connect to the Ray cluster as a driver in ``namespace``; the ``ray`` module.

    Exits 2 with how to install Ray if it is missing.
    """
    try:
        ray = require_ray()
    except ConfigError as exc:
        fail(str(exc), 2)
    if not ray.is_initialized():
        ray.init(address=address, namespace=namespace, log_to_driver=False)
    return ray


def refuse(url: str) -> None:
    """Exit 2 if ``url`` is a mesh Ray hosts cannot share."""
    try:
        refuse_unshared(url)
    except ConfigError as exc:
        fail(str(exc), 2)


async def holdings(mesh: Mesh, namespace: str) -> dict[str, tuple[str, list[int]]]:
    """What each live Ray host of ``namespace`` holds: by Ray name, its host id and
    partitions."""
    now = await mesh.now_ms()  # expiries are the mesh's time, not this host's
    members = await read_members(mesh, now)
    leases = await read_leases(mesh)
    found: dict[str, tuple[str, list[int]]] = {}
    for m in members:
        where = ray_host_of(m.host)
        if where is None or where[0] != namespace:
            continue
        held = [
            n
            for n, (lease, _) in sorted(leases.items())
            if lease.holder == m.host and lease.expires_ms > now
        ]
        found[where[1]] = (m.host, held)
    return found


def _line(name: str, host: str, held: list[int], count: int) -> str:
    return f"{name} {host} holding {len(held)} of {count} partitions: {ranges(held)}"


def ray_worker(
    url: str,
    spec: RunsSpec,
    *,
    hosts: int,
    namespace: str = NAMESPACE,
    address: str | None = None,
    keep: bool = False,
    metrics_port: int | None = None,
) -> None:
    """Start or adopt ``hosts`` Ray hosts serving runs on ``url``; show them and their
    partitions until SIGINT or SIGTERM, then drain them (``keep``: leave them serving).
    With ``metrics_port``, serve the hosts' metrics there (:mod:`plait.cluster.metrics`)."""
    refuse(url)
    ray = connect(address, namespace)
    if metrics_port is not None:
        try:
            metrics.serve_http(metrics_port, registry=hosts_registry(namespace))
        except OSError as exc:
            fail(f"--metrics-port {metrics_port}: {exc.strerror or exc}", 2)

    async def main() -> None:
        infos = await scale(url, spec, hosts, namespace=namespace)
        if metrics_port is not None:
            await start_counting(namespace)
        for info in infos:
            say(
                f"{info['name']} {info['host']} pid {info['pid']} serving {redact_url(url)}",
                stderr=True,
            )
        async with open_mesh(url) as mesh:
            count = await load_partitions(mesh, spec.partitions)
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_watch, mesh, namespace, count)
                    async for signum in signals:
                        name = signal.Signals(signum).name
                        err_console.print(
                            f"{name}: "
                            + ("leaving the hosts serving" if keep else "draining the hosts…")
                        )
                        break
                    tg.cancel_scope.cancel()
        if not keep:
            drained = await drain(namespace=namespace)
            err_console.print(f"drained {drained} host(s)")

    try:
        run(main)
    finally:
        ray.shutdown()


async def _watch(mesh: Mesh, namespace: str, count: int) -> None:
    """Print a host's partitions whenever they change (a host restarted, one joined)."""
    shown: dict[str, tuple[str, list[int]]] = {}
    while True:
        try:
            now = await holdings(mesh, namespace)
        except Exception as exc:  # the mesh away for a moment: the hosts carry on
            say(f"cannot read the cluster: {exc}", stderr=True)
        else:
            for name, (host, held) in sorted(now.items()):
                if shown.get(name) != (host, held):
                    say(_line(name, host, held, count), stderr=True)
            shown = now
        await anyio.sleep(0.5)


def ray_mesh(url: str) -> str:
    """For ``--runtime ray`` on a command: ``url`` once Ray is reachable (exits 2 for a
    mesh hosts cannot share, or without Ray); connects to ``RAY_ADDRESS`` or the
    cluster on this machine."""
    refuse(url)
    connect(None, NAMESPACE)
    return url


async def ensure_hosts(url: str, namespace: str = NAMESPACE) -> None:
    """Have Ray hosts serve ``url``: adopt those of ``namespace`` if they serve it, else
    start one (detached: it goes on serving after this command).

    Raises:
        ConfigError: the namespace's hosts serve another mesh.
    """
    found = await started_with(namespace)
    if found is not None:
        if redact_url(found[0]) != redact_url(url):
            raise ConfigError(
                f"the Ray hosts of namespace {namespace!r} serve {redact_url(found[0])}, "
                f"not {redact_url(url)}: start hosts for this mesh with `plait worker "
                "--runtime ray --namespace NS`"
            )
        return
    (info,) = await scale(url, RunsSpec(cwd=str(Path.cwd())), 1, namespace=namespace)
    say(f"started Ray host {info['name']} ({info['host']}) serving {redact_url(url)}", stderr=True)


def scale_hosts(
    url: str | None, count: int, *, namespace: str = NAMESPACE, address: str | None = None
) -> list[dict[str, Any]]:
    """``plait cluster scale``: make ``namespace`` hold ``count`` hosts; their info."""
    if url is not None:
        refuse(url)
    ray = connect(address, namespace)
    try:
        return run(lambda: scale(url, None, count, namespace=namespace))
    finally:
        ray.shutdown()


__all__ = [
    "AddressOption",
    "NamespaceOption",
    "connect",
    "ensure_hosts",
    "holdings",
    "ray_mesh",
    "ray_worker",
    "refuse",
    "scale_hosts",
]
