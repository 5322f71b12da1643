"""Programs as Python callables: registered by name, or referenced by import path.

A program callable is an ``async def``. It receives, by parameter name, what it asks
for: ``input`` (validated into its input model first, when it declares one) and any of
the capabilities ``mesh``, ``agents``, ``programs``, ``decisions``, ``tools`` and
``payload``. Its input and output models come from the decorator or, failing that, from
the annotations of ``input`` and of the return value, when those are pydantic models.

The registry is filled by importing the modules that define programs: a worker that
imports a module finds its programs, and a ``"pkg.module:fn"`` ref needs no registration.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar, get_type_hints

from pydantic import BaseModel

from plait.errors import ProgramNotFound

ProgramFn = Callable[..., Awaitable[Any]]
"""An async program callable."""

F = TypeVar("F", bound=ProgramFn)

CAPABILITY_NAMES = ("mesh", "agents", "programs", "decisions", "tools", "payload")
"""The capabilities program code may ask for, by parameter (or global) name."""


@dataclass(frozen=True, slots=True)
class CallableProgram:
    """A program that is a Python callable.

    Attributes:
        ref: how it is referred to: its registered name or ``module:qualname``.
        fn: the async callable.
        input_model: the pydantic model its input is validated into, if any.
        output_model: the pydantic model its result is validated into, if any.
        wants: the parameter names it takes (``input`` and capability names).
    """

    ref: str
    fn: ProgramFn
    input_model: type[BaseModel] | None
    output_model: type[BaseModel] | None
    wants: tuple[str, ...]


_REGISTERED: dict[str, CallableProgram] = {}


def register(found: CallableProgram) -> None:
    """Register ``found`` under its ``ref`` (a name, or the import path it answers to).

    A graph builder registers its function nodes under their import paths, so a worker
    importing the module finds each node's adapter rather than the bare function.
    """
    _REGISTERED[found.ref] = found


def program(
    name: str,
    *,
    input: type[BaseModel] | None = None,
    output: type[BaseModel] | None = None,
) -> Callable[[F], F]:
    """Register an async callable as the program ``name``.

    Example::

        @plait.program("graph-fetch")
        async def fetch(input: FetchInput, tools: Tools) -> dict[str, Any]: ...
    """

    def register(fn: F) -> F:
        _REGISTERED[name] = describe(fn, name, input_model=input, output_model=output)
        return fn

    return register


def describe(
    fn: ProgramFn,
    ref: str,
    *,
    input_model: type[BaseModel] | None = None,
    output_model: type[BaseModel] | None = None,
) -> CallableProgram:
    """``fn`` as a :class:`CallableProgram`, its models read from its annotations if not given.

    Raises:
        ProgramNotFound: ``fn`` is not an async callable, or asks for a parameter no
            program is given.
    """
    if not inspect.iscoroutinefunction(fn):
        raise ProgramNotFound(f"program {ref!r} is not an async function: write `async def`")
    params = inspect.signature(fn).parameters
    unknown = [p for p in params if p not in ("input", *CAPABILITY_NAMES)]
    if unknown:
        raise ProgramNotFound(
            f"program {ref!r} takes {', '.join(unknown)}, which no program is given "
            f"(it may take input, {', '.join(CAPABILITY_NAMES)})"
        )
    try:
        hints = get_type_hints(fn)
    except (NameError, TypeError):
        hints = {}
    return CallableProgram(
        ref=ref,
        fn=fn,
        input_model=input_model or _model(hints.get("input")),
        output_model=output_model or _model(hints.get("return")),
        wants=tuple(params),
    )


def registered(name: str) -> CallableProgram | None:
    """The program registered as ``name``, if any."""
    return _REGISTERED.get(name)


def import_program(ref: str) -> CallableProgram:
    """The callable a ``"pkg.module:qualname"`` ref names (registered under that ref).

    Raises:
        ProgramNotFound: the module does not import, or has no such async callable.
    """
    module_name, _, qualname = ref.partition(":")
    if not module_name or not qualname:
        raise ProgramNotFound(f"program ref {ref!r} is not of the form pkg.module:function")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ProgramNotFound(f"program {ref!r}: cannot import {module_name}: {exc}") from None
    # Importing the module may register the ref itself (a graph builder's node does).
    found = registered(ref)
    if found is not None:
        return found
    for part in qualname.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise ProgramNotFound(f"program {ref!r}: {module_name} has no {qualname}")
    known = next((p for p in _REGISTERED.values() if p.fn is target), None)
    if known is not None:
        return known
    return describe(target, ref)


def find_callable(ref: str) -> CallableProgram | None:
    """The callable program ``ref`` names: registered, or an import path; None if neither."""
    found = registered(ref)
    if found is not None:
        return found
    return import_program(ref) if ":" in ref else None


def _model(hint: Any) -> type[BaseModel] | None:
    return hint if isinstance(hint, type) and issubclass(hint, BaseModel) else None


__all__ = [
    "CAPABILITY_NAMES",
    "CallableProgram",
    "ProgramFn",
    "describe",
    "find_callable",
    "import_program",
    "program",
    "register",
    "registered",
]
