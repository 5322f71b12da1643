"""Model adapters: a scripted model for tests, OpenAI-compatible and Anthropic models.

``load_model(spec)`` builds a model from a spec string:

- ``scripted:PATH`` — rules from a JSON or YAML file (:class:`ScriptedModel`);
- ``openai:MODEL`` — the OpenAI chat completions API, or any server that speaks it
  (:class:`~plait.models.openai.OpenAIModel`; ``pip install 'plait[openai]'``);
- ``anthropic:MODEL`` — the Anthropic Messages API
  (:class:`~plait.models.anthropic.AnthropicModel`; ``pip install 'plait[anthropic]'``).

The contract every adapter keeps is written once, in :mod:`plait.models._base`.
:func:`check_model_spec` checks a spec without building a client or touching the
network, so a bad one is refused before a run is queued.

Models sit above tools (a model is told of its tools as :class:`~plait.tools.ToolSpec`)
and below actors, decisions and graphs, which call them; an adapter knows nothing of
runs or graphs beyond the call context it is handed.
"""

from __future__ import annotations

import os
from typing import Any

from plait.errors import ConfigError
from plait.models._base import (
    TOOL_CHOICE_WORDS,
    CallContext,
    Message,
    Model,
    ModelReply,
    OnDelta,
    Role,
    ToolCall,
    ToolChoice,
    Usage,
)
from plait.models._sdk import import_sdk
from plait.models.anthropic import AnthropicModel
from plait.models.openai import OpenAIModel
from plait.models.pricing import DEFAULT_PRICES, cost_of, price_of
from plait.models.scripted import ScriptedCall, ScriptedModel, ScriptRule

SUPPORTED_PREFIXES = ("scripted", "openai", "anthropic")


def load_model(spec: str, **options: Any) -> Model:
    """Build the model a spec string names.

    Args:
        spec: ``scripted:PATH``, ``openai:MODEL`` or ``anthropic:MODEL``.
        **options: keyword arguments for the adapter (``base_url``, ``max_retries``,
            ``timeout``...); a scripted model takes none.

    Raises:
        ConfigError: the prefix is unknown, the name is empty, an option does not
            apply, or the adapter cannot be configured (missing SDK or key).
    """
    prefix, name = _split(spec)
    if prefix == "scripted":
        if options:
            raise ConfigError(f"a scripted model takes no options, got {sorted(options)}")
        return ScriptedModel.from_file(name)
    if prefix == "openai":
        return _build(OpenAIModel, name, options)
    return _build(AnthropicModel, name, options)


def check_model_spec(spec: str) -> None:
    """Refuse a model spec that cannot work, without building a client or any network.

    Checks the ``PREFIX:NAME`` form, that a scripted file loads, that the provider's
    SDK imports, and that a key or a base URL is configured for it.

    Raises:
        ConfigError: what is wrong, and how to fix it.
    """
    prefix, name = _split(spec)
    if prefix == "scripted":
        ScriptedModel.from_file(name)
        return
    import_sdk(prefix, prefix)
    upper = prefix.upper()
    if not (os.environ.get(f"{upper}_API_KEY") or os.environ.get(f"{upper}_BASE_URL")):
        local = " (or OPENAI_BASE_URL for a local server)" if prefix == "openai" else ""
        raise ConfigError(f"no API key for {spec}: set {upper}_API_KEY{local}")


def _split(spec: str) -> tuple[str, str]:
    prefix, _, name = spec.partition(":")
    if prefix not in SUPPORTED_PREFIXES or not name:
        raise ConfigError(
            f"cannot load model {spec!r}: expected PREFIX:NAME with a prefix among "
            f"{', '.join(SUPPORTED_PREFIXES)} (e.g. 'openai:gpt-4o-mini')"
        )
    return prefix, name


def _build(cls: type[OpenAIModel | AnthropicModel], name: str, options: dict[str, Any]) -> Model:
    try:
        return cls(name, **options)
    except TypeError as exc:
        raise ConfigError(f"bad option for {cls.__name__}: {exc}") from exc


__all__ = [
    "DEFAULT_PRICES",
    "SUPPORTED_PREFIXES",
    "TOOL_CHOICE_WORDS",
    "AnthropicModel",
    "CallContext",
    "Message",
    "Model",
    "ModelReply",
    "OnDelta",
    "OpenAIModel",
    "Role",
    "ScriptRule",
    "ScriptedCall",
    "ScriptedModel",
    "ToolCall",
    "ToolChoice",
    "Usage",
    "check_model_spec",
    "cost_of",
    "load_model",
    "price_of",
]
