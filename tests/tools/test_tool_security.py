"""The line between a model and a person: what tools may reach, read, inherit and claim.

Real servers on 127.0.0.1, real FIFOs and SQLite meshes, real ``plait`` processes
started from inside the ``bash`` tool, and bubblewrap where the machine runs it.
"""

from __future__ import annotations

import ipaddress
import os
import pwd
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from plait.cli import app
from plait.decisions import Agent, Decision, DecisionAnswerer, DecisionAsker, Human
from plait.decisions.principals import os_user
from plait.errors import NotPermitted, ToolError, ToolNotPermitted
from plait.mesh import open_mesh
from plait.profiles import AgentProfile
from plait.runs import Runs
from plait.tools import ToolContext, ToolRegistry, default_registry
from plait.tools.http_guard import refusal
from plait.tools.workspace import TOOL_PROCESS_ENV
from tests._support.timing import scaled
from tests.runs.helpers import hosting, settle, store

pytestmark = pytest.mark.anyio

PLAIT = Path(sys.executable).with_name("plait")
WORKTREE = str(Path(__file__).resolve().parents[2])
NODE = Agent("run:grun_test")


@pytest.fixture
def registry() -> ToolRegistry:
    return default_registry()


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)


# -- http_get: no internal addresses -----------------------------------------------


class _Server:
    """A real HTTP server on 127.0.0.1 that records the paths it was asked for."""

    def __init__(self, routes: dict[str, tuple[int, dict[str, str], bytes]]) -> None:
        hits: list[str] = []
        self.hits = hits

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hits.append(self.path)
                status, headers, body = routes.get(self.path, (404, {}, b""))
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


@pytest.fixture
def internal() -> Iterator[_Server]:
    server = _Server({"/internal": (200, {"Content-Type": "text/plain"}, b"every secret")})
    yield server
    server.close()


@pytest.fixture
def front(internal: _Server) -> Iterator[_Server]:
    target = f"http://127.0.0.1:{internal.port}/internal"
    server = _Server(
        {
            "/jump": (302, {"Location": target}, b""),
            "/loop": (302, {"Location": "/loop"}, b""),
            "/ok": (200, {"Content-Type": "text/plain"}, b"public"),
        }
    )
    yield server
    server.close()


async def test_http_get_refuses_a_loopback_server(
    registry: ToolRegistry, internal: _Server, tmp_path: Path
) -> None:
    ctx = ToolContext(node="n", cwd=tmp_path, timeout_s=5)
    url = f"http://127.0.0.1:{internal.port}/internal"
    with pytest.raises(
        ToolNotPermitted, match=r"'127\.0\.0\.1' resolves to 127\.0\.0\.1, a loopback"
    ):
        await registry.call("http_get", {"url": url}, ctx)
    # Names and spellings that reach the same place are refused after resolution.
    for other in (f"http://localhost:{internal.port}/internal", "http://[::1]/", "http://0.0.0.0/"):
        with pytest.raises(ToolNotPermitted, match="allow_hosts"):
            await registry.call("http_get", {"url": other}, ctx)
    assert internal.hits == []


async def test_http_get_refuses_a_redirect_from_an_allowed_host_to_an_internal_one(
    registry: ToolRegistry, internal: _Server, front: _Server, tmp_path: Path
) -> None:
    profile = AgentProfile(name="web", allow_hosts=["LocalHost"])
    ctx = ToolContext(node="n", cwd=tmp_path, timeout_s=5, profile=profile)
    ok = await registry.call("http_get", {"url": f"http://localhost:{front.port}/ok"}, ctx)
    assert (ok["status"], ok["text"]) == (200, "public")
    with pytest.raises(
        ToolNotPermitted, match=r"'127\.0\.0\.1' resolves to 127\.0\.0\.1, a loopback"
    ):
        await registry.call("http_get", {"url": f"http://localhost:{front.port}/jump"}, ctx)
    assert internal.hits == [] and "/jump" in front.hits
    with pytest.raises(ToolError, match="redirected more than 5 times"):
        await registry.call("http_get", {"url": f"http://localhost:{front.port}/loop"}, ctx)
    assert front.hits.count("/loop") == 6


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("169.254.169.254", "cloud metadata"),
        ("fd00:ec2::254", "cloud metadata"),
        ("169.254.1.1", "link-local"),
        ("fe80::1", "link-local"),
        ("10.1.2.3", "private"),
        ("192.168.0.1", "private"),
        ("fc00::1", "private"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("::ffff:127.0.0.1", "loopback"),
        ("64:ff9b::a00:1", "private"),
        ("2002:7f00:1::", "loopback"),
        ("100.64.0.1", "non-public"),
        ("8.8.8.8", None),
        ("2606:4700:4700::1111", None),
    ],
)
def test_which_addresses_are_refused(address: str, why: str | None) -> None:
    assert refusal(ipaddress.ip_address(address)) == why


# -- read_file: the workspace without plait's own state ------------------------------


async def test_read_file_refuses_the_mesh_a_fifo_and_a_symlink_to_the_mesh(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    async with open_mesh(f"sqlite:///{tmp_path / '.plait' / 'mesh.db'}") as mesh:
        await mesh.put("runs/x", {"secret": "every run, output and decision"})
    (tmp_path / "link.db").symlink_to(tmp_path / ".plait" / "mesh.db")
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "notes.txt").write_text("mine")
    ctx = ToolContext(node="n", cwd=tmp_path, timeout_s=2)
    assert await registry.call("read_file", {"path": "notes.txt"}, ctx) == "mine"
    for path in (".plait/mesh.db", "link.db", "./.plait/../.plait/mesh.db-wal"):
        with pytest.raises(ToolNotPermitted, match="plait's own state"):
            await registry.call("read_file", {"path": path}, ctx)
    started = time.monotonic()
    with pytest.raises(ToolNotPermitted, match="'pipe' is not a regular file"):
        await registry.call("read_file", {"path": "pipe"}, ctx)
    assert time.monotonic() - started < ctx.timeout_s


async def test_a_run_pins_its_workspace_and_its_tools_never_read_the_mesh(
    tmp_path: Path,
) -> None:
    """The mesh file sits in the workspace under a plain name: still refused; and the
    host serving the run works in the directory the run was started from, not its own."""
    workspace = tmp_path / "project"
    (workspace / "docs").mkdir(parents=True)
    (workspace / "docs" / "notes.txt").write_text("the user's own file")
    url = f"sqlite:///{workspace / 'data.db'}"
    graph = {
        "name": "reader",
        "agent": "reader",
        "entry": "notes",
        "nodes": [
            {"id": "notes", "type": "tool", "tool": "read_file", "args": {"path": "notes.txt"}},
        ],
    }
    steal = {
        **graph,
        "name": "stealer",
        "agent": "assistant",  # no profile workspace: the project itself
        "nodes": [{**graph["nodes"][0], "args": {"path": "data.db"}}],
    }
    async with open_mesh(url) as mesh:
        from plait.profiles import put_profile

        await put_profile(mesh, AgentProfile(name="reader", tools=["read_file"], workspace="docs"))
        await store(mesh, graph)
        await store(mesh, steal)
        runs = Runs(mesh)
        started = await runs.start("reader", "reader", None, workspace=workspace)
        stolen = await runs.start("assistant", "stealer", None, workspace=workspace)
        assert started.workspace == str(workspace)
        async with hosting(mesh):  # this process's cwd is the repository, not the project
            done = await settle(runs, started.run_id)
            refused = await settle(runs, stolen.run_id)
        assert done.status == "done", done.error
        assert await runs.output(done) == "the user's own file"
        assert refused.status == "failed"
        assert "plait's own state" in (refused.error or "")


# -- bash: a scrubbed environment, and no person inside it ---------------------------


async def test_bash_gets_an_allow_listed_environment_without_mesh_credentials(
    registry: ToolRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLAIT_MESH", "redis://:hunter2@10.0.0.5:6379/0")
    monkeypatch.setenv("PLAIT_AUDIT_KEY", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    monkeypatch.setenv("PROJECT_FLAG", "on")
    ctx = ToolContext(node="n", cwd=tmp_path, timeout_s=10)
    result = await registry.call("bash", {"command": "env"}, ctx)
    env = dict(line.split("=", 1) for line in result["stdout"].splitlines() if "=" in line)
    assert "hunter2" not in result["stdout"]
    assert not {"PLAIT_MESH", "PLAIT_AUDIT_KEY", "AWS_SECRET_ACCESS_KEY", "PROJECT_FLAG"} & set(env)
    assert env[TOOL_PROCESS_ENV] == "1" and env["PATH"] == os.environ["PATH"]
    added = ToolContext(
        node="n", cwd=tmp_path, profile=AgentProfile(name="a", tool_env=["PROJECT_FLAG"])
    )
    flagged = await registry.call("bash", {"command": "echo $PROJECT_FLAG"}, added)
    assert flagged["stdout"] == "on\n"
    with pytest.raises(ValidationError, match="PLAIT_\\* variables are not passed to tools"):
        AgentProfile(name="a", tool_env=["PLAIT_MESH"])


async def test_plait_decisions_answer_inside_a_bash_tool_is_refused(
    registry: ToolRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / '.plait' / 'mesh.db'}"
    async with open_mesh(url) as mesh:
        decision = await DecisionAsker(mesh).raise_("go?", kind="confirm", by=NODE)
    # PYTHONPATH passed on purpose, so the child runs this checkout's plait.
    monkeypatch.setenv("PYTHONPATH", WORKTREE)
    ctx = ToolContext(
        node="n",
        cwd=tmp_path,
        timeout_s=30,
        profile=AgentProfile(name="a", tool_env=["PYTHONPATH"]),
    )
    for argv in (
        ["decisions", "answer", decision.id, "--option", "yes"],
        ["graph", "resume", "grun_x", "yes"],
        ["graph", "raise-budget", "grun_x", "--steps", "5"],
    ):
        command = shlex.join([str(PLAIT), *argv, "--mesh", url])
        result = await registry.call("bash", {"command": command}, ctx)
        assert result["exit_code"] == 1, result
        assert "this process was started by a plait tool" in " ".join(result["stderr"].split())
    async with open_mesh(url) as mesh:
        assert (await DecisionAsker(mesh).get(decision.id)).status == "open"


# -- who is a person -----------------------------------------------------------------


def test_the_principal_recorded_is_the_os_user_with_plait_user_as_a_label(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'mesh.db'}"

    async def ask() -> str:
        async with open_mesh(url) as mesh:
            return (await DecisionAsker(mesh).raise_("ship it?", kind="confirm", by=NODE)).id

    async def read(decision_id: str) -> Decision:
        async with open_mesh(url) as mesh:
            return await DecisionAsker(mesh).get(decision_id)

    decision_id = anyio.run(ask)
    env = {"PLAIT_USER": "the-ceo", "USER": "the-ceo", "LOGNAME": "the-ceo", "PLAIT_MESH": url}
    argv = ["decisions", "answer", decision_id, "--option", "yes"]
    answered = CliRunner().invoke(app, argv, env=env)
    assert answered.exit_code == 0, answered.output
    stored = anyio.run(read, decision_id)
    me = pwd.getpwuid(os.getuid()).pw_name
    assert os_user() == me != "the-ceo"
    assert stored.answer is not None
    assert (stored.answer.by, stored.answer.label, stored.closed_by) == (me, "the-ceo", me)
    assert str(Human(me, label="the-ceo")) == f"human {me!r} (as 'the-ceo')"


def test_a_tool_process_gets_no_human(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOOL_PROCESS_ENV, "1")
    with pytest.raises(NotPermitted, match="only a person may answer"):
        Human.at_terminal()


async def test_answers_stored_before_labels_still_load(tmp_path: Path) -> None:
    async with open_mesh("memory://") as mesh:
        desk = DecisionAnswerer(mesh)
        decision = await desk.raise_("ok?", kind="confirm", by=NODE)
        await desk.answer(decision.id, option="yes", by=Human("ana"))
        entry = await mesh.get(f"decisions/{decision.id}")
        assert entry is not None
        old = {
            **entry.value,
            "answer": {k: v for k, v in entry.value["answer"].items() if k != "label"},
        }
        await mesh.put(f"decisions/{decision.id}", old)
        loaded = await desk.get(decision.id)
        assert loaded.answer is not None and (loaded.answer.by, loaded.answer.label) == (
            "ana",
            None,
        )


# -- sandbox: bwrap ------------------------------------------------------------------


def _bwrap_unusable() -> str | None:
    """Why bubblewrap cannot run here, in bwrap's own words; None if it can."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bwrap is not installed (apt-get install -y bubblewrap)"
    probe = subprocess.run(
        [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-all", "true"],
        capture_output=True,
        text=True,
        timeout=scaled(10),
    )
    if probe.returncode != 0:
        return f"bwrap cannot run here: {probe.stderr.strip() or probe.returncode}"
    return None


async def test_bash_under_bwrap_hides_plait_and_has_no_network(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    why = _bwrap_unusable()
    if why is not None:
        pytest.skip(why)
    workspace = tmp_path / "ws"
    outside = tmp_path / "outside"
    outside.mkdir()
    async with open_mesh(f"sqlite:///{workspace / '.plait' / 'mesh.db'}") as mesh:
        await mesh.put("k", {"v": 1})
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        connect = (
            f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 2)'"
        )
        command = (
            f"ls -A .plait | wc -l; echo made > made.txt; echo $?; "
            f"(echo x > {outside}/escaped.txt) 2>/dev/null; echo $?; "
            f"{connect} 2>/dev/null; echo $?"
        )
        sandboxed = AgentProfile(name="s", sandbox="bwrap")
        ctx = ToolContext(node="n", cwd=workspace, timeout_s=20, profile=sandboxed)
        result = await registry.call("bash", {"command": command}, ctx)
        assert result["exit_code"] == 0, result
        hidden, wrote, escaped, connected = result["stdout"].split()
        assert (hidden, wrote, connected) == ("0", "0", "1") and escaped != "0", result
        assert (workspace / "made.txt").read_text() == "made\n"
        assert not (outside / "escaped.txt").exists()
        assert (workspace / ".plait" / "mesh.db").exists()  # hidden, not harmed
        networked = AgentProfile(name="s", sandbox="bwrap", sandbox_network=True)
        ctx = ToolContext(node="n", cwd=workspace, timeout_s=20, profile=networked)
        result = await registry.call("bash", {"command": f"{connect}; echo $?"}, ctx)
        assert result["stdout"].split() == ["0"], result
