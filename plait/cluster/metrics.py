"""The Prometheus metrics of a namespace's Ray hosts, gathered where an operator scrapes.

Runs served by Ray hosts are counted in the hosts' processes, which no Prometheus knows
of (a host moves, restarts and changes its pid). So the process that started them,
``plait worker --runtime ray --metrics-port PORT``, serves them all: each scrape asks
every host of the namespace over Ray for its metrics text
(:meth:`~plait.actors.ray.HostActor.metrics_text`, whose first call turns counting on
in that host) and serves their samples with a ``host`` label, the host's Ray name
(``host-0``: a few per cluster, the same across restarts). ``plait_host_up{host}`` says
which hosts answered in time; a counter of a restarted host starts again from zero,
which Prometheus's ``rate`` takes as the reset it is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from plait.actors.ray import NAMESPACE, require_ray
from plait.cluster import host_names

HOST_LABEL = "host"
"""The label naming the Ray host a sample came from."""

SCRAPE_TIMEOUT_S = 5.0
"""How long a scrape waits for the hosts' answers; a host slower than that is down."""


class HostsCollector(Collector):
    """A Prometheus collector of the metrics of every Ray host in ``namespace``.

    Args:
        namespace: the hosts' Ray namespace.
        timeout_s: how long a scrape waits for the hosts.
    """

    def __init__(self, namespace: str = NAMESPACE, timeout_s: float = SCRAPE_TIMEOUT_S) -> None:
        self.namespace = namespace
        self.timeout_s = timeout_s

    def collect(self) -> Iterator[Metric]:
        """The hosts' samples, each family once with a ``host`` label on its samples."""
        texts, names = self._texts()
        up = GaugeMetricFamily(
            "plait_host_up", "Whether a Ray host answered the last scrape.", labels=[HOST_LABEL]
        )
        for name in names:
            up.add_metric([name], 1.0 if name in texts else 0.0)
        yield up
        yield from merged(texts).values()

    def _texts(self) -> tuple[dict[str, str], list[str]]:
        """The metrics text of each host that answered in time, and every host's name."""
        ray = require_ray()
        names = host_names(self.namespace)
        asked: dict[str, Any] = {}
        for name in names:
            try:
                handle = ray.get_actor(name, namespace=self.namespace)
            except ValueError:
                continue  # drained since it was listed
            asked[name] = handle.metrics_text.remote()
        if not asked:
            return {}, names
        ready, _ = ray.wait(list(asked.values()), num_returns=len(asked), timeout=self.timeout_s)
        texts: dict[str, str] = {}
        for name, ref in asked.items():
            if ref in ready:
                try:
                    texts[name] = ray.get(ref)
                except ray.exceptions.RayError:
                    pass  # died or restarting: down for this scrape
        return texts, names


def merged(texts: dict[str, str]) -> dict[str, Metric]:
    """The families in the Prometheus ``texts`` of each host, by name, each sample
    labelled with its host."""
    families: dict[str, Metric] = {}
    for host, text in texts.items():
        for family in text_string_to_metric_families(text):
            into = families.get(family.name)
            if into is None:
                into = families[family.name] = Metric(
                    family.name, family.documentation, family.type, family.unit
                )
            into.samples.extend(
                sample._replace(labels={**sample.labels, HOST_LABEL: host})
                for sample in family.samples
            )
    return families


async def start_counting(namespace: str = NAMESPACE) -> None:
    """Turn counting on in every host of ``namespace`` now, so the runs they serve
    before the first scrape are counted too."""
    await asyncio.to_thread(lambda: HostsCollector(namespace)._texts())


def hosts_registry(namespace: str = NAMESPACE) -> CollectorRegistry:
    """A registry of the metrics of the Ray hosts in ``namespace`` (to serve with
    :func:`plait.telemetry.metrics.serve_http`)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(HostsCollector(namespace))
    return registry


__all__ = [
    "HOST_LABEL",
    "SCRAPE_TIMEOUT_S",
    "HostsCollector",
    "hosts_registry",
    "merged",
    "start_counting",
]
