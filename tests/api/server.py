"""``plait serve`` as a real process on a free 127.0.0.1 port, with a human token."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml
from runs.helpers import poll

from tests._support.timing import scaled

PLAIT = Path(sys.executable).with_name("plait")


def free_port() -> int:
    """A port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Served:
    """A running ``plait serve``: its address, a human token, a client with it."""

    url: str
    token: str
    mesh_url: str
    client: httpx.Client

    def token_for(self, *args: str) -> str:
        """Create another token (``--service NAME``, say) with the CLI."""
        done = plait(self.mesh_url, "tokens", "create", *args, "--json")
        return str(json.loads(done.stdout)["token"])


def plait(mesh_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``plait ARGS --mesh URL`` to its end; it must exit 0."""
    return subprocess.run(
        [str(PLAIT), *args, "--mesh", mesh_url],
        text=True,
        capture_output=True,
        check=True,
        timeout=scaled(30),
    )


@contextmanager
def serving(
    tmp_path: Path, rules: list[dict[str, Any]], *extra: str, serve_runs: bool = True
) -> Iterator[Served]:
    """``plait serve --serve-runs`` (without it if not ``serve_runs``) on a SQLite mesh
    in ``tmp_path``, its model scripted by ``rules``; stopped (SIGTERM, then waited on)
    after the block. Its output is in ``tmp_path / "serve.log"``."""
    mesh_url = f"sqlite:///{tmp_path / 'mesh.db'}"
    model = tmp_path / "model.yaml"
    model.write_text(yaml.safe_dump({"rules": rules}))
    token = str(
        json.loads(plait(mesh_url, "tokens", "create", "--human", "ana", "--json").stdout)["token"]
    )
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "PLAIT_MODEL"}
    log = (tmp_path / "serve.log").open("a")
    proc = subprocess.Popen(
        [str(PLAIT), "serve", "--port", str(port), *(["--serve-runs"] if serve_runs else []),
         "--model", f"scripted:{model}", "--mesh", mesh_url, *extra],
        cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"})

    def up() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"plait serve exited {proc.returncode}: {_read(tmp_path)}")
        try:
            return client.get("/api/whoami").status_code == 200
        except httpx.TransportError:
            return False

    try:
        poll(up, timeout=20)
        yield Served(url, token, mesh_url, client)
    finally:
        client.close()
        proc.terminate()
        try:
            proc.wait(timeout=scaled(20))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _read(tmp_path: Path) -> str:
    return (tmp_path / "serve.log").read_text()
