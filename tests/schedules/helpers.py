"""Helpers of the schedule tests: clocks, a graph, a webhook receiver on 127.0.0.1."""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from plait.decisions import Human

OPERATOR = Human("ana")
FAST = {"check_first_ms": 50, "check_max_ms": 200, "retry_first_ms": 100}
"""Timings that make checks and retries quick enough for a test."""
ONE_NODE = {
    "name": "report",
    "agent": "assistant",
    "entry": "write",
    "nodes": [{"id": "write", "type": "agent", "prompt": "Report on {{input}}"}],
}
ASKING = {
    "name": "signed-report",
    "agent": "assistant",
    "entry": "write",
    "nodes": [
        {"id": "write", "type": "agent", "prompt": "Report on {{input}}", "next": "approve"},
        {"id": "approve", "type": "human", "ask": "Send {{write}}?", "next": "send"},
        {"id": "send", "type": "agent", "prompt": "Send {{write}} ({{approve}})"},
    ],
}
RULES = [
    {"node": "write", "text": "the report"},
    {"node": "send", "text": "sent"},
]


class FakeClock:
    """A clock a test moves by hand; a wait for a time is as long in real time (so an
    armed fire stays pending while the test drives fires itself)."""

    def __init__(self, start: float) -> None:
        self.t = start

    def now(self) -> float:
        return self.t

    def delay_ms(self, at: float) -> int:
        return max(0, math.ceil((at - self.t) * 1000))


class FastClock:
    """Simulated time running ``factor`` times faster than real time from ``start``."""

    def __init__(self, start: float, factor: float) -> None:
        self.start, self.factor, self.began = start, factor, time.monotonic()

    def now(self) -> float:
        return self.start + (time.monotonic() - self.began) * self.factor

    def delay_ms(self, at: float) -> int:
        return max(0, math.ceil((at - self.now()) / self.factor * 1000))


@dataclass
class Receiver:
    """What the webhook receiver saw: each POST's body and whether it was signed right."""

    secret: str
    fail_first: int = 0
    posts: list[dict[str, Any]] = field(default_factory=list)
    answered: list[int] = field(default_factory=list)
    url: str = ""

    def check(self, body: bytes, signature: str | None) -> bool:
        want = "sha256=" + hmac.new(self.secret.encode(), body, hashlib.sha256).hexdigest()
        return signature is not None and hmac.compare_digest(want, signature)


@contextmanager
def webhook_receiver(secret: str, *, fail_first: int = 0) -> Iterator[Receiver]:
    """An HTTP server on 127.0.0.1 taking POSTs; it answers 500 to the first ``fail_first``
    and 401 to a badly signed one."""
    seen = Receiver(secret, fail_first)
    lock = threading.Lock()

    class Handle(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with lock:
                if not seen.check(body, self.headers.get("X-Plait-Signature")):
                    code = 401
                elif len(seen.answered) < seen.fail_first:
                    code = 500
                else:
                    code = 200
                    seen.posts.append(json.loads(body))
                seen.answered.append(code)
            self.send_response(code)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handle)
    seen.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
