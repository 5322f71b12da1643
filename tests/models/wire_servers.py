"""Fake model providers: real HTTP servers in a thread that speak the providers' wire format.

Each server answers from a queue of replies and records every request it received, so a
test can check both what the adapter sent and how it reads what came back::

    with OpenAIWireServer() as server:
        server.reply_text("hello", usage=(12, 3))
        model = OpenAIModel("gpt-test", base_url=server.base_url)
        ...
        assert server.requests[0].body["messages"][0]["role"] == "user"

``OpenAIWireServer`` serves ``POST /v1/chat/completions``; ``AnthropicWireServer``
serves ``POST /v1/messages``. A reply may carry headers (``retry-after-ms``) and a
delay (for timeouts); an empty queue answers 500.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self


@dataclass
class WireReply:
    """One queued answer: status, JSON body, extra headers, and a delay before sending."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class WireRequest:
    """One request the server received; header names are lower-cased."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


class WireServer:
    """A JSON HTTP server on 127.0.0.1 (a free port) in a background thread.

    Args:
        path: the one path it serves; any other answers 404.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.requests: list[WireRequest] = []
        self._replies: deque[WireReply] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        """The server root, ``http://127.0.0.1:PORT``."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def base_url(self) -> str:
        """The base URL an SDK is given (the root; subclasses add an API prefix)."""
        return self.url

    def push(
        self,
        body: Any,
        status: int = 200,
        headers: dict[str, str] | None = None,
        delay: float = 0.0,
    ) -> None:
        """Queue a reply for the next request."""
        with self._lock:
            self._replies.append(WireReply(status, body, dict(headers or {}), delay))

    def start(self) -> None:
        """Serve in the background."""
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and wake any delayed reply."""
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _answer(self, request: WireRequest) -> WireReply:
        with self._lock:
            self.requests.append(request)
            if request.path != self.path:
                return WireReply(404, {"error": {"message": f"no route {request.path}"}})
            if not self._replies:
                return WireReply(500, {"error": {"message": "no reply queued"}})
            return self._replies.popleft()


def _handler(server: WireServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            request = WireRequest(
                method="POST",
                path=self.path.split("?", 1)[0],
                headers={name.lower(): value for name, value in self.headers.items()},
                body=json.loads(raw) if raw else None,
            )
            reply = server._answer(request)
            if reply.delay and server._stopping.wait(reply.delay):
                return
            payload = json.dumps(reply.body).encode()
            try:
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
            except OSError:
                pass  # the client gave up (a timeout test): nothing to answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


class OpenAIWireServer(WireServer):
    """Speaks ``POST /v1/chat/completions``; give an SDK :attr:`base_url` (``.../v1``)."""

    def __init__(self) -> None:
        super().__init__("/v1/chat/completions")

    @property
    def base_url(self) -> str:
        """The API root an OpenAI client is given."""
        return f"{self.url}/v1"

    def reply_text(
        self,
        text: str,
        usage: tuple[int, int] = (10, 5),
        finish_reason: str = "stop",
        model: str = "gpt-test",
    ) -> None:
        """Queue a plain assistant reply."""
        self.push(_completion({"role": "assistant", "content": text}, usage, finish_reason, model))

    def reply_tool_calls(
        self, calls: list[tuple[str, str, dict[str, Any] | str]], usage: tuple[int, int] = (20, 8)
    ) -> None:
        """Queue a reply of tool calls ``(id, name, arguments)``; a str is sent verbatim."""
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": args if isinstance(args, str) else json.dumps(args),
                    },
                }
                for call_id, name, args in calls
            ],
        }
        self.push(_completion(message, usage, "tool_calls", "gpt-test"))

    def reply_error(
        self,
        status: int,
        message: str,
        type: str = "invalid_request_error",
        headers: dict[str, str] | None = None,
    ) -> None:
        """Queue an error in OpenAI's shape: ``{"error": {"message", "type", ...}}``."""
        body = {"error": {"message": message, "type": type, "param": None, "code": None}}
        self.push(body, status=status, headers=headers)


def _completion(
    message: dict[str, Any], usage: tuple[int, int], finish_reason: str, model: str
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}
        ],
        "usage": {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": usage[0] + usage[1],
        },
    }


class AnthropicWireServer(WireServer):
    """Speaks ``POST /v1/messages``; give an SDK :attr:`base_url` (the root)."""

    def __init__(self) -> None:
        super().__init__("/v1/messages")

    def reply_content(
        self,
        content: list[dict[str, Any]],
        usage: tuple[int, int] = (10, 5),
        stop_reason: str = "end_turn",
        model: str = "claude-test",
    ) -> None:
        """Queue a reply with these content blocks."""
        self.push(
            {
                "id": "msg_test",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": content,
                "stop_reason": stop_reason,
                "stop_sequence": None,
                "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
            }
        )

    def reply_text(self, text: str, usage: tuple[int, int] = (10, 5)) -> None:
        """Queue a plain text reply."""
        self.reply_content([{"type": "text", "text": text}], usage)

    def reply_tool_use(
        self,
        calls: list[tuple[str, str, dict[str, Any]]],
        text: str = "",
        usage: tuple[int, int] = (20, 8),
    ) -> None:
        """Queue a reply of ``tool_use`` blocks ``(id, name, input)``, after optional text."""
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        blocks += [
            {"type": "tool_use", "id": call_id, "name": name, "input": args}
            for call_id, name, args in calls
        ]
        self.reply_content(blocks, usage, stop_reason="tool_use")

    def reply_error(
        self,
        status: int,
        message: str,
        type: str = "invalid_request_error",
        headers: dict[str, str] | None = None,
    ) -> None:
        """Queue an error in Anthropic's shape: ``{"type": "error", "error": {...}}``."""
        body = {"type": "error", "error": {"type": type, "message": message}}
        self.push(body, status=status, headers=headers)


__all__ = [
    "AnthropicWireServer",
    "OpenAIWireServer",
    "WireReply",
    "WireRequest",
    "WireServer",
]
