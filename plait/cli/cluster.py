"""``plait cluster status``: the processes serving a mesh and the partitions they lease;
``plait cluster scale``: how many Ray hosts serve it."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from plait.actors import MAILBOX_GROUP, ranges
from plait.actors.leases import read_leases, read_members
from plait.actors.partitions import load_partitions, mailbox_topic
from plait.actors.ray import ray_host_of
from plait.cli._common import MeshOption, err_console, existing_mesh, print_json, run
from plait.cli._output import say
from plait.cli._ray import AddressOption, NamespaceOption, scale_hosts
from plait.mesh import open_mesh

cluster_app = typer.Typer(help="The processes serving a mesh.", no_args_is_help=True)


async def cluster_status(url: str) -> dict[str, Any]:
    """What ``plait cluster status`` shows: members, each partition's holder, and each
    partition's backlog (mailbox messages the serving runtimes have not acked)."""
    async with open_mesh(url) as mesh:
        count = await load_partitions(mesh)
        now = await mesh.now_ms()  # expiries are the mesh's time, not this host's
        members = await read_members(mesh, now)
        leases = await read_leases(mesh)
        backlog = [await mesh.backlog(mailbox_topic(n), MAILBOX_GROUP) for n in range(count)]
    held: dict[str, list[int]] = {}
    for n, (lease, _) in sorted(leases.items()):
        if lease.holder is not None and lease.expires_ms > now:
            held.setdefault(lease.holder, []).append(n)
    return {
        "partitions": count,
        "members": [
            {
                "host": m.host,
                "runtime": "local" if ray_host_of(m.host) is None else "ray",
                "ray": _ray_name(m.host),
                "pid": m.pid,
                "serves": m.serves,
                "held": held.get(m.host, []),
                "in_flight": m.in_flight,
            }
            for m in sorted(members, key=lambda m: m.host)
        ],
        "unheld": [n for n in range(count) if not any(n in h for h in held.values())],
        "backlog": backlog,
    }


def _ray_name(host: str) -> str | None:
    where = ray_host_of(host)
    return None if where is None else f"{where[0]}/{where[1]}"


@cluster_app.command("status")
def status_cmd(
    mesh: MeshOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List serving processes, the partitions each holds, their messages in flight, and
    the backlog of each partition."""
    found = run(lambda: cluster_status(existing_mesh(mesh)))
    if as_json:
        print_json(found)
        return
    count = found["partitions"]
    for m in found["members"]:
        on = f"  ray {m['ray']}" if m["ray"] else ""
        say(
            f"{m['host']}{on}  pid {m['pid']}  serves {m['serves']}  holding {len(m['held'])} of "
            f"{count} partitions: {ranges(m['held'])}  in flight {m['in_flight']}"
        )
    if not found["members"]:
        say("no process is serving this mesh: start `plait worker`")
    if found["unheld"]:
        say(f"unheld partitions: {ranges(found['unheld'])}")
    waiting = [(n, b) for n, b in enumerate(found["backlog"]) if b]
    listed = ", ".join(f"{n}: {b}" for n, b in waiting) if waiting else "none"
    say(f"backlog {sum(found['backlog'])} message(s) by partition: {listed}")


@cluster_app.command("scale")
def scale_cmd(
    count: Annotated[int, typer.Argument(min=0, help="How many Ray hosts to run.")],
    mesh: Annotated[
        str | None,
        typer.Option(
            "--mesh",
            envvar="PLAIT_MESH",
            metavar="URL",
            show_default=False,
            help="The mesh new hosts serve (default: the one the running hosts serve).",
        ),
    ] = None,
    address: AddressOption = None,
    namespace: NamespaceOption = "plait",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Change how many Ray hosts serve the mesh, live: new ones copy a running host's
    settings, those over COUNT drain (finishing their messages in flight) and end."""
    found = scale_hosts(mesh, count, namespace=namespace, address=address)
    if as_json:
        print_json(found)
        return
    for info in found:
        say(f"{info['name']}  {info['host']}  pid {info['pid']}")
    err_console.print(f"{len(found)} host(s) serving in Ray namespace {namespace}", highlight=False)
