"""``GET /metrics``: the Prometheus text of this process and of the mesh it serves.

Counters are this process's (see :mod:`plait.telemetry.metrics`); the gauges of the
mesh as a whole — runs by listed status, decisions open and the oldest one's age, each
mailbox partition's backlog — are
read when scraped, at most once per :data:`MESH_READ_S` (each read scans the run
listing and the decisions). The route needs no token: it shows counts only, never a
run id, a name a person typed or any content; put it behind the network's own fences.
"""

from __future__ import annotations

import time
from collections import Counter

from fastapi import FastAPI, Request
from fastapi.responses import Response

from plait.actors import MAILBOX_GROUP
from plait.actors.partitions import load_partitions, mailbox_topic
from plait.api.deps import services
from plait.telemetry import STATE, metrics

MESH_READ_S = 10.0
"""The least seconds between two reads of the mesh's gauges."""


def install_metrics(app: FastAPI) -> None:
    """Add ``GET /metrics`` to ``app`` and turn this process's metrics on."""
    STATE.metrics = True
    last = [0.0]

    @app.get("/metrics", include_in_schema=False)
    async def prometheus(request: Request) -> Response:
        now = time.monotonic()
        if now - last[0] >= MESH_READ_S:
            last[0] = now
            svc = await services(request)
            runs = Counter[str](str(summary.status) for summary in await svc.runs.list())
            open_ = await svc.desk.list("open")
            oldest = min((d.created_at for d in open_), default=None)
            count = await load_partitions(svc.mesh)
            metrics.set_mesh_gauges(
                dict(runs),
                len(open_),
                0.0 if oldest is None else max(0.0, time.time() - oldest),
                [await svc.mesh.backlog(mailbox_topic(n), MAILBOX_GROUP) for n in range(count)],
            )
        return Response(metrics.render(), media_type=metrics.CONTENT_TYPE)


__all__ = ["MESH_READ_S", "install_metrics"]
