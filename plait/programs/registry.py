"""Programs as Python callables: collected in a catalog by name, or referenced by import path.

A program callable is an ``async def``. It receives, by parameter name, what it asks
for: ``input`` (validated into its input model first, when it declares one) and any of
the capabilities ``mesh``, ``agents``, ``programs``, ``decisions``, ``tools`` and
``payload``. Its input and output models come from the decorator or, failing that, from
the annotations of ``input`` and of the return value, when those are pydantic models.

A :class:`ProgramCatalog` holds callables by name; a serving process is handed one
(``serve(..., programs=...)``) and looks refs up in it only. ``@plait.program``
collects into :data:`DEFAULT_CATALOG`, which the CLI hands its processes explicitly.
A ``"pkg.module:fn"`` ref needs no catalog: it is imported, and a function that a
decorator or a graph builder described carries its description with it.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import re
import sys
from collections.abc import Awaitable, Callable, Iterable
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


PROGRAM_ATTRIBUTE = "__plait_program__"
"""The attribute on a described function holding its :class:`CallableProgram`, so an
import path finds the description (a graph node's adapter) without any catalog."""


class ProgramCatalog:
    """Callable programs by name: what one serving process (or session) can run by name.

    Args:
        programs: the programs to start with, each under its ``ref``.
    """

    def __init__(self, programs: Iterable[CallableProgram] = ()) -> None:
        self._by_ref: dict[str, CallableProgram] = {}
        for found in programs:
            self.add(found)

    def add(self, found: CallableProgram) -> None:
        """Hold ``found`` under its ``ref`` (a later one of the same ref replaces it)."""
        self._by_ref[found.ref] = found
        with contextlib.suppress(AttributeError, TypeError):  # a bound method, a builtin
            setattr(found.fn, PROGRAM_ATTRIBUTE, found)

    def program(
        self,
        name: str,
        *,
        input: type[BaseModel] | None = None,
        output: type[BaseModel] | None = None,
    ) -> Callable[[F], F]:
        """Add an async callable as the program ``name`` (a decorator)."""

        def add(fn: F) -> F:
            found = describe(fn, name, input_model=input, output_model=output)
            self._by_ref[name] = found
            with contextlib.suppress(AttributeError, TypeError):
                setattr(fn, PROGRAM_ATTRIBUTE, found)
            return fn

        return add

    def get(self, name: str) -> CallableProgram | None:
        """The program held as ``name``, if any."""
        return self._by_ref.get(name)

    def find(self, ref: str) -> CallableProgram | None:
        """The callable ``ref`` names: held here, or an import path; None if neither.

        Raises:
            ProgramNotFound: ``ref`` is an import path that does not import.
        """
        found = self._by_ref.get(ref)
        if found is not None:
            return found
        return import_program(ref) if ":" in ref else None

    def names(self) -> list[str]:
        """The names held, sorted."""
        return sorted(self._by_ref)

    def __contains__(self, name: object) -> bool:
        return name in self._by_ref


DEFAULT_CATALOG = ProgramCatalog()
"""What ``@plait.program`` and graph builders collect into as their modules are
imported; the CLI hands it to the processes it serves. Nothing looks a ref up here
unless it was handed this catalog."""


def register(found: CallableProgram) -> None:
    """Add ``found`` to :data:`DEFAULT_CATALOG` under its ``ref`` (a name, or the import
    path it answers to).

    A graph builder registers its function nodes under their import paths, so an
    in-session run finds each node's adapter rather than the bare function.
    """
    DEFAULT_CATALOG.add(found)


def program(
    name: str,
    *,
    input: type[BaseModel] | None = None,
    output: type[BaseModel] | None = None,
) -> Callable[[F], F]:
    """Add an async callable to :data:`DEFAULT_CATALOG` as the program ``name``.

    Example::

        @plait.program("graph-fetch")
        async def fetch(input: FetchInput, tools: Tools) -> dict[str, Any]: ...
    """
    return DEFAULT_CATALOG.program(name, input=input, output=output)


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


_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
_IMPORT_REF = re.compile(rf"{_DOTTED}:{_DOTTED}")


def check_import_ref(ref: str) -> tuple[str, str]:
    """The module and qualified name of an import-path ref, checked as text only.

    Raises:
        ProgramNotFound: ``ref`` is not ``pkg.module:function`` of dotted Python names
            (a relative ``.:x`` included).
    """
    if not _IMPORT_REF.fullmatch(ref):
        raise ProgramNotFound(
            f"program ref {ref!r} is not of the form pkg.module:function "
            "(dotted Python names, no leading dot)"
        )
    module_name, _, qualname = ref.partition(":")
    return module_name, qualname


def import_program(ref: str) -> CallableProgram:
    """The callable a ``"pkg.module:qualname"`` ref names: the description a decorator
    or graph builder attached to it, else one read from its signature.

    Raises:
        ProgramNotFound: the ref is malformed, the module does not import, or has no
            such async callable.
    """
    module_name, qualname = check_import_ref(ref)
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ProgramNotFound(f"program {ref!r}: cannot import {module_name}: {exc}") from None
    return _in_module(ref, target, module_name, qualname)


def loaded_program(ref: str, programs: ProgramCatalog | None = None) -> CallableProgram | None:
    """What :meth:`ProgramCatalog.find` finds for ``ref`` without importing anything.

    A program ``programs`` holds, or an import path whose module this process has
    imported already; None for a saved program's name, or an import path whose module
    is not loaded (only running it imports that). Graph validation uses this: a graph
    that came over the network must not make the server import a module it names.

    Raises:
        ProgramNotFound: a malformed import path, or a loaded module without the
            callable.
    """
    found = programs.get(ref) if programs is not None else None
    if found is not None or ":" not in ref:
        return found
    module_name, qualname = check_import_ref(ref)
    module = sys.modules.get(module_name)
    return None if module is None else _in_module(ref, module, module_name, qualname)


def _in_module(ref: str, module: Any, module_name: str, qualname: str) -> CallableProgram:
    """The program ``qualname`` of an imported ``module``."""
    target = module
    for part in qualname.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise ProgramNotFound(f"program {ref!r}: {module_name} has no {qualname}")
    known = getattr(target, PROGRAM_ATTRIBUTE, None)
    if isinstance(known, CallableProgram):
        return known
    return describe(target, ref)


def _model(hint: Any) -> type[BaseModel] | None:
    return hint if isinstance(hint, type) and issubclass(hint, BaseModel) else None


__all__ = [
    "CAPABILITY_NAMES",
    "DEFAULT_CATALOG",
    "PROGRAM_ATTRIBUTE",
    "CallableProgram",
    "ProgramCatalog",
    "ProgramFn",
    "check_import_ref",
    "describe",
    "import_program",
    "loaded_program",
    "program",
    "register",
]
