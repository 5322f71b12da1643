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
        name: letters, digits, ``_`` and ``-``, at most 64 (what model providers accept).
        description: what the tool does, for the model.
        parameters: a JSON schema of the arguments object.
        handler: the async function that does the work.
        read_only: changes nothing outside plait; parallel workers may use only these.
        external: brings in outside content (a fetched page, an upload); a node that
            reads such output runs untrusted (see :mod:`plait.tools.trust`).
        requires_approval: a person must approve each call unless the agent has it
            pre-approved and the node runs trusted (see :func:`plait.tools.gate`).
    """

    name: str
    description: str
    parameters: dict[str, Any]
    handler: ToolHandler = field(repr=False)
    read_only: bool = False
    external: bool = False
    requires_approval: bool = False
    _spec: ToolSpec = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ConfigError(
                f"invalid tool name {self.name!r}: use 1-64 letters, digits, '_' or '-'"
            )
        _validator_for(self.name, self.parameters)
        spec = ToolSpec(name=self.name, description=self.description, parameters=self.parameters)
        object.__setattr__(self, "_spec", spec)  # built once: models get it on every turn

    def spec(self) -> ToolSpec:
        """What a model is told of this tool (one shared object: do not change it)."""
        return self._spec


def tool(
    name: str | None = None,
    *,
    description: str | None = None,
    parameters: dict[str, Any] | None = None,
    read_only: bool = False,
    external: bool = False,
    requires_approval: bool = False,
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
            known = ", ".join(sorted(self._tools)) or "none"
            raise ToolNotFound(f"unknown tool {name!r} (known tools: {known})") from None

    def names(self) -> list[str]:
        """The registered tool names, sorted."""
        return sorted(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

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
        self.get(name)
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
    "TIMEOUT_GRACE_S",
    "Tool",
    "ToolContext",
    "ToolHandler",
    "ToolRegistry",
    "tool",
]
