"""Serialized values larger than one mesh value: split into chunk keys, joined on read.

A value LangGraph serialized is ``(type, bytes)``. Stored inline it is ``[type, bytes]``;
when the bytes would pass the mesh's ``max_value_bytes`` it is ``[type, None, token,
count]`` and its bytes live at ``BASE/TOKEN/0 .. BASE/TOKEN/count-1``, written in the
same transaction as the entry that names them. ``token`` is fresh per write, so a value
written again never mixes its chunks with an older one's; the chunks sit under their
checkpoint's blob prefix and go when it goes.
"""

from __future__ import annotations

from typing import Any

from plait.ids import new_id
from plait.mesh import Mesh

MARGIN = 4096
"""Room left in an entry beside a value's bytes (its type, metadata, msgpack framing)."""


def split(mesh: Mesh, base: str, typed: tuple[str, bytes]) -> tuple[list[Any], dict[str, bytes]]:
    """The stored form of ``typed``, and the chunk keys (with their bytes) it needs."""
    kind, data = typed
    size = max(1024, mesh.max_value_bytes - MARGIN)
    if len(data) <= size:
        return [kind, data], {}
    token = new_id()
    chunks = {
        f"{base}/{token}/{i:06d}": data[start : start + size]
        for i, start in enumerate(range(0, len(data), size))
    }
    return [kind, None, token, len(chunks)], chunks


async def join(mesh: Mesh, base: str, stored: list[Any]) -> tuple[str, bytes]:
    """The ``(type, bytes)`` a stored form holds, reading its chunks if it has some.

    One read per chunk; a multi-get of the mesh makes this one call.

    Raises:
        LookupError: a chunk is missing (deleted under a reader).
    """
    if stored[1] is not None:
        return stored[0], stored[1]
    kind, _none, token, count = stored
    parts: list[bytes] = []
    for i in range(count):
        entry = await mesh.get(f"{base}/{token}/{i:06d}")
        if entry is None:
            raise LookupError(f"chunk {i} of {base} is missing")
        parts.append(entry.value)
    return kind, b"".join(parts)
