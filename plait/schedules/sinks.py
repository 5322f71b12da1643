"""Where a scheduled run's result goes when it ends: stdout, a file, or a webhook.

Each delivery is one JSON object (:func:`result_body`): run id, status, output, error,
schedule id, fire time. A webhook gets it as the body of a POST, signed with
``X-Plait-Signature: sha256=<hex>`` (HMAC-SHA256 over the exact body) when the schedule
names a secret. Delivery is at least once: a worker that dies between a sink taking the
result and the schedule recording it delivers it again, so receivers key on ``run_id``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx

from plait.errors import ConfigError, DeliveryFailed, ToolError
from plait.schedules.model import (
    SECRET_ENV_PREFIX,
    WEBHOOK_ALLOW_ENV,
    confined_sink_file,
    webhook_allowed_hosts,
)
from plait.tools.http_guard import PinnedTransport

SIGNATURE_HEADER = "X-Plait-Signature"
"""The webhook header carrying ``sha256=<hex>``, the body's HMAC-SHA256."""

WEBHOOK_TIMEOUT_S = 10.0
"""How long one webhook POST may take before the try counts as failed."""


def result_body(result: dict[str, Any]) -> bytes:
    """The JSON bytes a sink receives (keys sorted, so the signature is reproducible)."""
    return json.dumps(result, sort_keys=True, ensure_ascii=False, default=str).encode()


def sign(body: bytes, secret: str) -> str:
    """The ``X-Plait-Signature`` value of ``body`` under ``secret``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def secret_value(name: str) -> str:
    """The secret named ``name`` from this process's environment.

    Raises:
        DeliveryFailed: ``PLAIT_SECRET_<NAME>`` is not set here.
    """
    value = os.environ.get(SECRET_ENV_PREFIX + name)
    if not value:
        raise DeliveryFailed(
            f"secret {name!r} is not set on this worker: export {SECRET_ENV_PREFIX}{name}"
        )
    return value


async def deliver(sink: str, result: dict[str, Any], *, secret: str | None = None) -> None:
    """Hand ``result`` to ``sink`` (as stored by :func:`~plait.schedules.model.parse_sink`).

    Raises:
        DeliveryFailed: the sink did not take it (a file not writable, a webhook that
            answered other than 2xx or could not be reached, a secret not set).
    """
    body = result_body(result)
    kind, _, target = sink.partition(":")
    if kind == "stdout":
        sys.stdout.write(body.decode() + "\n")
        sys.stdout.flush()
    elif kind == "file":
        try:  # checked again here: this worker's folder is the one that counts
            path = confined_sink_file(Path(target))
        except ConfigError as exc:
            raise DeliveryFailed(str(exc)) from None
        await anyio.to_thread.run_sync(_append, path, body)
    elif kind == "webhook":
        await _post(target, body, secret_value(secret) if secret else None)
    else:
        raise DeliveryFailed(f"unknown sink {sink!r}")


def _append(path: Path, body: bytes) -> None:
    try:
        with path.open("ab") as out:  # one write of one line, appended
            out.write(body + b"\n")
    except OSError as exc:
        raise DeliveryFailed(f"cannot append to {path}: {exc.strerror or exc}") from exc


async def _post(url: str, body: bytes, secret: str | None) -> None:
    headers = {"Content-Type": "application/json", "User-Agent": "plait-schedules"}
    if secret is not None:
        headers[SIGNATURE_HEADER] = sign(body, secret)
    # The transport of http_get: it connects only to the public address it checked, so
    # a name resolving to loopback, a private network or cloud metadata is refused.
    transport = PinnedTransport(allow_hosts=webhook_allowed_hosts())
    try:
        async with httpx.AsyncClient(timeout=WEBHOOK_TIMEOUT_S, transport=transport) as client:
            answer = await client.post(url, content=body, headers=headers)
    except ToolError as exc:  # ToolNotPermitted too: a refused or unresolvable host
        host = httpx.URL(url).host
        raise DeliveryFailed(
            f"webhook {url} refused: {host!r} does not resolve to a public address "
            f"(list it in {WEBHOOK_ALLOW_ENV} on the worker to allow it)"
        ) from exc
    except httpx.HTTPError as exc:
        raise DeliveryFailed(f"webhook {url} could not be reached: {exc}") from exc
    if not answer.is_success:
        raise DeliveryFailed(f"webhook {url} answered {answer.status_code}")


__all__ = [
    "SIGNATURE_HEADER",
    "WEBHOOK_TIMEOUT_S",
    "deliver",
    "result_body",
    "secret_value",
    "sign",
]
