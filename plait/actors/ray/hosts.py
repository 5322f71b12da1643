"""Hosts: Ray actors (restarted by Ray) each serving the mesh with a :class:`HostRuntime`."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
from collections.abc import Mapping
from typing import Any

from plait.actors.local import tune_gc_for_serving
from plait.actors.ray.guards import require_ray
from plait.actors.ray.host_runtime import HostRuntime, HostSpec
from plait.actors.ray.placement import NAMESPACE, host_options
from plait.errors import ActorError
from plait.ids import new_id
from plait.mesh import open_mesh
from plait.telemetry import STATE, enable_metrics, metrics

log = logging.getLogger("plait.actors")


class HostActor:
    """A host: one :class:`HostRuntime` serving the mesh inside a Ray actor.

    It starts serving on construction, so Ray's restart of a killed host serves again
    with no call from anyone.

    Args:
        url: the mesh URL.
        spec: what to serve.
        host: its host id (None: ``ray:NAMESPACE/NAME:PID:RANDOM``, new each restart).
    """

    def __init__(self, url: str, spec: HostSpec, host: str | None = None) -> None:
        self.url = url
        self.spec = spec
        self.host = host or self._new_host_id()
        self.runtime: HostRuntime | None = None
        self.handled = 0
        """Messages handled by this incarnation's runtime (kept once it stopped)."""
        self.error: str | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._done = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.node = self._node_id()
        tune_gc_for_serving()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            # Older Ray builds an async actor outside its event loop: serve on a thread.
            threading.Thread(target=lambda: asyncio.run(self._serve()), daemon=True).start()
        else:
            self._task = loop.create_task(self._serve())

    @staticmethod
    def _new_host_id() -> str:
        try:
            ray = require_ray()
            context = ray.get_runtime_context()
            name = context.get_actor_name() or "host"
            namespace = context.namespace
        except Exception:  # not in a Ray actor (a test building one directly)
            name, namespace = "host", NAMESPACE
        return f"ray:{namespace}/{name}:{os.getpid()}:{new_id()}"

    @staticmethod
    def _node_id() -> str | None:
        try:
            return str(require_ray().get_runtime_context().get_node_id())
        except Exception:  # not in a Ray actor
            return None

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        started = False
        try:
            async with open_mesh(self.url) as mesh, self.spec.serve(mesh, self.host) as runtime:
                runtime.mesh_url = self.url
                self.runtime = runtime
                started = True
                self._ready.set()
                await self._stop.wait()
        except BaseException as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            if started and not (self._stop is not None and self._stop.is_set()):
                # Serving broke under us: let Ray restart this host afresh.
                log.error(
                    "host %s stopped serving: %s; restarting", self.host, self.error, exc_info=exc
                )
                os._exit(1)
            raise
        finally:
            if self.runtime is not None:
                self.handled = self.runtime.handled
            self.runtime = None
            self._ready.set()
            self._done.set()

    async def ready(self, timeout_s: float = 60.0) -> dict[str, Any]:
        """This host's :meth:`info` once it serves.

        Raises:
            ActorError: it could not start serving.
        """
        await asyncio.to_thread(self._ready.wait, timeout_s)
        if self.runtime is None:
            raise ActorError(f"host {self.host} did not start serving: {self.error}")
        return self.info()

    def started_with(self) -> tuple[str, HostSpec]:
        """The mesh URL and spec it serves (a new host of the set copies them)."""
        return self.url, self.spec

    def info(self) -> dict[str, Any]:
        """Its host id, pid, Ray node, the partitions it serves, dedicated actors, handled count."""
        runtime = self.runtime
        return {
            "host": self.host,
            "pid": os.getpid(),
            "node": self.node,
            "serving": sorted(runtime.serving) if runtime else [],
            "dedicated": runtime.dedicated if runtime else [],
            "handled": runtime.handled if runtime else self.handled,
            "error": self.error,
        }

    def metrics_text(self) -> str:
        """This host's Prometheus metrics (:mod:`plait.telemetry.metrics`) as text.

        The first call turns counting on in this host's process, so a host counts from
        its first scrape on (a restarted host, from the next scrape after its restart):
        a host nobody scrapes does no metrics work.
        """
        if not STATE.metrics:
            enable_metrics()
            metrics.track_in_flight(lambda: self.runtime.in_flight if self.runtime else 0)
        runtime = self.runtime
        if runtime is not None and not isinstance(runtime.on_change, metrics.LeaseTally):
            tally = metrics.LeaseTally()
            if runtime.keeper is not None:
                tally(runtime.serving, runtime.keeper.count)
            runtime.on_change = tally
        return metrics.render().decode()

    async def wait_idle(self) -> None:
        """Wait until no message this host took is in flight."""
        runtime = self.runtime
        if runtime is not None and self._loop is asyncio.get_running_loop():
            await runtime.wait_idle()
        elif runtime is not None and self._loop is not None:
            future = asyncio.run_coroutine_threadsafe(runtime.wait_idle(), self._loop)
            await asyncio.wrap_future(future)

    async def drain(self) -> dict[str, Any]:
        """Stop serving: drain its messages in flight and release its leases; its info."""
        if self._stop is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        await asyncio.to_thread(self._done.wait)
        return self.info()


def start_host(
    url: str,
    spec: HostSpec,
    *,
    name: str | None = None,
    namespace: str = NAMESPACE,
    detached: bool = False,
    host: str | None = None,
    resources: Mapping[str, Any] | None = None,
    node: str | None = None,
) -> Any:
    """Start a host (on ``node`` if it can, see :func:`spread_nodes`), or, named, adopt
    the one already running by that name; its handle."""
    options = host_options(
        name=name, namespace=namespace, detached=detached, resources=resources, node=node
    )
    return _host_class().options(**options).remote(url, spec, host)


@functools.cache
def _host_class() -> Any:
    """:class:`HostActor` as a Ray actor class (made once per process, not per host)."""
    return require_ray().remote(HostActor)


__all__ = ["HostActor", "start_host"]
