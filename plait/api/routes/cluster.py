"""``/api/cluster``: who serves the mesh: the processes serving runs (heartbeats), the
partitions each holds, and each partition's mailbox backlog."""

from __future__ import annotations

from fastapi import APIRouter

from plait.actors import MAILBOX_GROUP
from plait.actors.leases import read_leases, read_members
from plait.actors.partitions import load_partitions, mailbox_topic
from plait.api.deps import PrincipalDep, ServicesDep
from plait.api.problems import problem_responses
from plait.api.views import ClusterView, HeartbeatRow, MemberRow
from plait.runs.heartbeats import live_heartbeats

router = APIRouter(prefix="/api/cluster", tags=["cluster"], responses=problem_responses(401))


@router.get("", summary="The processes serving the mesh and the partitions they hold")
async def cluster(svc: ServicesDep, who: PrincipalDep) -> ClusterView:
    """Serving processes, the partitions each holds, the partitions no live process
    holds, and the mailbox messages not yet acked in each partition."""
    mesh = svc.mesh
    count = await load_partitions(mesh)
    now = await mesh.now_ms()  # expiries are the mesh's time, not this host's
    members = await read_members(mesh, now)
    leases = await read_leases(mesh)
    backlog = [await mesh.backlog(mailbox_topic(n), MAILBOX_GROUP) for n in range(count)]
    beats = await live_heartbeats(mesh)
    held: dict[str, list[int]] = {}
    for n, (lease, _) in sorted(leases.items()):
        if lease.holder is not None and lease.expires_ms > now:
            held.setdefault(lease.holder, []).append(n)
    taken = {n for partitions in held.values() for n in partitions}
    return ClusterView(
        served=any(beat.serves == "all" for beat in beats),
        partitions=count,
        members=[
            MemberRow(
                host=m.host,
                pid=m.pid,
                serves=m.serves,
                held=held.get(m.host, []),
                in_flight=m.in_flight,
            )
            for m in sorted(members, key=lambda m: m.host)
        ],
        heartbeats=[
            HeartbeatRow(
                host=b.host,
                pid=b.pid,
                serves=b.serves,
                run_id=b.run_id,
                started=b.started,
                beat=b.beat,
                tools=len(b.tools),
            )
            for b in sorted(beats, key=lambda b: b.host)
        ],
        unheld=[n for n in range(count) if n not in taken],
        backlog=backlog,
    )
