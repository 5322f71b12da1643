"""Serialized values larger than one mesh value: split into chunk keys, joined on read.

A value LangGraph serialized is ``(type, bytes)``. Stored inline it is ``[type, bytes]``;
when the bytes would pass the mesh's ``max_value_bytes`` it is ``[type, None, token,
count]`` and its bytes live at ``BASE/TOKEN/0 .. BASE/TOKEN/count-1``, written in the
same transaction as the entry that names them. ``token`` is fresh per write, so a value
written again never mixes its chunks with an older one's (a value written only once may
name its own token); the chunks sit under their checkpoint's blob prefix and go when it
goes. A read fetches every chunk it needs in one multi-get.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from plait.ids import new_id
from plait.mesh import Mesh

MARGIN = 4096
"""Room left in an entry beside a value's bytes (its type, metadata, msgpack framing)."""


def split(
    mesh: Mesh, base: str, typed: tuple[str, bytes], token: str | None = None
) -> tuple[list[Any], dict[str, bytes]]:
    """The stored form of ``typed``, and the chunk keys (with their bytes) it needs.

    ``token`` names the chunks (default: a fresh id); a caller that writes a value once
    only (an insert-if-absent) passes one derived from the value's own key, so a
    repeated write names the chunks already stored instead of new ones.
    """
    kind, data = typed
    size = max(1024, mesh.max_value_bytes - MARGIN)
    if len(data) <= size:
        return [kind, data], {}
    token = token or new_id()
    chunks = {
        f"{base}/{token}/{i:06d}": data[start : start + size]
        for i, start in enumerate(range(0, len(data), size))
    }
    return [kind, None, token, len(chunks)], chunks


def chunk_keys(base: str, stored: list[Any]) -> list[str]:
    """The keys of the chunks a stored form names (none if its bytes are inline)."""
    if stored[1] is not None:
        return []
    _kind, _none, token, count = stored
    return [f"{base}/{token}/{i:06d}" for i in range(count)]


async def join_all(mesh: Mesh, stored: Sequence[tuple[str, list[Any]]]) -> list[tuple[str, bytes]]:
    """The ``(type, bytes)`` of each ``(base, stored form)``, in order, reading every
    chunk they name in one multi-get (none if all are inline).

    Raises:
        LookupError: a chunk is missing (deleted under a reader).
    """
    wanted = [key for base, form in stored for key in chunk_keys(base, form)]
    found = dict(zip(wanted, await mesh.get_many(wanted), strict=True)) if wanted else {}
    joined: list[tuple[str, bytes]] = []
    for base, form in stored:
        if form[1] is not None:
            joined.append((form[0], form[1]))
            continue
        parts: list[bytes] = []
        for i, key in enumerate(chunk_keys(base, form)):
            entry = found[key]
            if entry is None:
                raise LookupError(f"chunk {i} of {base} is missing")
            parts.append(entry.value)
        joined.append((form[0], b"".join(parts)))
    return joined


async def join(mesh: Mesh, base: str, stored: list[Any]) -> tuple[str, bytes]:
    """The ``(type, bytes)`` one stored form holds (see :func:`join_all`)."""
    return (await join_all(mesh, [(base, stored)]))[0]
