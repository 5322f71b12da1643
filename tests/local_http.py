"""A real HTTP server on a free local port, for tests of tools that fetch."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy")
"""What would send a request to 127.0.0.1 through a proxy instead."""


@contextmanager
def http_serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` served on 127.0.0.1 in a thread for the block; its base URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset the proxy variables for the test."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
