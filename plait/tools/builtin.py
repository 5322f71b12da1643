"""The built-in tools: ``http_get``, ``read_file`` and ``bash``.

Every result is bounded: bodies, files and command output are cut at a byte limit and
say so, so one call can never flood a prompt or a run record.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import stat
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import anyio

from plait.errors import ToolArgumentsInvalid, ToolError, ToolNotPermitted
from plait.tools.registry import Tool, ToolContext, tool
from plait.tools.workspace import bwrap_argv, guarded_path, tool_env

DEFAULT_MAX_BYTES = 256 * 1024
"""How much of a page or file ``http_get`` and ``read_file`` return by default."""

MAX_BYTES_LIMIT = 8 * 1024 * 1024
"""The largest ``max_bytes`` a caller may ask for."""

MAX_OUTPUT_BYTES = 64 * 1024
"""How much of each of a command's stdout and stderr ``bash`` returns."""

MAX_REDIRECTS = 5
"""How many redirects ``http_get`` follows before it gives up."""

KEPT_HEADERS = ("content-type", "content-length", "content-encoding", "last-modified", "etag")
"""The response headers ``http_get`` returns (lower-case)."""

_PIPE_DRAIN_S = 0.5  # how long output may keep flowing after the shell exits
_CHUNK = 64 * 1024

_MAX_BYTES_SCHEMA: dict[str, Any] = {
    "type": "integer",
    "minimum": 1,
    "maximum": MAX_BYTES_LIMIT,
    "description": f"return at most this many bytes (default {DEFAULT_MAX_BYTES})",
}


def _clip(data: bytes, truncated: bool, encoding: str = "utf-8") -> str:
    try:
        text = data.decode(encoding, errors="replace")
    except LookupError:  # a server may name a charset Python does not know
        text = data.decode("utf-8", errors="replace")
    if truncated:
        text += f"\n[truncated after {len(data)} bytes]"
    return text


# -- http_get -----------------------------------------------------------------------


@tool(
    "http_get",
    parameters={
        "type": "object",
        "properties": {
            "url": {"type": "string", "description": "an http:// or https:// URL"},
            "max_bytes": _MAX_BYTES_SCHEMA,
        },
        "required": ["url"],
        "additionalProperties": False,
    },
    read_only=True,
    external=True,
)
async def http_get(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Fetch a web page or API response with GET; returns status, headers and text.

    Redirects are followed, at most :data:`MAX_REDIRECTS`. The result is ``{url,
    status, headers, text, truncated}`` where ``url`` is the final URL and ``headers``
    holds only :data:`KEPT_HEADERS`. Loopback, private, link-local, multicast and
    metadata addresses are refused, checked after resolution and on every redirect,
    unless the agent profile lists the host in ``allow_hosts``.
    """
    url: str = args["url"]
    _check_http_url(url)
    import httpx  # here, not at the top: it costs every CLI start a tenth of a second

    from plait.tools.http_guard import PinnedTransport

    allowed = frozenset(ctx.profile.allow_hosts if ctx.profile else ())
    limit: int = args.get("max_bytes", DEFAULT_MAX_BYTES)
    body = bytearray()
    truncated = False
    try:
        async with httpx.AsyncClient(
            timeout=ctx.timeout_s, transport=PinnedTransport(allowed), trust_env=False
        ) as client:
            for _ in range(MAX_REDIRECTS + 1):
                async with client.stream("GET", url) as response:
                    location = response.headers.get("location")
                    if response.is_redirect and location:
                        url = str(response.url.join(location))
                        if urlsplit(url).scheme.lower() not in ("http", "https"):
                            raise ToolNotPermitted(
                                f"tool 'http_get': {args['url']} redirects to {url!r}, "
                                "which is not an http:// or https:// URL"
                            )
                        continue
                    async for chunk in response.aiter_bytes(_CHUNK):
                        body += chunk
                        if len(body) > limit:
                            truncated = True
                            del body[limit:]
                            break
                    break
            else:
                raise ToolError(
                    f"tool 'http_get': GET {args['url']} redirected more than {MAX_REDIRECTS} times"
                )
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise ToolError(f"tool 'http_get': GET {url} failed: {exc}") from exc
    return {
        "url": str(response.url),
        "status": response.status_code,
        "headers": {k: response.headers[k] for k in KEPT_HEADERS if k in response.headers},
        "text": _clip(bytes(body), truncated, response.encoding or "utf-8"),
        "truncated": truncated,
    }


def _check_http_url(url: str) -> None:
    if urlsplit(url).scheme.lower() not in ("http", "https"):
        raise ToolArgumentsInvalid(
            f"invalid arguments for tool 'http_get':\n  args.url: {url!r} is not an "
            "http:// or https:// URL"
        )


# -- read_file ----------------------------------------------------------------------


@tool(
    "read_file",
    parameters={
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "a path inside the workspace"},
            "max_bytes": _MAX_BYTES_SCHEMA,
        },
        "required": ["path"],
        "additionalProperties": False,
    },
    read_only=True,
)
async def read_file(args: dict[str, Any], ctx: ToolContext) -> str:
    """Read a text file in the workspace; returns its text.

    Relative paths are resolved against the workspace, and the resolved path (symlinks
    followed) must stay inside it. Regular files only; ``.plait/`` and the mesh's files
    are refused. Text past ``max_bytes`` is cut and a last line says so.
    """
    limit: int = args.get("max_bytes", DEFAULT_MAX_BYTES)
    raw: str = args["path"]
    deadline = time.monotonic() + ctx.timeout_s

    def read() -> tuple[bytes, bool]:
        path = guarded_path("read_file", raw, ctx.cwd, ctx.protected)
        try:
            # O_NONBLOCK: opening a FIFO waits for a writer, for ever; O_NOFOLLOW: the
            # checked path is resolved, so a symlink here was swapped in since.
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY)
        except OSError as exc:
            raise ToolError(f"tool 'read_file': cannot read {raw!r}: {exc.strerror}") from exc
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode):
                raise ToolError(f"tool 'read_file': cannot read {raw!r}: Is a directory")
            if not stat.S_ISREG(mode):
                raise ToolNotPermitted(
                    f"tool 'read_file': {raw!r} is not a regular file (a FIFO, socket or "
                    "device), which file tools do not read"
                )
            data = bytearray()
            while len(data) <= limit:
                if time.monotonic() > deadline:
                    raise ToolError(
                        f"tool 'read_file': reading {raw!r} took over {ctx.timeout_s:g}s"
                    )
                chunk = os.read(fd, min(_CHUNK, limit + 1 - len(data)))
                if not chunk:
                    break
                data += chunk
        except ToolError:  # ToolNotPermitted is an OSError too: not re-worded below
            raise
        except OSError as exc:
            raise ToolError(f"tool 'read_file': cannot read {raw!r}: {exc.strerror}") from exc
        finally:
            os.close(fd)
        return bytes(data[:limit]), len(data) > limit

    # Abandoned on cancel: a read stuck in the kernel (a dead network file system)
    # must not hold up the call's timeout or the process's exit.
    data, truncated = await anyio.to_thread.run_sync(read, abandon_on_cancel=True)
    return _clip(data, truncated)


# -- bash ---------------------------------------------------------------------------


@tool(
    "bash",
    parameters={
        "type": "object",
        "properties": {
            "command": {"type": "string", "minLength": 1, "description": "a shell command"},
            "timeout_s": {
                "type": "number",
                "exclusiveMinimum": 0,
                "description": "kill the command after this many seconds",
            },
        },
        "required": ["command"],
        "additionalProperties": False,
    },
    requires_approval=True,
)
async def bash(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Run a shell command in the workspace; returns its exit code and output.

    The result is ``{exit_code, stdout, stderr, timed_out}``. A command still running
    after ``timeout_s`` (at most the call's own limit) is killed with its whole process
    group; ``exit_code`` is then negative (the signal) and ``timed_out`` true.
    Background jobs that still hold the command's output open once the shell has
    exited are killed with its process group; one whose output is redirected
    elsewhere (``nohup server > log 2>&1 &``) keeps running.

    The command gets only ``PATH``, ``LANG``, ``HOME`` and the profile's ``tool_env``
    of the worker's environment, and runs with the worker's OS rights unless the
    profile's ``sandbox: bwrap`` runs it under bubblewrap.
    """
    timeout = min(float(args.get("timeout_s", ctx.timeout_s)), ctx.timeout_s)
    profile = ctx.profile
    argv = (
        bwrap_argv(args["command"], ctx.cwd, ctx.protected, network=profile.sandbox_network)
        if profile is not None and profile.sandbox == "bwrap"
        else ["/bin/sh", "-c", args["command"]]
    )
    spawn = asyncio.ensure_future(
        asyncio.get_running_loop().subprocess_exec(
            _Process,
            *argv,
            cwd=ctx.cwd,
            env=tool_env(profile),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # its own process group, so a timeout kills it all
        )
    )
    try:
        # Shielded: asyncio cancelled mid-spawn kills only the shell and leaks its pipes.
        transport, proc = await asyncio.shield(spawn)
    except asyncio.CancelledError:
        spawn.add_done_callback(_end_spawned)
        raise
    except OSError as exc:
        raise ToolError(f"tool 'bash': cannot start the shell: {exc}") from exc
    pid = transport.get_pid()
    try:
        with anyio.move_on_after(timeout) as scope:
            await proc.exited.wait()
        if scope.cancelled_caught:
            _kill_group(pid)
            await proc.exited.wait()
        if not await _within(_PIPE_DRAIN_S, proc.pipes_closed):
            _kill_group(pid)  # background jobs still hold the output: they end too
            await _within(_PIPE_DRAIN_S, proc.pipes_closed)
    finally:
        if transport.get_returncode() is None:  # cancelled from outside
            _kill_group(pid)
            with anyio.CancelScope(shield=True):
                await _within(_PIPE_DRAIN_S, proc.exited)
        transport.close()
    return {
        "exit_code": transport.get_returncode(),
        "stdout": _clip(bytes(proc.out.data), proc.out.truncated),
        "stderr": _clip(bytes(proc.err.data), proc.err.truncated),
        "timed_out": scope.cancelled_caught,
    }


@dataclass(slots=True)
class _Capture:
    data: bytearray = field(default_factory=bytearray)
    truncated: bool = False

    def add(self, chunk: bytes) -> None:
        # Everything is read, even past the limit: a child blocked on a full pipe
        # would never exit.
        room = MAX_OUTPUT_BYTES - len(self.data)
        self.data += chunk[:room]
        self.truncated = self.truncated or len(chunk) > room


class _Process(asyncio.SubprocessProtocol):
    """Collects a shell's output and says when it exits and when its pipes close.

    asyncio's high-level ``Process.wait()`` waits for the pipes as well as the exit,
    and a background job can hold the pipes open for ever; this protocol keeps the
    two apart.
    """

    def __init__(self) -> None:
        self.out = _Capture()
        self.err = _Capture()
        self.exited = asyncio.Event()
        self.pipes_closed = asyncio.Event()
        self._open = {1, 2}

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        (self.out if fd == 1 else self.err).add(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._open.discard(fd)
        if not self._open:
            self.pipes_closed.set()

    def process_exited(self) -> None:
        self.exited.set()


async def _within(seconds: float, event: asyncio.Event) -> bool:
    with anyio.move_on_after(seconds):
        await event.wait()
    return event.is_set()


def _end_spawned(spawn: asyncio.Future[tuple[asyncio.SubprocessTransport, _Process]]) -> None:
    if spawn.cancelled() or spawn.exception() is not None:
        return
    transport, _ = spawn.result()
    _kill_group(transport.get_pid())
    transport.close()


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


BUILTIN_TOOLS: tuple[Tool, ...] = (http_get, read_file, bash)
"""Every built-in tool, as :func:`plait.tools.default_registry` registers them."""

__all__ = [
    "BUILTIN_TOOLS",
    "DEFAULT_MAX_BYTES",
    "KEPT_HEADERS",
    "MAX_BYTES_LIMIT",
    "MAX_OUTPUT_BYTES",
    "bash",
    "http_get",
    "read_file",
]
