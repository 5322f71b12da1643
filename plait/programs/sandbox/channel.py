"""The serving side of one sandboxed run: send the program, answer its calls, read its end.

The child asks with ``call`` frames (``{id, cap, method, args, kwargs}``); each is
answered by the real capability object this process holds, and only if ``cap.method``
is in :data:`METHODS`: the public methods of the capabilities, nothing else (no
private slot, no attribute walk, no method a capability does not document). Every
check a capability makes (budget, taint, tool gates, service-owned keys, the
principal decisions are raised by) happens here, in the serving process.

A capability's error goes back as data with a reference; if the program lets it
through, its ``done`` frame names that reference and the original exception is raised
here (a :class:`~plait.errors.VersionConflict` stays one). Any other failure of the
program is one :class:`~plait.errors.ProgramError` line: ``file:line: Type: message``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import marshal
import socket
from collections.abc import Callable, Mapping
from types import CodeType
from typing import Any

import anyio

from plait.errors import CapabilityMissing, PlaitError, ProgramError
from plait.programs.capabilities import Missing, snake_keywords
from plait.programs.sandbox.process import HEADER
from plait.programs.sandbox.zygote import SandboxProcess

METHODS: Mapping[str, frozenset[str]] = {
    "mesh": frozenset({"get", "put", "publish", "scan", "self"}),
    "decisions": frozenset({"raise", "raise_", "wait"}),
    "tools": frozenset({"call", "bash"}),
    "agents": frozenset({"create", "tell", "run"}),
    "programs": frozenset({"run"}),
}
"""The capability methods a sandboxed program may call, by capability."""

_SORTED = {name: sorted(methods) for name, methods in METHODS.items()}

MAX_FRAME = 16 << 20
"""The largest frame the child may send (a program that sends more is ended)."""

_ALIASES = {"raise": "raise_"}

log = logging.getLogger(__name__)


class _Channel:
    """Frames over the serving end of the socket pair, on this thread's event loop.

    Frames from the child are read by a callback the loop runs whenever the socket is
    readable (registered once per run, not once per frame) and handed to ``on_frame``;
    the end of the channel (or a frame that breaks the rules) settles :attr:`ended`. A
    frame is sent at once where the socket takes it (it mostly does); only a full socket
    is waited on, under a lock so that frames never interleave.
    """

    def __init__(self, sock: socket.socket, on_frame: Callable[[dict[str, Any]], None]) -> None:
        self.sock = sock
        self.on_frame = on_frame
        self.buffer = bytearray()
        self.loop = asyncio.get_running_loop()
        self.lock = asyncio.Lock()
        self.ended: asyncio.Future[None] = self.loop.create_future()
        self.loop.add_reader(sock.fileno(), self._readable)

    def close(self) -> None:
        """Stop reading (the socket stays open: its process owns it)."""
        self.loop.remove_reader(self.sock.fileno())
        if not self.ended.done():
            self.ended.set_result(None)

    async def send(self, frame: Mapping[str, Any]) -> None:
        """Send ``frame`` as marshal (JSON data and, in the ``run`` frame, the code object:
        the child trusts this process, and what the child sends is only ever read here as
        JSON)."""
        data = marshal.dumps(dict(frame))
        async with self.lock:  # uncontended: taken without a switch
            await self.loop.sock_sendall(self.sock, HEADER.pack(len(data)) + data)

    def _readable(self) -> None:
        try:
            chunk = self.sock.recv(1 << 16)
        except BlockingIOError:
            return
        except ConnectionError:
            chunk = b""
        if not chunk:
            self.close()
            return
        self.buffer += chunk
        try:
            while (frame := self._next()) is not None:
                self.on_frame(frame)
        except ProgramError as exc:
            self.loop.remove_reader(self.sock.fileno())
            if not self.ended.done():
                self.ended.set_exception(exc)

    def _next(self) -> dict[str, Any] | None:
        if len(self.buffer) < HEADER.size:
            return None
        size = HEADER.unpack_from(self.buffer)[0]
        if size > MAX_FRAME:
            raise ProgramError(f"the program sent a frame of {size} bytes (at most {MAX_FRAME})")
        if len(self.buffer) < HEADER.size + size:
            return None
        body = bytes(self.buffer[HEADER.size : HEADER.size + size])
        del self.buffer[: HEADER.size + size]
        try:
            frame = json.loads(body)
        except (ValueError, RecursionError):
            raise ProgramError("the program sent a frame that is not JSON") from None
        if not isinstance(frame, dict):
            raise ProgramError("the program sent a frame that is not an object")
        return frame


async def run_on(
    proc: SandboxProcess,
    code: CodeType,
    filename: str,
    input: Any,
    names: Mapping[str, Any],
    *,
    wall_seconds: float,
) -> Any:
    """Run ``code`` in ``proc`` with ``names`` (capabilities by name) answered here.

    Raises:
        ProgramError: the program failed (one line, with its line number), ran past
            ``wall_seconds``, or its process ended without a result.
        Exception: a capability's own error the program let through.
    """
    capabilities = {n: v for n, v in names.items() if n in METHODS}
    errors: list[Exception] = []
    answering: set[asyncio.Task[None]] = set()
    done: dict[str, Any] | None = None

    async def answer(frame: dict[str, Any]) -> None:
        call_id = frame.get("id")
        try:
            value = await _call(capabilities, frame)
            reply: dict[str, Any] = {"id": call_id, "ok": True, "value": _jsonable(value)}
        except Exception as exc:  # the capability's refusal or failure, sent as data
            errors.append(exc)
            error = {"type": type(exc).__name__, "message": str(exc), "ref": len(errors)}
            reply = {"id": call_id, "ok": False, "error": error}
        try:
            await channel.send(reply)
        except OSError:
            pass  # the child is gone: its end is read as such

    def on_frame(frame: dict[str, Any]) -> None:
        nonlocal done
        if done is not None:
            return
        if frame.get("op") == "call":
            # Each call answered on its own: a program may wait on several at once.
            task = channel.loop.create_task(answer(frame))
            answering.add(task)
            task.add_done_callback(answering.discard)
        elif frame.get("op") == "done":
            done = frame
            channel.close()

    channel = _Channel(proc.sock, on_frame)
    deadline = asyncio.timeout(wall_seconds)
    try:
        async with deadline:
            await channel.send(
                {
                    "op": "run",
                    "code": code,
                    "filename": filename,
                    "input": _jsonable(input),
                    "capabilities": {
                        n: [] if isinstance(v, Missing) else _SORTED[n]
                        for n, v in capabilities.items()
                    },
                }
            )
            await channel.ended
    except TimeoutError:
        if not deadline.expired():
            raise
        raise ProgramError(
            f"{filename}: the program ran past its {wall_seconds:g} s wall-clock limit"
        ) from None
    finally:
        channel.close()
        for task in answering:
            task.cancel()
        if answering:
            await asyncio.gather(*answering, return_exceptions=True)
    if done is None:
        raise ProgramError(await anyio.to_thread.run_sync(_ended, proc, filename))
    printed = done.get("printed")
    if isinstance(printed, str) and printed:
        log.info("program %s printed:\n%s", filename, printed)
    if done.get("ok"):
        return done.get("value")
    raise _failure(done.get("error"), errors, filename)


async def _call(capabilities: Mapping[str, Any], frame: Mapping[str, Any]) -> Any:
    cap, method = frame.get("cap"), frame.get("method")
    args, kwargs = frame.get("args", []), frame.get("kwargs", {})
    if (
        not isinstance(cap, str)
        or not isinstance(method, str)
        or method not in METHODS.get(cap, ())
    ):
        raise CapabilityMissing(
            f"{cap}.{method} is not a capability method: programs call only "
            + "; ".join(f"{c}.{{{', '.join(sorted(m))}}}" for c, m in METHODS.items())
        )
    if cap not in capabilities:
        raise CapabilityMissing(f"this program was run without the {cap} capability")
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        raise TypeError(f"{cap}.{method}: bad arguments")
    bound = getattr(capabilities[cap], _ALIASES.get(method, method))
    return await bound(*args, **snake_keywords(f"{cap}.{method}", kwargs))


def _failure(error: Any, errors: list[Exception], filename: str) -> Exception:
    if not isinstance(error, dict):
        return ProgramError(f"{filename}: the program failed and said nothing of why")
    ref = error.get("ref")
    line = error.get("line")
    where = f"{filename}:{line}" if isinstance(line, int) else filename
    if isinstance(ref, int) and 0 < ref <= len(errors):
        original = errors[ref - 1]
        if isinstance(original, PlaitError):
            return original
        # not plait's (a TypeError of a bad keyword, say): one line naming the program's
        return ProgramError(f"{where}: {type(original).__name__}: {original}")
    kind, message = str(error.get("type", "Error")), str(error.get("message", ""))
    return ProgramError(f"{where}: {kind}: {message}" if message else f"{where}: {kind}")


def _ended(proc: SandboxProcess, filename: str) -> str:
    code = proc.wait(timeout=5)  # None: still running though its channel closed (killed on close)
    why = f"exit status {code}"
    if code is not None and code < 0:
        why = f"killed by signal {-code}"
        if -code in (24, 9):  # SIGXCPU, SIGKILL: the CPU or memory limit, or the kernel
            why += " (a CPU, memory or process limit)"
    elif code is not None and code > 128:
        why = f"killed by signal {code - 128} (a CPU, memory or process limit)"
    return f"{filename}: the program's sandbox process ended without a result ({why})"


def _jsonable(value: Any) -> Any:
    """``value`` as JSON data (what cannot be is shown as text)."""
    return json.loads(json.dumps(value, default=str))


__all__ = ["MAX_FRAME", "METHODS", "run_on"]
