"""What the HTTP adapters share: importing a provider SDK lazily and translating its errors.

The official ``openai`` and ``anthropic`` SDKs raise errors of the same shape
(``RateLimitError``, ``APITimeoutError``, ``APIConnectionError``, ``APIStatusError``
under one base class), so one translation serves both.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from plait.errors import (
    ConfigError,
    ModelConnectionError,
    ModelError,
    ModelRateLimited,
    ModelServerError,
    ModelTimeout,
)


def import_sdk(module: str, extra: str) -> ModuleType:
    """Import a provider SDK, or say how to install it.

    Raises:
        ConfigError: the SDK is not installed.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(
            f"the {module!r} package is needed for {module} models: pip install 'plait[{extra}]'"
        ) from exc


def provider_message(body: object, fallback: str) -> str:
    """The provider's own error message from an error body, else ``fallback``.

    Both SDKs hand over the ``"error"`` object of a JSON error body
    (``{"message": ..., "type": ...}``); some servers send the message at the top level
    or a bare string.
    """
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(inner, str) and inner:
            return inner
    if isinstance(body, str) and body.strip():
        return body.strip()
    return fallback


def translate_error(sdk: ModuleType, exc: Exception, provider: str, model: str) -> ModelError:
    """The plait error for an SDK error; the caller raises it ``from exc``.

    Args:
        sdk: the SDK module the error came from.
        exc: an instance of the SDK's base error class.
        provider: ``"openai"`` or ``"anthropic"``, for the message.
        model: the model name, for the message.
    """
    where = f"{provider} model {model!r}"
    # Order matters: RateLimitError is an APIStatusError, APITimeoutError an
    # APIConnectionError.
    if isinstance(exc, sdk.RateLimitError):
        message = provider_message(exc.body, exc.message)
        return ModelRateLimited(f"{where}: rate limited (HTTP 429) after retries: {message}")
    if isinstance(exc, sdk.APITimeoutError):
        return ModelTimeout(f"{where}: the request timed out after retries ({_url(exc)})")
    if isinstance(exc, sdk.APIConnectionError):
        return ModelConnectionError(f"{where}: cannot reach {_url(exc)}: {_cause(exc)}")
    if isinstance(exc, sdk.APIStatusError):
        message = provider_message(exc.body, exc.message)
        # A server-side failure (500, 503, 529 overloaded) may pass; a 4xx will not.
        kind = ModelServerError if exc.status_code >= 500 else ModelError
        return kind(f"{where}: HTTP {exc.status_code}: {message}")
    return ModelError(f"{where}: {exc}")


def _url(exc: Any) -> str:
    request = getattr(exc, "request", None)
    return str(request.url) if request is not None else "the endpoint"


def _cause(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    return str(cause) if cause is not None and str(cause) else str(exc)


__all__ = ["import_sdk", "provider_message", "translate_error"]
