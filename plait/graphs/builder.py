"""Graphs written as ordinary Python: :class:`Graph`, nodes as plain async functions.

A builder writes the same :class:`~plait.graphs.spec.GraphSpec` a JSON or YAML file
holds, so one graph runs in-session (:meth:`Graph.run`) and durably (``plait graph
import pkg.module:g``, then ``plait graph run`` as any graph). Each function node becomes
a ``program`` node whose ref is the function's import path (``pkg.module:fn``): a worker
that imports the module runs it after any restart. A function asks, by parameter name,
for what it reads — ``input`` (the run's input), the id of any node (its output; with a
default, the default while that node has no output) — and for the capabilities
``mesh``, ``tools``, ``decisions``, ``programs``, ``agents`` and ``payload``::

    g = plait.Graph("release", agent="ops")

    @g.node(next="review")
    async def test(input: str, tools: ToolsCapability) -> dict[str, Any]:
        return await tools.bash("pytest -q " + input)

    g.verifier("review", "Review:\\n\\n{{test}}", verdicts={"pass": "ship", "fail": "test"})
    g.human("ship", "Ship it?")
    spec = g.compile()              # every problem at once, as for a graph file

A Python-decided edge (:meth:`Graph.route`) is a ``program`` node with verdicts: the
function returns the id of the node to run next, one of those it declares.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

from pydantic import BaseModel, ValidationError

from plait.errors import GraphValidationError, PlaitError, ProgramError, ProgramInputInvalid
from plait.graphs.live import SessionEvent
from plait.graphs.problems import Problem
from plait.graphs.session import GraphRun, resume_graph, run_graph
from plait.graphs.spec import GraphSpec
from plait.graphs.template import PLACEHOLDER
from plait.graphs.validate import validate_graph
from plait.programs.registry import (
    CAPABILITY_NAMES,
    PROGRAM_ATTRIBUTE,
    CallableProgram,
    register,
)

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])

Target = str | Callable[..., Any]
"""A node named by its id, or by the function that is the node."""

_IMPORTABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def import_path(fn: Callable[..., Any]) -> str:
    """The ``pkg.module:qualname`` a function is referred to by."""
    return f"{fn.__module__}:{fn.__qualname__}"


class Graph:
    """A graph built in Python; :meth:`compile` gives its validated :class:`GraphSpec`.

    Nodes are added in order; the first is the entry unless ``entry`` is given. Every
    adding method takes the fields every node has (``next``, ``description``,
    ``on_indeterminate``, ``verify``, ``retry``, ``timeout_s``) as keywords; a ``next``
    may be a node id or a function node.

    Args:
        name: the graph's name.
        agent: the agent it runs as (its profile's tools and model).
        entry: the first node (default: the first added).
        budget: the run's limits, as in a graph file (a bare int is the step budget).
        description: free text for people.
        version: the version it is stored as.
    """

    def __init__(
        self,
        name: str,
        *,
        agent: str = "assistant",
        entry: Target | None = None,
        budget: int | Mapping[str, Any] | None = None,
        description: str = "",
        version: int = 1,
    ) -> None:
        self.name = name
        self.agent_name = agent
        self.entry = entry
        self.budget = budget
        self.description = description
        self.version = version
        self._nodes: list[dict[str, Any]] = []
        self._ids: dict[Callable[..., Any], str] = {}
        self._functions: dict[str, _Function] = {}
        self._routes: dict[str, _Route] = {}
        self._problems: list[str] = []

    # -- nodes -------------------------------------------------------------------------

    def node(
        self,
        fn: F | None = None,
        /,
        *,
        id: str | None = None,
        next: Target | None = None,
        **options: Any,
    ) -> Any:
        """Add an ``async def`` as a node (``@g.node`` or ``@g.node(next=...)``).

        Its id is the function's name unless ``id`` is given; its output is what it
        returns (a pydantic model is stored as its JSON form). The spec names it by its
        import path, and the function carries the adapter that calls it, so a worker
        importing it runs it as this graph does; it is also added to the default catalog
        under that path, for in-session runs of functions no import reaches.
        """

        def add(fn: F) -> F:
            node_id = id or fn.__name__
            if not inspect.iscoroutinefunction(fn):
                self._problem(node_id, f"node function {fn.__qualname__} must be an async def")
            function = _Function.of(fn, node_id, self._problem)
            register(function.program)
            self._ids[fn] = node_id
            self._functions[node_id] = function
            self._add(
                node_id,
                "program",
                {"ref": function.ref, "input": function.input, "require_promoted": False},
                next,
                options,
            )
            return fn

        return add(fn) if fn is not None else add

    def agent(self, id: str, prompt: str, *, next: Target | None = None, **options: Any) -> str:
        """Add an ``agent`` node: a model call (with the agent's tools) on ``prompt``.

        ``tool_choice`` (``"auto"``, ``"required"``, ``"none"`` or a tool's name) says
        what its first model call must call.
        """
        return self._add(id, "agent", {"prompt": prompt}, next, options)

    def verifier(
        self, id: str, prompt: str, *, verdicts: Mapping[str, Target], **options: Any
    ) -> str:
        """Add a ``verifier``: a model call whose verdict picks the next node.

        ``verdict_mode="structured"`` asks for a JSON verdict from an enum,
        ``"last_line"`` reads the reply's last line, ``"auto"`` (default) picks by model.
        """
        routed = {word: self._id(target) for word, target in verdicts.items()}
        return self._add(id, "verifier", {"prompt": prompt, "verdicts": routed}, None, options)

    def human(self, id: str, ask: str, *, next: Target | None = None, **options: Any) -> str:
        """Add a ``human`` node: the run parks on a decision until a person answers."""
        return self._add(id, "human", {"ask": ask}, next, options)

    def tool(
        self,
        id: str,
        tool: str,
        args: Mapping[str, Any] | None = None,
        *,
        next: Target | None = None,
        **options: Any,
    ) -> str:
        """Add a ``tool`` node: one call of ``tool`` (string args are templates)."""
        return self._add(id, "tool", {"tool": tool, "args": dict(args or {})}, next, options)

    def parallel(
        self,
        id: str,
        tasks: str | Sequence[str],
        *,
        prompt: str = "{{item}}",
        next: Target | None = None,
        **options: Any,
    ) -> str:
        """Add a ``parallel`` node: read-only workers, one per task, answers combined."""
        listed = tasks if isinstance(tasks, str) else list(tasks)
        return self._add(id, "parallel", {"tasks": listed, "prompt": prompt}, next, options)

    def program(
        self,
        id: str,
        ref: str,
        input: Any = "{{input}}",
        *,
        require_promoted: bool = True,
        next: Target | None = None,
        **options: Any,
    ) -> str:
        """Add a ``program`` node running a saved or registered program by ``ref``."""
        fields = {"ref": ref, "input": input, "require_promoted": require_promoted}
        return self._add(id, "program", fields, next, options)

    def subgraph(self, id: str, graph: str, *, next: Target | None = None, **options: Any) -> str:
        """Add a ``subgraph`` node: a stored graph run as a child."""
        return self._add(id, "subgraph", {"graph": graph}, next, options)

    def fan_out(
        self,
        id: str,
        target: Target | None = None,
        *,
        over: str | None = None,
        count: int | None = None,
        targets: Sequence[Target] | None = None,
        on_failure: Literal["fail_fast", "drain_then_fail", "collect"] = "fail_fast",
        max_concurrency: int | None = None,
        **options: Any,
    ) -> str:
        """Add a ``fan_out``: ``target`` once per element ``over`` names (``"node.path"``,
        a map), ``count`` times (a broadcast), or each of ``targets`` once (a tee)."""
        spec: dict[str, Any] = {"on_failure": on_failure}
        if max_concurrency is not None:
            spec["max_concurrency"] = max_concurrency
        if targets is not None:
            spec.update(kind="tee", targets=[self._id(t) for t in targets])
        elif over is not None:
            source, _, path = over.partition(".")
            spec.update(kind="map", source_node_id=source, source_path=path)
        else:
            spec.update(kind="broadcast", count=count)
        if target is not None:
            spec["target_node_id"] = self._id(target)
        return self._add(id, "fan_out", {"specs": [spec]}, None, options)

    def fan_in(self, id: str, *, next: Target | None = None, **options: Any) -> str:
        """Add a ``fan_in``: it runs once every instance before it has ended."""
        return self._add(id, "fan_in", {}, next, options)

    def route(
        self,
        node: Target,
        decide: Callable[..., Any],
        *,
        to: Iterable[Target] | None = None,
        id: str | None = None,
    ) -> str:
        """A Python-decided edge out of ``node``: ``decide`` returns the next node's id.

        ``decide`` (a plain or async function) asks for what it reads by parameter
        name, as a function node does. The ids it may return are ``to``, or the
        ``Literal[...]`` of its return annotation. It runs as a node of its own
        (``<node>_route`` unless ``id`` is given), after ``node``.
        """
        source = self._id(node)
        route_id = id or f"{source}_route"
        if to is None:
            targets = _literal_targets(decide)
            if not targets:
                self._problem(
                    route_id,
                    f"route {decide.__qualname__}: say where it may lead, with to=[...] or a "
                    'return annotation like Literal["a", "b"]',
                )
        else:
            targets = [self._id(t) for t in to]
        if source in self._routes:
            self._problem(route_id, f"node {source!r} has a route already")
        function = _Function.of(decide, route_id, self._problem)
        register(function.program)
        self._routes[source] = _Route(route_id, function, targets)
        return route_id

    # -- the spec ----------------------------------------------------------------------

    def data(self) -> dict[str, Any]:
        """The graph in the graph-file format (unvalidated), routes as program nodes."""
        nodes: list[dict[str, Any]] = []
        for raw in self._nodes:
            node = dict(raw)
            route = self._routes.get(node["id"])
            nodes.append(node)
            if route is not None:
                node["next"] = route.id
                nodes.append(
                    {
                        "id": route.id,
                        "type": "program",
                        "ref": route.function.ref,
                        "input": route.function.input,
                        "require_promoted": False,
                        "verdicts": {t: t for t in route.targets},
                        "on_indeterminate": "retry",
                    }
                )
        data: dict[str, Any] = {
            "name": self.name,
            "agent": self.agent_name,
            "version": self.version,
            "description": self.description,
            "nodes": nodes,
        }
        entry = self._id(self.entry) if self.entry is not None else None
        if entry is None and nodes and not any(n["type"] == "begin" for n in nodes):
            entry = nodes[0]["id"]
        if entry is not None:
            data["entry"] = entry
        if self.budget is not None:
            data["budget"] = self.budget if isinstance(self.budget, int) else dict(self.budget)
        return data

    def compile(self, *, durable: bool = False, **validate_options: Any) -> GraphSpec:
        """The validated spec, exactly what the same graph written as a file gives.

        Args:
            durable: also require every function to be importable by its path in
                another process (defined at module level of an importable module).
            **validate_options: as for :func:`plait.graphs.validate.validate_graph`
                (``agents``, ``tool_is_known``, ``tool_schema``).

        Raises:
            GraphValidationError: every problem at once, each with its path.
        """
        data = self.data()
        reads = self._read_problems(data)
        problems = [*self._problems, *reads]
        if durable:
            problems.extend(self._durable_problems(data))
        report = validate_graph(data, **validate_options)
        # A parameter naming no node is reported once, in the function's terms.
        said = {Problem.of(p).path for p in reads}
        problems.extend(p for p in report.problems if p.path not in said)
        if problems or report.spec is None:
            raise GraphValidationError(problems, f"graph {self.name!r}")
        return report.spec

    async def run(
        self,
        input: Any = None,
        *,
        run_key: str | None = None,
        fresh: bool = False,
        **options: Any,
    ) -> GraphRun:
        """Run the graph in this process: see :func:`plait.graphs.session.run_graph`.

        With ``run_key``, each committed node's result is kept under the key (in
        ``store=`` if given, else in ``mesh=``, else in the default mesh: ``mesh.db`` in
        ``PLAIT_HOME`` or the nearest ``.plait/``), and a rerun with the same key, input
        and graph goes on after the nodes that passed: they are not called again, the
        one that failed is. Another input or graph version under the key is refused
        (:class:`~plait.errors.RunKeyConflict`) unless ``fresh=True`` starts over. A
        function's body is not part of the graph version: bump ``version`` after
        changing one, or pass ``fresh=True``.
        """
        return await run_graph(self.compile(), input, run_key=run_key, fresh=fresh, **options)

    async def stream(self, input: Any = None, **options: Any) -> AsyncIterator[SessionEvent]:
        """Run the graph in this process as :meth:`run` does, giving its events as they
        happen: each piece of a model's reply as it streams, each committed visit, and
        last an ``end`` event holding the run (see :class:`~plait.graphs.live.SessionEvent`)::

            async for event in graph.stream("the topic"):
                if event.kind == "delta":
                    print(event.text, end="", flush=True)

        Raises what :meth:`run` raises, from the iteration.
        """
        events: asyncio.Queue[SessionEvent | BaseException] = asyncio.Queue()

        async def running() -> None:
            try:
                await self.run(input, on_event=events.put_nowait, **options)
            except BaseException as exc:  # handed to the iteration, which raises it
                events.put_nowait(exc)
                raise

        task = asyncio.get_running_loop().create_task(running())
        try:
            while True:
                event = await events.get()
                if isinstance(event, BaseException):
                    raise event
                yield event
                if event.kind == "end":
                    return
        finally:
            if not task.done():
                task.cancel()
            await asyncio.gather(task, return_exceptions=True)  # raised above, if at all

    async def resume(self, run: GraphRun, answer: str, **options: Any) -> GraphRun:
        """Continue an in-session run that waits on a person, with their ``answer``."""
        return await resume_graph(run, answer, **options)

    # -- inside ------------------------------------------------------------------------

    def _add(
        self,
        id: str,
        type: str,
        fields: Mapping[str, Any],
        next: Target | None,
        options: Mapping[str, Any],
    ) -> str:
        if any(n["id"] == id for n in self._nodes):
            self._problem(id, f"node id {id!r} is used twice")
        node: dict[str, Any] = {"id": id, "type": type, **fields, **options}
        if next is not None:
            node["next"] = self._id(next)
        self._nodes.append(node)
        return id

    def _id(self, target: Target) -> str:
        if isinstance(target, str):
            return target
        found = self._ids.get(target)
        if found is None:
            name = getattr(target, "__qualname__", repr(target))
            self._problem("(graph)", f"{name} is not a node of graph {self.name!r}")
            return name
        return found

    def _problem(self, where: str, message: str) -> None:
        self._problems.append(str(Problem(where, message)))

    def _read_problems(self, data: Mapping[str, Any]) -> list[str]:
        ids = {n["id"] for n in data["nodes"]}
        problems: list[str] = []
        for index, node in enumerate(data["nodes"]):
            function = self._functions.get(node["id"])
            route = next((r for r in self._routes.values() if r.id == node["id"]), None)
            if route is not None:
                function = route.function
            if function is None or node.get("ref") != function.ref:
                continue
            for name in function.reads:
                if name != "input" and name not in ids:
                    problems.append(
                        str(
                            Problem(
                                f"nodes[{index}].input.{name}",
                                f"{function.fn.__qualname__} asks for {name!r}, which is no "
                                f"node of the graph nor a capability "
                                f"({', '.join(CAPABILITY_NAMES)})",
                            )
                        )
                    )
        for source, route in self._routes.items():
            raw = next((n for n in self._nodes if n["id"] == source), None)
            if raw is None:
                problems.append(str(Problem(route.id, f"route from unknown node {source!r}")))
            elif raw.get("next") is not None:
                problems.append(
                    str(Problem(route.id, f"node {source!r} has a next and a route: give one"))
                )
        return problems

    def _durable_problems(self, data: Mapping[str, Any]) -> list[str]:
        problems: list[str] = []
        functions = [*self._functions.values(), *(r.function for r in self._routes.values())]
        for function in functions:
            module, qualname = function.fn.__module__, function.fn.__qualname__
            if module == "__main__" or not _IMPORTABLE.fullmatch(qualname):
                problems.append(
                    str(
                        Problem(
                            function.node_id,
                            f"{module}:{qualname} cannot be imported by another process: "
                            "define it at the top level of an importable module",
                        )
                    )
                )
        return problems


class _Route:
    __slots__ = ("function", "id", "targets")

    def __init__(self, id: str, function: _Function, targets: list[str]) -> None:
        self.id, self.function, self.targets = id, function, targets


class _Function:
    """A Python function as a node: what it reads, and the program adapter that calls it."""

    __slots__ = ("fn", "node_id", "program", "reads", "ref")

    def __init__(
        self, fn: Callable[..., Any], node_id: str, reads: list[str], program: CallableProgram
    ) -> None:
        self.fn, self.node_id, self.reads, self.program = fn, node_id, reads, program
        self.ref = program.ref

    @property
    def input(self) -> dict[str, str]:
        """The program node's input: one template per value the function reads."""
        params = inspect.signature(self.fn).parameters
        return {
            name: f"{{{{{name}?}}}}"
            if params[name].default is not inspect.Parameter.empty
            else f"{{{{{name}}}}}"
            for name in self.reads
        }

    @classmethod
    def of(
        cls, fn: Callable[..., Any], node_id: str, problem: Callable[[str, str], None]
    ) -> _Function:
        signature = inspect.signature(fn)
        reads: list[str] = []
        wants: list[str] = []
        for name, param in signature.parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                problem(node_id, f"{fn.__qualname__} takes *{name}: name each value it reads")
            elif name in CAPABILITY_NAMES:
                wants.append(name)
            else:
                reads.append(name)
        try:
            hints = get_type_hints(fn)
        except (NameError, TypeError):
            hints = {}
        models = {n: m for n in reads if (m := _model(hints.get(n))) is not None}

        async def call(input: Any, **granted: Any) -> Any:
            values = dict(input) if isinstance(input, Mapping) else {}
            kwargs: dict[str, Any] = {}
            for name in reads:
                value = values.get(name)
                default = signature.parameters[name].default
                if value == PLACEHOLDER and default is not inspect.Parameter.empty:
                    value = default
                elif name in models:
                    value = _validated(models[name], value, fn, name)
                kwargs[name] = value
            try:
                result = fn(**kwargs, **granted)
                return await result if inspect.isawaitable(result) else result
            except PlaitError:
                raise
            except Exception as exc:
                # The node fails with this as its evidence, as a node of any kind does;
                # cancellation is no Exception and passes through.
                raise ProgramError(f"{fn.__qualname__} raised {type(exc).__name__}: {exc}") from exc

        program = CallableProgram(
            ref=import_path(fn),
            fn=call,
            input_model=None,
            output_model=_model(hints.get("return")),
            wants=("input", *wants),
        )
        with contextlib.suppress(AttributeError, TypeError):  # a bound method, a builtin
            setattr(fn, PROGRAM_ATTRIBUTE, program)
        return cls(fn, node_id, reads, program)


def _validated(model: type[BaseModel], value: Any, fn: Callable[..., Any], name: str) -> Any:
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise ProgramInputInvalid(
            f"{fn.__qualname__}: {name} does not fit {model.__name__}: "
            + "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or name}: {e['msg']}" for e in exc.errors()
            )
        ) from None


def _model(hint: Any) -> type[BaseModel] | None:
    return hint if isinstance(hint, type) and issubclass(hint, BaseModel) else None


def _literal_targets(fn: Callable[..., Any]) -> list[str]:
    try:
        hint = get_type_hints(fn).get("return")
    except (NameError, TypeError):
        return []
    if get_origin(hint) is Literal:
        return [a for a in get_args(hint) if isinstance(a, str)]
    return []


__all__ = ["Graph", "Target", "import_path"]
