"""The built-in tools against real files, real processes and a local HTTP server."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import anyio
import pytest

from plait.errors import ToolArgumentsInvalid, ToolError, ToolNotPermitted
from plait.profiles import AgentProfile
from plait.tools import ToolContext, ToolRegistry, default_registry
from tests._support.timing import scaled
from tests.local_http import http_serving, no_proxy

pytestmark = pytest.mark.anyio


@pytest.fixture
def registry() -> ToolRegistry:
    return default_registry()


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(run_id=None, node="n", cwd=tmp_path, timeout_s=10)


@pytest.fixture
def web_ctx(tmp_path: Path) -> ToolContext:
    """A context whose agent may reach the test servers on 127.0.0.1."""
    profile = AgentProfile(name="web", allow_hosts=["127.0.0.1"])
    return ToolContext(run_id=None, node="n", cwd=tmp_path, timeout_s=10, profile=profile)


def test_flags(registry: ToolRegistry) -> None:
    http, read, bash = (registry.get(n) for n in ("http_get", "read_file", "bash"))
    assert (http.read_only, http.external, http.requires_approval) == (True, True, False)
    assert (read.read_only, read.external, read.requires_approval) == (True, False, False)
    assert (bash.read_only, bash.external, bash.requires_approval) == (False, False, True)


# -- read_file ----------------------------------------------------------------------


async def test_read_file_resolves_against_the_working_directory(
    registry: ToolRegistry, ctx: ToolContext, tmp_path: Path
) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("héllo\nworld\n", encoding="utf-8")
    assert await registry.call("read_file", {"path": "docs/a.txt"}, ctx) == "héllo\nworld\n"
    absolute = str(tmp_path / "docs" / "a.txt")
    assert await registry.call("read_file", {"path": absolute}, ctx) == "héllo\nworld\n"


async def test_read_file_truncates(
    registry: ToolRegistry, ctx: ToolContext, tmp_path: Path
) -> None:
    (tmp_path / "big.txt").write_text("x" * 100)
    text = await registry.call("read_file", {"path": "big.txt", "max_bytes": 10}, ctx)
    assert text == "x" * 10 + "\n[truncated after 10 bytes]"
    whole = await registry.call("read_file", {"path": "big.txt", "max_bytes": 100}, ctx)
    assert whole == "x" * 100


async def test_read_file_stays_inside_the_working_directory(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    inner = tmp_path / "inner"
    inner.mkdir()
    (tmp_path / "secret.txt").write_text("s")
    (inner / "link.txt").symlink_to(tmp_path / "secret.txt")
    ctx = ToolContext(node="n", cwd=inner)
    for path in ("../secret.txt", str(tmp_path / "secret.txt"), "link.txt"):
        with pytest.raises(ToolNotPermitted, match="outside the working directory"):
            await registry.call("read_file", {"path": path}, ctx)


async def test_read_file_errors(registry: ToolRegistry, ctx: ToolContext, tmp_path: Path) -> None:
    with pytest.raises(ToolError, match=re.escape("cannot read 'missing.txt': No such file")):
        await registry.call("read_file", {"path": "missing.txt"}, ctx)
    with pytest.raises(ToolError, match=re.escape("cannot read '.': Is a directory")):
        await registry.call("read_file", {"path": "."}, ctx)
    with pytest.raises(ToolArgumentsInvalid, match=re.escape("args.max_bytes")):
        await registry.call("read_file", {"path": "x", "max_bytes": 0}, ctx)


# -- bash ---------------------------------------------------------------------------


async def test_bash_runs_in_the_working_directory(
    registry: ToolRegistry, ctx: ToolContext, tmp_path: Path
) -> None:
    (tmp_path / "f.txt").write_text("content")
    result = await registry.call("bash", {"command": "cat f.txt; echo oops >&2; exit 3"}, ctx)
    assert result == {"exit_code": 3, "stdout": "content", "stderr": "oops\n", "timed_out": False}


async def test_bash_truncates_long_output(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await registry.call("bash", {"command": "head -c 200000 /dev/zero | tr '\\0' a"}, ctx)
    assert result["exit_code"] == 0
    assert result["stdout"] == "a" * 65536 + "\n[truncated after 65536 bytes]"


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


async def _wait_for_file(path: Path) -> str:
    with anyio.fail_after(scaled(5)):
        while not path.exists() or not path.read_text().strip():
            await anyio.sleep(0.01)
    return path.read_text().strip()


async def test_bash_timeout_kills_the_whole_process_group(
    registry: ToolRegistry, ctx: ToolContext, tmp_path: Path
) -> None:
    command = "echo started; sleep 30 & echo $! > child.pid; sleep 30"
    started = time.monotonic()
    result = await registry.call("bash", {"command": command, "timeout_s": 0.3}, ctx)
    assert time.monotonic() - started < scaled(3)  # stretched on a busy machine
    assert result["timed_out"] is True
    assert result["exit_code"] == -9
    assert result["stdout"] == "started\n"
    child = int(await _wait_for_file(tmp_path / "child.pid"))
    with anyio.fail_after(scaled(2)):
        while _alive(child):
            await anyio.sleep(0.01)


async def test_bash_cancelled_from_outside_leaves_nothing_running(
    registry: ToolRegistry, ctx: ToolContext, tmp_path: Path
) -> None:
    command = "echo $$ > shell.pid; sleep 30 & echo $! > child.pid; wait"
    task = asyncio.ensure_future(registry.call("bash", {"command": command}, ctx))
    shell = int(await _wait_for_file(tmp_path / "shell.pid"))
    child = int(await _wait_for_file(tmp_path / "child.pid"))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with anyio.fail_after(scaled(2)):
        while _alive(shell) or _alive(child):
            await anyio.sleep(0.01)


async def test_bash_cancelled_while_starting_leaves_nothing_running(
    registry: ToolRegistry, ctx: ToolContext, tmp_path: Path
) -> None:
    command = "echo $$ > shell.pid; sleep 30 & echo $! > child.pid; wait"
    for _ in range(5):  # cancel at successive points of the spawn
        for name in ("shell.pid", "child.pid"):
            (tmp_path / name).unlink(missing_ok=True)
        task = asyncio.ensure_future(registry.call("bash", {"command": command}, ctx))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await anyio.sleep(0.2)
        for name in ("shell.pid", "child.pid"):
            path = tmp_path / name
            if path.exists() and path.read_text().strip():
                with anyio.fail_after(scaled(2)):
                    while _alive(int(path.read_text())):
                        await anyio.sleep(0.01)


async def test_bash_timeout_is_capped_by_the_call_limit(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    ctx = ToolContext(node="n", cwd=tmp_path, timeout_s=0.2)
    result = await registry.call("bash", {"command": "sleep 30", "timeout_s": 60}, ctx)
    assert result["timed_out"] is True


async def test_bash_in_a_missing_directory_is_a_tool_error(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    ctx = ToolContext(node="n", cwd=tmp_path / "nope")
    with pytest.raises(ToolError, match="tool 'bash'"):
        await registry.call("bash", {"command": "true"}, ctx)


# -- http_get -----------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        routes: dict[str, tuple[int, dict[str, str], bytes]] = {
            "/page": (200, {"Content-Type": "text/html; charset=utf-8"}, "<p>hé</p>".encode()),
            "/big": (200, {"Content-Type": "text/plain"}, b"y" * 5000),
            "/moved": (302, {"Location": "/page"}, b""),
        }
        status, headers, body = routes.get(self.path, (404, {"X-Secret": "no"}, b"not here"))
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Set-Cookie", "session=1")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with http_serving(_Handler) as base:
        yield base


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    no_proxy(monkeypatch)


async def test_http_get_returns_status_headers_and_text(
    registry: ToolRegistry, web_ctx: ToolContext, server: str
) -> None:
    result = await registry.call("http_get", {"url": f"{server}/page"}, web_ctx)
    assert result == {
        "url": f"{server}/page",
        "status": 200,
        "headers": {"content-type": "text/html; charset=utf-8", "content-length": "10"},
        "text": "<p>hé</p>",
        "truncated": False,
    }


async def test_http_get_follows_redirects_and_reports_errors_as_status(
    registry: ToolRegistry, web_ctx: ToolContext, server: str
) -> None:
    moved = await registry.call("http_get", {"url": f"{server}/moved"}, web_ctx)
    assert (moved["status"], moved["url"], moved["text"]) == (200, f"{server}/page", "<p>hé</p>")
    missing = await registry.call("http_get", {"url": f"{server}/nothing"}, web_ctx)
    assert (missing["status"], missing["text"]) == (404, "not here")
    assert "x-secret" not in missing["headers"] and "set-cookie" not in missing["headers"]


async def test_http_get_truncates(
    registry: ToolRegistry, web_ctx: ToolContext, server: str
) -> None:
    result = await registry.call("http_get", {"url": f"{server}/big", "max_bytes": 100}, web_ctx)
    assert result["truncated"] is True
    assert result["text"] == "y" * 100 + "\n[truncated after 100 bytes]"


async def test_http_get_only_fetches_http_urls(registry: ToolRegistry, ctx: ToolContext) -> None:
    for url in ("file:///etc/passwd", "ftp://example.com/x", "not a url"):
        with pytest.raises(ToolArgumentsInvalid, match="not an http:// or https:// URL"):
            await registry.call("http_get", {"url": url}, ctx)


async def test_http_get_connection_failure_is_a_tool_error(
    registry: ToolRegistry, web_ctx: ToolContext
) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ToolError, match=f"tool 'http_get': GET http://127.0.0.1:{port}/ failed"):
        await registry.call("http_get", {"url": f"http://127.0.0.1:{port}/"}, web_ctx)


async def test_bash_background_jobs_holding_the_output_end_with_the_command(
    registry: ToolRegistry, ctx: ToolContext
) -> None:
    started = time.monotonic()
    result = await registry.call("bash", {"command": "sleep 30 & echo $!"}, ctx)
    assert time.monotonic() - started < scaled(3)  # stretched on a busy machine
    assert (result["exit_code"], result["timed_out"]) == (0, False)
    child = int(result["stdout"])
    with anyio.fail_after(scaled(2)):
        while _alive(child):
            await anyio.sleep(0.01)


async def test_bash_background_job_with_redirected_output_keeps_running(
    registry: ToolRegistry, ctx: ToolContext
) -> None:
    result = await registry.call("bash", {"command": "sleep 30 > /dev/null 2>&1 & echo $!"}, ctx)
    child = int(result["stdout"])
    try:
        assert _alive(child)
    finally:
        os.kill(child, signal.SIGKILL)
