"""Graphs the builder tests run, written in Python at module level (importable by path).

``CALLS`` records which function nodes ran, by the run's input, so a test can tell a
node that ran once from one that ran again after a restart. Each test uses its own
input, so tests running side by side never share an entry.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

import plait
from plait.programs import MeshCapability

CALLS: dict[str, list[str]] = {}


class Fetched(BaseModel):
    """What ``fetch`` returns."""

    version: str
    files: int


release = plait.Graph("py-release", budget=20, description="fetch, check, sign off, release")


@release.node(next="check")
async def fetch(input: str) -> Fetched:
    """Fetches the release: a name ending in ``-small`` has too few files."""
    CALLS.setdefault(input, []).append("fetch")
    return Fetched(version=input, files=1 if input.endswith("-small") else 3)


@release.node
async def check(input: str, fetch: Fetched, fix: dict[str, Any] | None = None) -> dict[str, Any]:
    """Passes with two files or more, counting those ``fix`` added."""
    CALLS.setdefault(input, []).append("check")
    files = fetch.files + (fix["added"] if fix else 0)
    return {"ok": files >= 2, "files": files}


def after_check(check: dict[str, Any]) -> Literal["approve", "fix"]:
    """Sign-off once the check passes, else a fix."""
    return "approve" if check["ok"] else "fix"


release.route(check, after_check)


@release.node(next=check)
async def fix(input: str) -> dict[str, Any]:
    """Adds the missing files."""
    CALLS.setdefault(input, []).append("fix")
    return {"added": 2}


release.human("approve", "Release {{fetch.version}} with {{check.files}} files?", next="ship")


@release.node(id="ship", on_indeterminate="retry")
async def ship_it(input: str, approve: str, mesh: MeshCapability) -> dict[str, Any]:
    """Records the release once: a repeat finds the record and returns it."""
    CALLS.setdefault(input, []).append("ship")
    key = f"releases/{input}"
    found = await mesh.get(key)
    if found is not None:
        return dict(found["value"])
    value = {"version": input, "approved": approve}
    await mesh.put(key, value, if_version=0)
    return value
