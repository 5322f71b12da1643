"""Calling a mesh that lives on one event loop from another loop or from a plain thread.

A mesh's connections belong to the loop that opened it. LangGraph calls a checkpointer
from wherever the graph runs: ``ainvoke`` on some loop, ``invoke`` on a plain thread.
:class:`LoopBridge` runs each call on the mesh's loop and hands the answer back.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopBridge:
    """Runs coroutines on one loop (``loop``) for callers on other loops or threads."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def on_loop(self) -> bool:
        """Whether the caller runs on the bridged loop itself."""
        try:
            return asyncio.get_running_loop() is self.loop
        except RuntimeError:
            return False

    async def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` on the bridged loop, from any loop."""
        if self.on_loop():
            return await coro
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def call_sync(self, coro: Coroutine[Any, Any, T], what: str) -> T:
        """Run ``coro`` on the bridged loop and wait for it, from a thread not running it.

        Raises:
            RuntimeError: called from the bridged loop's own thread (it would wait on
                itself forever); use the async method instead.
        """
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            coro.close()
            raise RuntimeError(
                f"{what}: synchronous calls are not allowed on the event loop the mesh "
                "runs on; use the async method (ainvoke, astream, a...) or call from "
                "another thread"
            )
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()


class LoopThread:
    """A daemon thread running an event loop of its own, for sync callers of a mesh."""

    def __init__(self, name: str = "plait-langgraph-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the thread's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        """Stop the loop and wait for the thread to end."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()
