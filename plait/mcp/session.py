"""One kept session to one MCP server: opened, kept, reopened after a crash, closed.

A :class:`KeptSession` runs in a task of its own for as long as its process serves
(the MCP SDK's transports must be entered and left in one task): it opens the session,
pings it while idle to notice a server that died, and after a crash or a failed open
waits (doubling from :data:`BACKOFF_MIN_S` to :data:`BACKOFF_MAX_S`) and opens a new one.
Callers in other tasks wait for a live session with :meth:`KeptSession.session`.
Each time a session opens, and each time its server says its tools, prompts or resources
changed (``notifications/*/list_changed``), it calls the ``on_change`` it was given, so
its owner lists them again (the notification is read in the SDK's receive loop, which
must not wait on the session: the callback only marks the list stale).

A stdio server is started in its workspace with the scrubbed environment of tool
processes (:func:`plait.tools.workspace.tool_env`: ``PATH``, ``LANG``, ``HOME`` and the
tool-process marker) plus only the variables its declaration names; the MCP SDK adds its
own short allow-list (``HOME``, ``LOGNAME``, ``PATH``, ``SHELL``, ``TERM``, ``USER``).
An HTTP server's headers and bearer token are read from the environment when opening.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import IO, Any, Literal, NamedTuple

import anyio
from anyio.abc import TaskStatus
from mcp import ClientSession, StdioServerParameters, stdio_client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import InitializeResult

from plait.errors import ConfigError
from plait.mcp.declaration import WORKSPACE, McpServer
from plait.tools.workspace import tool_env

log = logging.getLogger("plait.mcp")

BACKOFF_MIN_S = 0.1
"""The first wait before a dead or unreachable server is opened again."""

BACKOFF_MAX_S = 30.0
"""The longest wait between two tries to open a server."""

PING_S = 5.0
"""How often an idle session is pinged, so a server that died is noticed and reopened."""

OPEN_TIMEOUT_S = 60.0
"""How long opening a session (starting the server, the handshake) may take."""


Change = Literal["opened", "list_changed"]
"""Why a kept session's lists may have changed: it (re)opened, or its server said so."""

_LIST_CHANGED = (
    types.ToolListChangedNotification,
    types.PromptListChangedNotification,
    types.ResourceListChangedNotification,
)
"""The notifications after which a server's tools (and helpers) are listed again."""


class Progress(NamedTuple):
    """The last progress notification of a call in flight."""

    tool: str
    done: float
    total: float | None
    message: str | None


class KeptSession:
    """A session to ``server`` for ``workspace``, kept open by :meth:`keep`.

    ``on_change`` is called with ``"opened"`` after each open and ``"list_changed"`` on
    each such notification.

    Attributes:
        server: the declaration.
        workspace: where a stdio server runs (its ``{workspace}`` argument).
        opened: how many sessions were opened so far (more than one: it was restarted).
        error: why the last try to open failed, or why the last session ended.
        initialized: what the server said of itself on the last open.
        progress: the last progress a call on it reported (None before any).
        in_flight: how many calls on it are under way.
    """

    def __init__(
        self,
        server: McpServer,
        workspace: Path,
        on_change: Callable[[Change], None] = lambda why: None,
    ) -> None:
        self.server = server
        self.workspace = workspace
        self.opened = 0
        self.error: str | None = None
        self.initialized: InitializeResult | None = None
        self.progress: Progress | None = None
        self.in_flight = 0
        self._session: ClientSession | None = None
        self._dead = anyio.Event()
        self._changed = anyio.Event()
        self._scope: anyio.CancelScope | None = None
        self._on_change = on_change

    async def keep(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Open the session and keep it until cancelled; reports started after the
        first try to open (whether or not it succeeded)."""
        delay = BACKOFF_MIN_S
        reported = False
        with anyio.CancelScope() as self._scope:
            while True:
                try:
                    async with self._open() as session:
                        self._session, self._dead = session, anyio.Event()
                        self.opened += 1
                        self.error = None
                        delay = BACKOFF_MIN_S
                        self._notify()
                        self._on_change("opened")
                        if not reported:
                            reported = True
                            task_status.started()
                        await self._watch(session)
                except Exception as exc:  # cancellation is a BaseException and passes
                    self.error = _reason(exc)
                    log.warning("MCP server %s: %s", self.server.name, self.error)
                finally:
                    self._session = None
                    self._notify()
                if not reported:
                    reported = True
                    task_status.started()
                await anyio.sleep(delay)
                delay = min(delay * 2, BACKOFF_MAX_S)

    def close(self) -> None:
        """Stop keeping the session (its task ends, closing it)."""
        if self._scope is not None:
            self._scope.cancel()

    async def session(self) -> ClientSession:
        """A live session, waiting (under the caller's deadline) for one to open."""
        while self._session is None:
            await self._changed.wait()
        return self._session

    @property
    def live(self) -> bool:
        """Whether a session is open now."""
        return self._session is not None

    def mark_dead(self, session: ClientSession) -> None:
        """Say that ``session`` lost its server (a call found the connection closed)."""
        if session is self._session:
            self._session = None  # callers wait for the next one from now on
            self._dead.set()

    async def _on_message(self, message: object) -> None:
        if isinstance(message, _LIST_CHANGED):
            self._on_change("list_changed")

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def _watch(self, session: ClientSession) -> None:
        """Return when ``session`` is dead: a caller said so, or a ping failed."""
        dead = self._dead
        while not dead.is_set():
            with anyio.move_on_after(PING_S):
                await dead.wait()
            if dead.is_set():
                break
            try:
                with anyio.fail_after(PING_S):
                    await session.send_ping()
            except Exception as exc:
                self.error = f"the server stopped answering: {_reason(exc)}"
                break
        if self.error is None:
            self.error = "the connection to the server closed"

    @contextlib.asynccontextmanager
    async def _open(self) -> AsyncIterator[ClientSession]:
        async with contextlib.AsyncExitStack() as stack:
            if self.server.command is not None:
                errlog = stack.enter_context(tempfile.TemporaryFile("w+", encoding="utf-8"))
                try:
                    streams = await stack.enter_async_context(
                        stdio_client(self._stdio_params(), errlog=errlog)
                    )
                    session = await self._started(stack, streams)
                except Exception as exc:
                    raise _with_stderr(exc, errlog) from exc
            else:
                client = await stack.enter_async_context(
                    create_mcp_http_client(headers=http_headers(self.server))
                )
                streams = await stack.enter_async_context(
                    streamable_http_client(self.server.url or "", http_client=client)
                )
                session = await self._started(stack, streams)
            yield session

    async def _started(self, stack: contextlib.AsyncExitStack, streams: Any) -> ClientSession:
        """A session over ``streams``, entered in ``stack`` and initialized."""
        session = await stack.enter_async_context(
            ClientSession(streams[0], streams[1], message_handler=self._on_message)
        )
        with anyio.fail_after(OPEN_TIMEOUT_S):
            self.initialized = await session.initialize()
        return session

    def _stdio_params(self) -> StdioServerParameters:
        argv = [a.replace(WORKSPACE, str(self.workspace)) for a in self.server.command or ()]
        env = tool_env(None)
        env.update({n: os.environ[n] for n in self.server.env if n in os.environ})
        return StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=self.workspace)


def http_headers(server: McpServer) -> dict[str, str]:
    """The headers of ``server``'s HTTP requests, read from the environment now.

    Raises:
        ConfigError: a variable the declaration names is not set.
    """
    headers: dict[str, str] = {}
    wanted = dict(server.headers)
    if server.bearer_env:
        wanted["Authorization"] = server.bearer_env
    for header, env in wanted.items():
        value = os.environ.get(env)
        if value is None:
            raise ConfigError(
                f"MCP server {server.name!r}: the environment variable {env} "
                f"(for its {header} header) is not set"
            )
        bearer = header == "Authorization" and env == server.bearer_env
        headers[header] = f"Bearer {value}" if bearer else value
    return headers


def _reason(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return _reason(exc.exceptions[0])
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _with_stderr(exc: Exception, errlog: IO[str]) -> Exception:
    errlog.seek(0)
    tail = errlog.read()[-500:].strip()
    return RuntimeError(f"{_reason(exc)}; its stderr: {tail}") if tail else exc


__all__ = [
    "BACKOFF_MAX_S",
    "BACKOFF_MIN_S",
    "PING_S",
    "Change",
    "KeptSession",
    "Progress",
    "http_headers",
]
