"""The runtime a Ray host runs, and what a host serves (:class:`HostSpec`).

:class:`HostRuntime` is a :class:`~plait.actors.LeasedRuntime` that hands actors with
``resources`` to dedicated Ray actors (:mod:`plait.actors.ray.dedicated`).
:class:`RuntimeSpec` serves actors with given handlers and services (what
:class:`~plait.actors.ray.RayRuntime` hands its hosts); the run layer's spec
(:mod:`plait.cluster`) serves runs, building its owner services inside the host.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import anyio

from plait.actors._base import (
    DEFAULT_MAX_ATTEMPTS,
    MAILBOX_VISIBILITY_TIMEOUT_MS,
    Accepts,
    ActorContext,
    Handler,
    Mail,
    resolve_dead_letter_hook,
)
from plait.actors.directory import ActorRecord
from plait.actors.leased import LeasedRuntime
from plait.actors.leases import DEFAULT_LEASE_S
from plait.actors.local import _Activation
from plait.actors.ray.dedicated import DEDICATED_IDLE_S, Dedicated, dedicated_class
from plait.actors.ray.guards import require_ray
from plait.actors.ray.placement import split_resources
from plait.mesh import Mesh

log = logging.getLogger("plait.actors")


class HostSpec(Protocol):
    """What a host serves: picklable, so Ray can hand it to a host (and its restarts)."""

    def serve(self, mesh: Mesh, host: str) -> contextlib.AbstractAsyncContextManager[Any]:
        """Serve ``mesh`` as ``host`` for the block; yields the :class:`HostRuntime`."""
        ...


@dataclass(frozen=True)
class RuntimeSpec:
    """Serve actors with these handlers and services (what :class:`RayRuntime` hosts run).

    Attributes mirror :class:`HostRuntime`'s options.
    """

    handlers: Mapping[str, Handler] | None = None
    services: object | None = None
    accepts: Accepts | None = None
    visibility_timeout_ms: int = MAILBOX_VISIBILITY_TIMEOUT_MS
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    drain_timeout_s: float = 30.0
    lease_s: float = DEFAULT_LEASE_S
    partitions: int | None = None
    dedicated_idle_s: float = DEDICATED_IDLE_S

    @contextlib.asynccontextmanager
    async def serve(self, mesh: Mesh, host: str) -> AsyncIterator[HostRuntime]:
        """Serve ``mesh`` as ``host`` with a :class:`HostRuntime` for the block."""
        runtime = HostRuntime(
            mesh,
            host=host,
            handlers=self.handlers,
            services=self.services,
            accepts=self.accepts,
            visibility_timeout_ms=self.visibility_timeout_ms,
            max_attempts=self.max_attempts,
            drain_timeout_s=self.drain_timeout_s,
            lease_s=self.lease_s,
            partitions=self.partitions,
            dedicated_idle_s=self.dedicated_idle_s,
            dedicated_services=self.services,
        )
        async with runtime:
            yield runtime


class _Forward:
    """The handler a host runs for an actor with ``resources``: its dedicated actor's."""

    def __init__(self, runtime: HostRuntime, record: ActorRecord, handler: Handler) -> None:
        self.runtime = runtime
        self.record = record
        self.handler = handler
        kind = record.kind
        from_module = kind not in runtime._handlers
        # The dead-letter hook runs in the host: a message that failed its attempts
        # needs no resources to be written off.
        self.on_dead_letter = resolve_dead_letter_hook(kind, handler, from_module=from_module)

    async def __call__(self, ctx: ActorContext, mail: Mail) -> None:
        await self.runtime._forward(self.record, self.handler, mail)


class HostRuntime(LeasedRuntime):
    """The leased runtime a host runs: hands actors with ``resources`` to dedicated actors.

    Args:
        mesh: the mesh.
        dedicated_idle_s: how long a dedicated actor lives without mail.
        dedicated_services: the services a dedicated actor's handler gets (it runs in
            another process: they must pickle; None by default).
        **options: as for :class:`~plait.actors.LeasedRuntime`.
    """

    def __init__(
        self,
        mesh: Mesh,
        *,
        dedicated_idle_s: float = DEDICATED_IDLE_S,
        dedicated_services: object | None = None,
        **options: Any,
    ) -> None:
        super().__init__(mesh, **options)
        self.dedicated_idle_s = dedicated_idle_s
        self.dedicated_services = dedicated_services
        self.mesh_url = mesh.url
        """The URL a dedicated actor opens the mesh with (its host sets the unmasked one)."""
        self._dedicated: dict[str, Dedicated] = {}

    @property
    def dedicated(self) -> list[str]:
        """The actors that have a dedicated Ray actor right now."""
        return sorted(self._dedicated)

    async def start(self) -> None:
        """Serve as a leased runtime, and release dedicated actors once idle."""
        await super().start()
        assert self._tg is not None
        self._tg.start_soon(self._release_idle)

    async def close(self) -> None:
        """Drain as a leased runtime does, then release every dedicated actor."""
        await super().close()
        for actor_id in list(self._dedicated):
            self._release(actor_id)

    async def _activate(self, actor_id: str) -> _Activation | None:
        activation = await super()._activate(actor_id)
        resources = activation.record.config.get("resources") if activation else None
        if activation is not None and resources and not isinstance(activation.handler, _Forward):
            activation.handler = _Forward(self, activation.record, activation.handler)
        return activation

    def _dedicated_for(self, record: ActorRecord, handler: Handler) -> Dedicated:
        found = self._dedicated.get(record.id)
        if found is not None:
            return found
        options = split_resources(record.config["resources"])
        options.setdefault("num_cpus", 0)
        named = dedicated_class().options(name=f"dedicated:{record.id}@{self.host}", **options)
        handle = named.remote(
            self.mesh_url, handler, self.dedicated_services, f"{self.host}/{record.id}"
        )
        found = self._dedicated[record.id] = Dedicated(handle)
        log.info("actor %s: dedicated Ray actor with %s", record.id, options)
        return found

    async def _forward(self, record: ActorRecord, handler: Handler, mail: Mail) -> None:
        dedicated = self._dedicated_for(record, handler)
        dedicated.running += 1
        try:
            fence = None if mail.fence is None else (mail.fence.key, mail.fence.version)
            d = mail.delivery
            event = (d.event.id, d.event.topic, d.event.kind, d.event.data, d.event.at_ms)
            shipped = (event, d.group, d.consumer, d.attempt, d.position)
            mail.acked = bool(
                await dedicated.handle.handle.remote(record, mail.body, shipped, fence)
            )
        finally:
            dedicated.running -= 1
            dedicated.last_used = time.monotonic()

    def _release(self, actor_id: str) -> None:
        dedicated = self._dedicated.pop(actor_id, None)
        if dedicated is not None:
            require_ray().kill(dedicated.handle)
            log.info("actor %s: dedicated Ray actor released", actor_id)

    async def _release_idle(self) -> None:
        period = max(0.05, min(self.dedicated_idle_s / 4, 5.0))
        while True:
            await anyio.sleep(period)
            cutoff = time.monotonic() - self.dedicated_idle_s
            for actor_id, dedicated in list(self._dedicated.items()):
                if not dedicated.running and dedicated.last_used < cutoff:
                    self._release(actor_id)


__all__ = ["HostRuntime", "HostSpec", "RuntimeSpec"]
