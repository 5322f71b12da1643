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
from collections.abc import Sequence
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
    frames: list[str] | None = None
    """For a streamed answer: the server-sent event frames, each written and flushed on
    its own (the body is then ignored)."""


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

    def push_frames(self, frames: list[str]) -> None:
        """Queue a streamed reply: ``text/event-stream`` frames, flushed one by one."""
        with self._lock:
            self._replies.append(WireReply(frames=list(frames)))

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
            reply = _as_streamed(request, server._answer(request))
            if reply.delay and server._stopping.wait(reply.delay):
                return
            if reply.frames is not None:
                self._stream(reply.frames)
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

        def _stream(self, frames: list[str]) -> None:
            try:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                for frame in frames:
                    self.wfile.write(frame.encode())
                    self.wfile.flush()
            except OSError:
                pass
            self.close_connection = True

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


def openai_frames(
    texts: list[str],
    *,
    calls: Sequence[tuple[str, str, list[str]]] = (),
    usage: tuple[int, int] = (10, 5),
    finish_reason: str = "stop",
    model: str = "gpt-test",
) -> list[str]:
    """A streamed chat completion as OpenAI sends it: a role chunk, one chunk per text
    piece, tool calls ``(id, name, argument pieces)`` in pieces (the first with id and
    name), the finish chunk, the usage chunk (``stream_options.include_usage``), [DONE]."""

    def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> str:
        body: dict[str, Any] = {
            "id": "chatcmpl-test",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": model,
            "choices": []
            if delta is None
            else [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
            "usage": None,
            **extra,
        }
        return f"data: {json.dumps(body)}\n\n"

    frames = [chunk({"role": "assistant", "content": ""})]
    frames += [chunk({"content": text}) for text in texts]
    for index, (call_id, name, pieces) in enumerate(calls):
        frames.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                }
            )
        )
        frames += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            for piece in pieces
        ]
    frames.append(chunk({}, finish_reason))
    usage_body = {
        "prompt_tokens": usage[0],
        "completion_tokens": usage[1],
        "total_tokens": usage[0] + usage[1],
    }
    frames.append(chunk(None, usage=usage_body))
    frames.append("data: [DONE]\n\n")
    return frames


def anthropic_frames(
    texts: list[str],
    *,
    calls: Sequence[tuple[str, str, list[str]]] = (),
    usage: tuple[int, int] = (10, 5),
    stop_reason: str = "end_turn",
    model: str = "claude-test",
) -> list[str]:
    """A streamed Messages reply as Anthropic sends it: ``message_start``, a text block
    in ``text_delta`` pieces, ``tool_use`` blocks in ``input_json_delta`` pieces,
    ``message_delta`` (stop reason, output tokens), ``message_stop``."""

    def event(kind: str, **body: Any) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **body})}\n\n"

    start = {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": 1},
    }
    frames = [event("message_start", message=start), 'event: ping\ndata: {"type": "ping"}\n\n']
    index = 0
    if texts:
        frames.append(
            event("content_block_start", index=0, content_block={"type": "text", "text": ""})
        )
        frames += [
            event("content_block_delta", index=0, delta={"type": "text_delta", "text": text})
            for text in texts
        ]
        frames.append(event("content_block_stop", index=0))
        index = 1
    for call_id, name, pieces in calls:
        block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
        frames.append(event("content_block_start", index=index, content_block=block))
        frames += [
            event(
                "content_block_delta",
                index=index,
                delta={"type": "input_json_delta", "partial_json": piece},
            )
            for piece in pieces
        ]
        frames.append(event("content_block_stop", index=index))
        index += 1
    frames.append(
        event(
            "message_delta",
            delta={"stop_reason": stop_reason, "stop_sequence": None},
            usage={"output_tokens": usage[1]},
        )
    )
    frames.append(event("message_stop"))
    return frames


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
    "anthropic_frames",
    "openai_frames",
]


def _as_streamed(request: WireRequest, reply: WireReply) -> WireReply:
    """``reply`` as the server sends it to a request that asked to stream: a whole
    completion queued as JSON goes out as the frames of the same reply, as the real
    servers do; an error, or a reply queued as frames, goes out as it is."""
    asked = isinstance(request.body, dict) and request.body.get("stream") is True
    body = reply.body
    if not asked or reply.frames is not None or reply.status != 200 or not isinstance(body, dict):
        return reply
    if "choices" in body:  # an OpenAI chat completion
        choice = body["choices"][0]
        message = choice.get("message") or {}
        calls = [
            (call["id"], call["function"]["name"], [call["function"]["arguments"]])
            for call in message.get("tool_calls") or []
        ]
        used = body.get("usage") or {}
        frames = openai_frames(
            [message["content"]] if message.get("content") else [],
            calls=calls,
            usage=(used.get("prompt_tokens", 0), used.get("completion_tokens", 0)),
            finish_reason=choice.get("finish_reason") or "stop",
            model=body.get("model", "gpt-test"),
        )
    elif body.get("type") == "message":  # an Anthropic message
        blocks = body.get("content") or []
        used = body.get("usage") or {}
        frames = anthropic_frames(
            [b["text"] for b in blocks if b.get("type") == "text"],
            calls=[
                (b["id"], b["name"], [json.dumps(b.get("input", {}))])
                for b in blocks
                if b.get("type") == "tool_use"
            ],
            usage=(used.get("input_tokens", 0), used.get("output_tokens", 0)),
            stop_reason=body.get("stop_reason") or "end_turn",
            model=body.get("model", "claude-test"),
        )
    else:
        return reply
    return WireReply(status=200, delay=reply.delay, frames=frames)
