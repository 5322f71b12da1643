"""Graphs the builder tests run, written in Python at module level (importable by path).

``CALLS`` records which function nodes ran, by the run's input, so a test can tell a
node that ran once from one that ran again after a restart. An input in ``HELD`` makes
each function node wait on every fresh attempt until its host is stopped: the test sees
it entered and restarts there, so the node runs again on the next host. Each test uses
its own input, so tests running side by side never share an entry.
"""

from __future__ import annotations

from typing import Any, Literal

import anyio
from pydantic import BaseModel

import plait
from plait.programs import MeshCapability

CALLS: dict[str, list[str]] = {}
HELD: set[str] = set()  # inputs whose nodes wait for a restart on each fresh attempt


async def entered(input: str, node: str) -> None:
    """Record that ``node`` ran for ``input``; if held, wait unless this attempt retries
    the one just cut off (the same node entered last)."""
    calls = CALLS.setdefault(input, [])
    again = bool(calls) and calls[-1] == node
    calls.append(node)
    if input in HELD and not again:
        await anyio.Event().wait()  # never set: the host stopping cancels this attempt


class Fetched(BaseModel):
    """What ``fetch`` returns."""

    version: str
    files: int


release = plait.Graph("py-release", budget=20, description="fetch, check, sign off, release")


@release.node(next="check", on_indeterminate="retry")
async def fetch(input: str) -> Fetched:
    """Fetches the release: a name ending in ``-small`` has too few files."""
    await entered(input, "fetch")
    return Fetched(version=input, files=1 if input.endswith("-small") else 3)


@release.node(on_indeterminate="retry")
async def check(input: str, fetch: Fetched, fix: dict[str, Any] | None = None) -> dict[str, Any]:
    """Passes with two files or more, counting those ``fix`` added."""
    await entered(input, "check")
    files = fetch.files + (fix["added"] if fix else 0)
    return {"ok": files >= 2, "files": files}


def after_check(check: dict[str, Any]) -> Literal["approve", "fix"]:
    """Sign-off once the check passes, else a fix."""
    return "approve" if check["ok"] else "fix"


release.route(check, after_check)


@release.node(next=check, on_indeterminate="retry")
async def fix(input: str) -> dict[str, Any]:
    """Adds the missing files."""
    await entered(input, "fix")
    return {"added": 2}


release.human("approve", "Release {{fetch.version}} with {{check.files}} files?", next="ship")


@release.node(id="ship", on_indeterminate="retry")
async def ship_it(input: str, approve: str, mesh: MeshCapability) -> dict[str, Any]:
    """Records the release once: a repeat finds the record and returns it."""
    await entered(input, "ship")
    key = f"releases/{input}"
    found = await mesh.get(key)
    if found is not None:
        return dict(found["value"])
    value = {"version": input, "approved": approve}
    await mesh.put(key, value, if_version=0)
    return value
