"""The callable side of tools: :class:`Tool`, :class:`ToolContext` and :class:`ToolRegistry`.

A tool's arguments are checked against its JSON schema before its handler ever runs,
and whatever goes wrong inside a handler comes out as a :class:`~plait.errors.ToolError`
naming the tool. Cancellation always propagates.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import jsonschema
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.protocols import Validator

from plait.errors import (
    ConfigError,
    ToolArgumentsInvalid,
    ToolError,
    ToolNotFound,
)
from plait.profiles import AgentProfile
from plait.tools.spec import ToolSpec

ToolHandler = Callable[[dict[str, Any], "ToolContext"], Awaitable[Any]]
"""An async function taking the validated arguments and a :class:`ToolContext`."""

DEFAULT_TIMEOUT_S = 60.0
"""How long a tool call may run when the caller sets no limit."""

TIMEOUT_GRACE_S = 1.0
"""Extra time the registry allows past ``timeout_s``, so a tool that enforces the same
limit itself (``bash``) gets to report it before being cancelled."""

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_SOURCED_NAME = re.compile(r"^[a-z][a-z0-9-]{0,31}\.[A-Za-z0-9_-]{1,64}$")

SOURCE_SEPARATOR = "__"
"""What stands for the ``.`` of a sourced tool name (``files.read_file``) in the name a
model is told (``files__read_file``): model providers accept no dots."""
_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Where and for whom a tool call runs.

    Attributes:
        run_id: the durable run making the call, or None in-session.
        node: the graph node making the call (empty outside a graph).
        cwd: the workspace: file and shell tools resolve paths against it, and file
            tools stay inside it.
        timeout_s: the most seconds the call may take.
        profile: the agent making the call (its ``allow_hosts``, ``tool_env`` and
            ``sandbox`` apply); None applies none.
        protected: files tools never touch (the mesh's own; ``.plait/`` always is).
    """

    run_id: str | None = None
    node: str = ""
    cwd: Path = field(default_factory=Path.cwd)
    timeout_s: float = DEFAULT_TIMEOUT_S
    profile: AgentProfile | None = None
    protected: tuple[Path, ...] = ()


@dataclass(frozen=True, slots=True)
class Tool:
    """A tool: what a model is told of it, its safety flags and its handler.

    Attributes:
        name: letters, digits, ``_`` and ``-``, at most 64 (what model providers accept);
            or ``SOURCE.NAME`` for a tool a source offers (an MCP server's), told to
            models as ``SOURCE__NAME``.
        description: what the tool does, for the model.
        parameters: a JSON schema of the arguments object.
        handler: the async function that does the work.
        read_only: changes nothing outside plait; parallel workers may use only these.
        external: brings in outside content (a fetched page, an upload); a node that
            reads such output runs untrusted (see :mod:`plait.tools.trust`).
        requires_approval: a person must approve each call unless the agent has it
            pre-approved and the node runs trusted (see :func:`plait.tools.gate`).
        idempotent: calling it again with the same arguments does no more than once:
            a call left in doubt by a crash is retried, as a read-only one is.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    handler: ToolHandler = field(repr=False)
    read_only: bool = False
    external: bool = False
    requires_approval: bool = False
    idempotent: bool = False
    _spec: ToolSpec = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        told = model_name(self.name)
        if not (_NAME.match(self.name) or _SOURCED_NAME.match(self.name)) or len(told) > 64:
            raise ConfigError(
                f"invalid tool name {self.name!r}: use 1-64 letters, digits, '_' or '-'"
            )
        _validator_for(self.name, self.parameters)
        spec = ToolSpec(name=told, description=self.description, parameters=self.parameters)
        object.__setattr__(self, "_spec", spec)  # built once: models get it on every turn

    def spec(self) -> ToolSpec:
        """What a model is told of this tool (one shared object: do not change it)."""
        return self._spec

    @property
    def retry_safe(self) -> bool:
        """Whether a call left in doubt may simply be made again (read-only or idempotent)."""
        return self.read_only or self.idempotent


def model_name(name: str) -> str:
    """The name a model is told for tool ``name`` (``files.read_file`` → ``files__read_file``)."""
    return name.replace(".", SOURCE_SEPARATOR, 1)


def names_match(name: str, patterns: Iterable[str]) -> bool:
    """Whether tool ``name`` is among ``patterns``: listed itself, or its source's
    ``SOURCE.*`` is (``files.*`` covers ``files.read_file``)."""
    source, dot, _ = name.partition(".")
    wildcard = f"{source}.*" if dot else None
    return any(p == name or p == wildcard for p in patterns)


def tool(
    name: str | None = None,
    *,
    description: str | None = None,
    parameters: dict[str, Any] | None = None,
    read_only: bool = False,
    external: bool = False,
    requires_approval: bool = False,
    idempotent: bool = False,
) -> Callable[[ToolHandler], Tool]:
    """Build a :class:`Tool` from an async function.

    Args:
        name: the tool name; defaults to the function's name.
        description: defaults to the first paragraph of the function's docstring.
        parameters: the arguments' JSON schema; defaults to an object with no
            declared properties.
        read_only: see :class:`Tool`.
        external: see :class:`Tool`.
        requires_approval: see :class:`Tool`.
        idempotent: see :class:`Tool`.

    Returns:
        A decorator turning ``async def f(args, ctx)`` into a :class:`Tool`.
    """

    def build(fn: ToolHandler) -> Tool:
        doc = inspect.getdoc(fn) or ""
        return Tool(
            name=name or str(getattr(fn, "__name__", "")),
            description=description if description is not None else doc.split("\n\n")[0],
            parameters=parameters if parameters is not None else dict(_EMPTY_SCHEMA),
            handler=fn,
            read_only=read_only,
            external=external,
            requires_approval=requires_approval,
            idempotent=idempotent,
        )

    return build


class ToolRegistry:
    """The tools a process can call, by name.

    Example:
        >>> registry = ToolRegistry()
        >>> registry.register(my_tool)
        >>> await registry.call("my_tool", {"x": 1}, ToolContext(node="n"))
    """

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._validators: dict[str, Validator] = {}
        for t in tools:
            self.register(t)

    def register(self, tool: Tool) -> Tool:
        """Add ``tool`` and return it.

        Raises:
            ConfigError: a tool of the same name is already registered.
        """
        if tool.name in self._tools:
            raise ConfigError(f"a tool named {tool.name!r} is already registered")
        self._validators[tool.name] = _validator_for(tool.name, tool.parameters)
        self._tools[tool.name] = tool
        return tool

    def get(self, name: str) -> Tool:
        """The tool called ``name``.

        Raises:
            ToolNotFound: no such tool; the message lists the known ones.
        """
        try:
            return self._tools[name]
        except KeyError:
            told = self._told_as(name)
            if told is not None:
                return told
            known = ", ".join(sorted(self._tools)) or "none"
            raise ToolNotFound(f"unknown tool {name!r} (known tools: {known})") from None

    def _told_as(self, name: str) -> Tool | None:
        """The sourced tool a model named as ``SOURCE__NAME``, if there is one."""
        source, sep, rest = name.partition(SOURCE_SEPARATOR)
        return self._tools.get(f"{source}.{rest}") if sep else None

    def canonical(self, name: str) -> str:
        """The registered name of the tool a model called ``name`` (``files__read_file``
        is ``files.read_file``); ``name`` itself when it names no such tool."""
        if name in self._tools:
            return name
        found = self._told_as(name)
        return found.name if found is not None else name

    def names(self) -> list[str]:
        """The registered tool names, sorted."""
        return sorted(self._tools)

    def expand(self, patterns: Iterable[str]) -> list[str]:
        """The registered tools ``patterns`` name, in order, each once: a ``SOURCE.*``
        stands for every registered tool of that source; a name not registered is left
        out."""
        out: dict[str, None] = {}
        for pattern in patterns:
            if pattern.endswith(".*"):
                prefix = pattern[:-1]
                out.update((n, None) for n in self.names() if n.startswith(prefix))
            elif pattern in self._tools:
                out[pattern] = None
        return list(out)

    def unregister(self, names: Iterable[str]) -> None:
        """Remove the tools called ``names`` (those not registered are ignored)."""
        for name in names:
            self._tools.pop(name, None)
            self._validators.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._tools or (isinstance(name, str) and self._told_as(name) is not None)

    def __iter__(self) -> Iterator[Tool]:
        return iter([self._tools[n] for n in self.names()])

    def __len__(self) -> int:
        return len(self._tools)

    def specs(self, names: Iterable[str] | None = None) -> list[ToolSpec]:
        """The specs of ``names`` in the order given (all tools, sorted, when None).

        Raises:
            ToolNotFound: one of the names is not registered.
        """
        return [self.get(n).spec() for n in (self.names() if names is None else names)]

    def validate_args(self, name: str, args: Any) -> dict[str, Any]:
        """Check ``args`` against the tool's schema and return them.

        Raises:
            ToolNotFound: no such tool.
            ToolArgumentsInvalid: the arguments break the schema; the message lists
                every violation with its path (``args.max_bytes: -1 is less than ...``).
        """
        name = self.get(name).name
        if not isinstance(args, dict):
            raise ToolArgumentsInvalid(
                f"invalid arguments for tool {name!r}:\n"
                f"  args: expected an object, got {type(args).__name__}"
            )
        errors = sorted(
            self._validators[name].iter_errors(args), key=lambda e: (_path(e), e.message)
        )
        if errors:
            lines = "\n".join(f"  {_path(e)}: {e.message}" for e in errors)
            raise ToolArgumentsInvalid(
                f"{len(errors)} invalid argument(s) for tool {name!r}:\n{lines}"
            )
        return args

    async def call(self, name: str, args: Any, ctx: ToolContext) -> Any:
        """Validate ``args``, then run the tool within ``ctx.timeout_s``.

        Raises:
            ToolNotFound: no such tool.
            ToolArgumentsInvalid: the arguments break the schema; the handler never ran.
            ToolError: the handler failed or ran out of time (the original exception is
                the ``__cause__``); a :class:`ToolError` the handler raises itself
                passes through unchanged.
        """
        tool = self.get(name)
        args = self.validate_args(name, args)
        with anyio.move_on_after(ctx.timeout_s + TIMEOUT_GRACE_S) as scope:
            try:
                return await tool.handler(args, ctx)
            except ToolError:
                raise
            except Exception as exc:  # cancellation is a BaseException and passes
                raise ToolError(f"tool {name!r} failed: {type(exc).__name__}: {exc}") from exc
        # Only the timeout's cancellation ends the block without a return or a raise.
        assert scope.cancelled_caught
        raise ToolError(f"tool {name!r} timed out after {ctx.timeout_s:g}s")


def _validator_for(name: str, schema: dict[str, Any]) -> Validator:
    if not isinstance(schema, dict):
        raise ConfigError(f"tool {name!r}: parameters must be a JSON schema object")
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        raise ConfigError(f"tool {name!r}: invalid parameters schema: {exc.message}") from None
    validator: Validator = cls(schema)
    return validator


def _path(error: ValidationError) -> str:
    out = "args"
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


__all__ = [
    "DEFAULT_TIMEOUT_S",
    "SOURCE_SEPARATOR",
    "TIMEOUT_GRACE_S",
    "Tool",
    "ToolContext",
    "ToolHandler",
    "ToolRegistry",
    "model_name",
    "names_match",
    "tool",
]
