"""Registries to serve with: the built-in tools, plus tools a Python module offers.

A separate module from :mod:`plait.tools.registry` because it names the built-in
tools, and those are written against the registry.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from plait.errors import ConfigError
from plait.tools.builtin import BUILTIN_TOOLS
from plait.tools.registry import ToolRegistry


def default_registry() -> ToolRegistry:
    """A fresh registry holding the built-in tools (``http_get``, ``read_file``, ``bash``)."""
    return ToolRegistry(BUILTIN_TOOLS)


def load_tools(ref: str) -> ToolRegistry:
    """The tools a Python module offers, by reference ``pkg.module[:NAME]``.

    ``NAME`` (default ``registry``, else the module's only ToolRegistry) is a
    module-level :class:`ToolRegistry`, or a function of no arguments returning one.

    Raises:
        ConfigError: the module cannot be imported, or names no such registry.
    """
    module_name, _, attr = ref.strip().partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(
            f"cannot load tools {ref!r}: {exc} (is the module on PYTHONPATH?)"
        ) from exc
    if not attr:
        found = [n for n, v in vars(module).items() if isinstance(v, ToolRegistry)]
        attr = "registry" if "registry" in found or len(found) != 1 else found[0]
    value = getattr(module, attr, None)
    if callable(value) and not isinstance(value, ToolRegistry):
        value = value()
    if not isinstance(value, ToolRegistry):
        raise ConfigError(
            f"cannot load tools {ref!r}: {module_name}.{attr} is not a ToolRegistry "
            "or a function returning one; name it as MODULE:NAME"
        )
    return value


def serving_registry(refs: Iterable[str] = ()) -> ToolRegistry:
    """The built-in tools plus those of each ``pkg.module[:NAME]`` in ``refs``.

    Raises:
        ConfigError: a reference cannot be loaded, or two offer the same tool name.
    """
    registry = default_registry()
    for ref in refs:
        for loaded in load_tools(ref):
            registry.register(loaded)
    return registry


__all__ = ["default_registry", "load_tools", "serving_registry"]
