"""Checkpoints and writes larger than one mesh value: chunked on write, joined on read,
copied and deleted with their checkpoint, leaving nothing behind."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("langgraph.checkpoint.conformance")

from langgraph.checkpoint.conformance.test_utils import (
    generate_checkpoint,
    generate_config,
    generate_metadata,
)

from plait.langgraph import PlaitSaver
from plait.mesh import open_mesh

pytestmark = pytest.mark.anyio

LIMIT = 64 * 1024


async def test_values_over_the_mesh_limit_round_trip_in_chunks(mesh_url: str) -> None:
    big = os.urandom(5 * LIMIT // 2)  # random: msgpack cannot shrink it
    async with open_mesh(mesh_url, max_value_bytes=LIMIT) as mesh:
        saver = PlaitSaver(mesh)
        checkpoint = generate_checkpoint(channel_values={"doc": big, "small": "s"})
        stored = await saver.aput(
            generate_config("big"), checkpoint, generate_metadata(note=big.hex()[:100]), {}
        )
        await saver.aput_writes(stored, [("doc", big[::-1]), ("small", "w")], "task")
        chunks = [e.key async for e in mesh.scan("lg/bl/")]
        assert len(chunks) == 6  # three chunks each for the checkpoint and the write
        await saver.aput_writes(stored, [("doc", b"other"), ("small", "x")], "task")  # kept
        await saver.aput_writes(stored, [("doc", big), ("small", "y")], "task")  # kept
        assert [e.key async for e in mesh.scan("lg/bl/")] == chunks  # no chunks written

        got = await saver.aget_tuple(generate_config("big"))
        assert got is not None
        assert got.checkpoint["channel_values"] == {"doc": big, "small": "s"}
        assert got.pending_writes == [("task", "doc", big[::-1]), ("task", "small", "w")]
        listed = [t async for t in saver.alist(None, filter={"note": big.hex()[:100]})]
        assert [t.checkpoint["id"] for t in listed] == [checkpoint["id"]]

        await saver.acopy_thread("big", "copy")
        await saver.adelete_thread("big")
        copied = await saver.aget_tuple(generate_config("copy"))
        assert copied is not None
        assert copied.checkpoint["channel_values"]["doc"] == big
        assert copied.pending_writes == got.pending_writes

        await saver.adelete_thread("copy")
        assert [e.key async for e in mesh.scan("lg/")] == []
