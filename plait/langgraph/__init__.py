"""LangGraph on a plait mesh: a checkpointer (:class:`PlaitSaver`) and a long-term
memory store (:class:`PlaitStore`), over any mesh URL (memory, SQLite, Redis).

Install with ``pip install 'plait[langgraph]'``. In async code, open the mesh and build
the saver on its loop::

    async with open_mesh("sqlite:///.plait/mesh.db") as mesh:
        graph = builder.compile(checkpointer=PlaitSaver(mesh))
        await graph.ainvoke(inputs, {"configurable": {"thread_id": "t1"}})

In sync code, :func:`open_saver` keeps the mesh on a loop thread of its own, so
``graph.invoke`` and ``graph.stream`` work as they do with LangGraph's own savers.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

try:
    import langgraph.checkpoint.base  # noqa: F401 -- only to say how to install it
except ImportError as exc:  # pragma: no cover -- the extra is installed in the tests
    raise ImportError("plait.langgraph needs LangGraph: pip install 'plait[langgraph]'") from exc

from plait.langgraph._bridge import LoopThread
from plait.langgraph.saver import PlaitSaver
from plait.langgraph.store import PlaitStore
from plait.mesh import Mesh, open_mesh


async def _open(url: str) -> Mesh:
    mesh = open_mesh(url)
    await mesh.open()
    return mesh


@contextmanager
def open_saver(url: str, **options: Any) -> Iterator[PlaitSaver]:
    """A :class:`PlaitSaver` for sync code, on the mesh at ``url``.

    The mesh is opened on a loop thread of its own and closed when the block ends;
    ``options`` go to :class:`PlaitSaver` (``prefix``, ``fenced``, ``writer``, ``serde``).
    """
    thread = LoopThread()
    try:
        mesh = thread.run(_open(url))
        try:
            yield PlaitSaver(mesh, loop=thread.loop, **options)
        finally:
            thread.run(mesh.close())
    finally:
        thread.stop()


__all__ = ["PlaitSaver", "PlaitStore", "open_saver"]
