"""The exceptions plait raises.

Every error plait raises derives from :class:`PlaitError`; no driver exception
(``redis.*``, ``sqlite3.*``, ``openai.*``, ``anthropic.*``) escapes the public API.
Messages are built from structured arguments that stay on the exception as
attributes, so callers branch on data, not on text. ``retryable`` says whether the
same call may succeed if simply tried again.

::

    PlaitError
    ├── ConfigError (ValueError)              bad URL, option or setting
    ├── MeshError
    │   ├── VersionConflict                   a CAS expectation did not hold
    │   │   ├── ThreadFenced                  another writer moved a LangGraph thread's head
    │   │   └── DeliveryLost                  a delivery held in a batch went to another consumer
    │   ├── MeshUnavailable (ConnectionError) the backend cannot be reached (retryable)
    │   ├── InvalidKey (ValueError)           empty or malformed key
    │   ├── ValueNotEncodable (TypeError)     msgpack cannot encode the value
    │   ├── ValueTooLarge (ValueError)        the encoded value is over the size limit
    │   └── CorruptValue (ValueError)         a stored value cannot be decoded
    ├── GraphError
    │   ├── GraphValidationError (ValueError) every problem of a graph spec at once
    │   ├── GraphNotFound (LookupError)
    │   ├── GraphVersionExists                a stored version is immutable
    │   ├── TemplateError                     a template names an output that is missing
    │   └── RunKeyConflict                    a run key holds another graph or input's run
    ├── ModelError                            a model call failed
    │   ├── ModelRateLimited                  (retryable)
    │   ├── ModelTimeout                      (retryable)
    │   ├── ModelConnectionError              (retryable)
    │   ├── ModelServerError                  an HTTP 5xx answer (retryable)
    │   ├── ScriptedModelError                no rule matched, or the rule says error
    │   └── ModelIgnoredTools                 plain text where a tool call was required
    ├── ToolError
    │   ├── ToolNotFound (LookupError)
    │   ├── ToolArgumentsInvalid (ValueError)
    │   ├── ToolNotPermitted (PermissionError) not the agent's, or not read-only where required
    │   └── ToolInDoubt                       the call may or may not have acted (retryable)
    ├── ActorError
    │   ├── ActorNotFound (LookupError)
    │   └── PartitionCountMismatch
    ├── ProgramError
    │   ├── ProgramNotFound (LookupError)     no registered callable or saved text by that ref
    │   ├── ProgramNotPromoted                a required promotion is missing
    │   ├── ProgramInputInvalid (ValueError)  the input breaks the program's input model
    │   └── CapabilityMissing (PermissionError) the caller was not given this capability
    ├── RunError
    │   ├── RunNotFound (LookupError)
    │   ├── RunNotWaiting                     resume of a run that waits on nothing
    │   ├── RunNotRetryable                   retry of a run that did not fail on a node
    │   ├── VisitNotFound (LookupError)       fork at a visit the run never committed
    │   ├── BudgetExhausted                   a call inside a visit would pass the budget
    │   ├── AuditChainBroken                  an audit event was edited, dropped or reordered
    │   └── WorkflowError                     a workflow cannot go on
    │       ├── NonDeterminism                a replay asked for another step than journaled
    │       ├── StepFailed                    a journaled step raised (replayed as raised)
    │       └── WorkflowParked                in-session: a question has no answer
    ├── DecisionError
    │   ├── DecisionNotFound (LookupError)
    │   ├── DecisionClosed                    already answered, cancelled or expired
    │   └── NotPermitted (PermissionError)    only a human principal may do this
    └── ScheduleError
        ├── ScheduleNotFound (LookupError)
        └── DeliveryFailed                    a sink refused a run's result (retryable)
"""

from __future__ import annotations

from typing import Any


class PlaitError(Exception):
    """Root of every error plait raises."""

    retryable: bool = False


class ConfigError(PlaitError, ValueError):
    """A URL, option or setting is wrong; the message says which and how to fix it."""


# -- mesh ---------------------------------------------------------------------------


class MeshError(PlaitError):
    """A mesh operation failed."""


class VersionConflict(MeshError):
    """A compare-and-swap expectation did not hold; nothing was written.

    Attributes:
        key: the key whose version did not match.
        expected: the version the caller asked for (0 means "must not exist").
        actual: the version found (0 means the key does not exist).
    """

    def __init__(self, key: str, expected: int, actual: int) -> None:
        self.key = key
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"version conflict on {key!r}: expected version {expected}, found {actual}"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.key, self.expected, self.actual))


class DeliveryLost(VersionConflict):
    """A transaction required that a consumer still hold a delivery (see
    :meth:`plait.mesh.Transaction.hold`), and it no longer does: the delivery was acked,
    or went to another consumer after its visibility timeout. Nothing was written.

    Attributes:
        topic: the delivery's topic.
        event_id: the delivered event's id.
        consumer: the consumer that no longer holds it.
    """

    def __init__(self, topic: str, event_id: str, consumer: str) -> None:
        self.topic = topic
        self.event_id = event_id
        self.consumer = consumer
        MeshError.__init__(
            self,
            f"consumer {consumer!r} no longer holds event {event_id!r} of topic {topic!r}: "
            "it was acked or delivered to another consumer",
        )
        self.key = f"{topic}#{event_id}"
        self.expected = 1
        self.actual = 0

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.topic, self.event_id, self.consumer))


class ThreadFenced(VersionConflict):
    """A fenced LangGraph checkpointer found that another writer moved the thread's head
    since this one read or wrote it; this writer's checkpoint was not written.

    Attributes:
        thread_id: the LangGraph thread.
        checkpoint_ns: the namespace within it ("" for the root graph).
        writer: the writer id recorded with the head now (the other writer).
        mine: this saver's writer id.
    """

    def __init__(
        self,
        key: str,
        expected: int,
        actual: int,
        thread_id: str,
        checkpoint_ns: str,
        writer: str,
        mine: str,
    ) -> None:
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.writer = writer
        self.mine = mine
        super().__init__(key, expected, actual)
        ns = f" namespace {checkpoint_ns!r}" if checkpoint_ns else ""
        self.args = (
            f"thread {thread_id!r}{ns} is written by another writer, {writer!r}: it moved "
            f"the thread's head (version {expected} -> {actual}) since {mine!r} read it; "
            "this checkpoint was not written (reload the thread to continue from its head)",
        )

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            type(self),
            (
                self.key,
                self.expected,
                self.actual,
                self.thread_id,
                self.checkpoint_ns,
                self.writer,
                self.mine,
            ),
        )


class MeshUnavailable(MeshError, ConnectionError):
    """The mesh backend cannot be reached or did not answer in time (the URL is shown
    with its credentials masked).

    Retryable: the same call may succeed once the backend is back. A write that raised
    it may or may not have been applied (see :mod:`plait.mesh._base`).
    """

    retryable = True


class InvalidKey(MeshError, ValueError):
    """A key is empty or otherwise unusable."""


class ValueNotEncodable(MeshError, TypeError):
    """A value holds something msgpack cannot encode.

    Attributes:
        key: the key (or topic) being written.
        type_name: the name of the offending type.
    """

    def __init__(self, key: str, type_name: str) -> None:
        self.key = key
        self.type_name = type_name
        super().__init__(
            f"cannot encode the value for {key!r}: objects of type {type_name} are not "
            "supported (use dict, list, str, bytes, int, float, bool or None)"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.key, self.type_name))


class ValueTooLarge(MeshError, ValueError):
    """An encoded value is over the mesh's size limit.

    Attributes:
        key: the key (or topic) being written.
        size: the encoded size in bytes.
        limit: the limit in bytes.
    """

    def __init__(self, key: str, size: int, limit: int) -> None:
        self.key = key
        self.size = size
        self.limit = limit
        super().__init__(
            f"the value for {key!r} is {size} bytes encoded, over the limit of {limit} "
            "bytes (store large data elsewhere, or raise max_value_bytes)"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.key, self.size, self.limit))


class CorruptValue(MeshError, ValueError):
    """A stored value does not decode (truncated or overwritten outside plait).

    Attributes:
        key: the key whose value is corrupt.
        reason: what the decoder said.
    """

    def __init__(self, key: str, reason: str) -> None:
        self.key = key
        self.reason = reason
        super().__init__(f"the value stored at {key!r} is corrupt: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.key, self.reason))


# -- graphs -------------------------------------------------------------------------


class GraphError(PlaitError):
    """A graph could not be loaded, stored or run."""


class GraphValidationError(GraphError, ValueError):
    """A graph spec has problems; ``problems`` lists every one with its path.

    Attributes:
        problems: messages of the form ``nodes[3].verdicts.fail: unknown target "x"``.
    """

    def __init__(self, problems: list[str], source: str | None = None) -> None:
        self.problems = list(problems)
        self.source = source
        where = f" in {source}" if source else ""
        lines = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(f"{len(self.problems)} problem(s){where}:\n{lines}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.problems, self.source))


class GraphNotFound(GraphError, LookupError):
    """No stored graph has this agent, name (and version)."""


class GraphVersionExists(GraphError):
    """A different spec is already stored under this graph version; versions are immutable."""


class TemplateError(GraphError):
    """A template reads an output that does not exist.

    Attributes:
        node: the node whose template failed (may be empty outside a run).
        key: the template reference that could not be resolved.
    """

    def __init__(self, node: str, key: str, reason: str) -> None:
        self.node = node
        self.key = key
        self.reason = reason
        where = f"node {node!r}: " if node else ""
        super().__init__(f"{where}template {{{{{key}}}}}: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.node, self.key, self.reason))


class RunKeyConflict(GraphError):
    """An in-session run under a run key cannot go on from what the key holds.

    Attributes:
        run_key: the run key.
        reason: ``graph`` (another graph version ran under the key), ``input`` (another
            input did) or ``changed`` (the key was written meanwhile, by another run).
    """

    def __init__(self, run_key: str, reason: str, message: str) -> None:
        self.run_key = run_key
        self.reason = reason
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.run_key, self.reason, str(self)))


# -- models -------------------------------------------------------------------------


class ModelError(PlaitError):
    """A model call failed."""


class ModelRateLimited(ModelError):
    """The provider refused the call for rate limits after its retries."""

    retryable = True


class ModelTimeout(ModelError):
    """The model call timed out after its retries."""

    retryable = True


class ModelConnectionError(ModelError):
    """The model endpoint could not be reached."""

    retryable = True


class ModelServerError(ModelError):
    """The provider answered with a server error (HTTP 5xx, 529 overloaded)."""

    retryable = True


class ScriptedModelError(ModelError):
    """A scripted model had no rule for the call, or its rule says the call fails."""


class ModelIgnoredTools(ModelError):
    """A call whose ``tool_choice`` required a tool call got plain text, also when asked
    again: the model, or its server's chat template, ignored the tools.

    Attributes:
        node: the node whose call it was.
        tool_choice: what the call required (``"required"`` or a tool's name).
    """

    def __init__(self, node: str, tool_choice: str, model: str) -> None:
        self.node, self.tool_choice, self.model = node, tool_choice, model
        super().__init__(
            f"node {node!r}: tool_choice {tool_choice!r} requires a tool call, but {model} "
            "answered with plain text twice: the model or its server ignored the tools "
            "(a llama.cpp server needs a chat format that calls tools, e.g. "
            "--chat_format chatml-function-calling)"
        )


# -- tools --------------------------------------------------------------------------


class ToolError(PlaitError):
    """A tool call failed."""


class ToolNotFound(ToolError, LookupError):
    """No tool of this name is registered."""


class ToolArgumentsInvalid(ToolError, ValueError):
    """A tool's arguments do not match its JSON schema."""


class ToolNotPermitted(ToolError, PermissionError):
    """The caller may not use this tool (not the agent's, or not read-only where needed)."""


class ToolInDoubt(ToolError):
    """A tool's server died mid-call: whether the call acted is unknown.

    It ends the visit the way a crash does, so the node's ``on_indeterminate`` decides
    (a person is asked, or the node runs again) rather than the model or a retry.
    """

    retryable = True


# -- actors -------------------------------------------------------------------------


class ActorError(PlaitError):
    """An actor could not be created, told or run."""


class ActorNotFound(ActorError, LookupError):
    """No actor record has this id."""


class PartitionCountMismatch(ActorError):
    """A mesh was opened with another mailbox partition count than it was made with."""

    def __init__(self, mesh_url: str, stored: int, asked: int) -> None:
        self.mesh_url = mesh_url
        self.stored = stored
        self.asked = asked
        super().__init__(
            f"the mesh {mesh_url} has {stored} mailbox partitions, not {asked}: the count "
            f"is fixed when a mesh is first used; pass --partitions {stored} (or none)"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.mesh_url, self.stored, self.asked))


# -- runs ---------------------------------------------------------------------------


class RunError(PlaitError):
    """A durable run could not be started, advanced or inspected."""


class RunNotFound(RunError, LookupError):
    """No run record has this id."""


class RunNotWaiting(RunError):
    """The run waits on no human answer, so there is nothing to resume."""


class RunNotRetryable(RunError):
    """A retry of a run that did not fail, or whose failure leaves nothing to run again.

    Attributes:
        run_id: the run.
        status: its status.
        reason: why it cannot be retried.
    """

    def __init__(self, run_id: str, status: str, reason: str) -> None:
        self.run_id = run_id
        self.status = status
        self.reason = reason
        super().__init__(f"run {run_id} is {status}: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.run_id, self.status, self.reason))


class VisitNotFound(RunError, LookupError):
    """A fork's ``--at`` names no visit the run committed (or one nothing runs after).

    Attributes:
        run_id: the run.
        visit: the visit asked for (``node`` or ``node:visit``).
        committed: the visits a fork may start after, as ``node:visit``.
        reason: what is wrong with it.
    """

    def __init__(self, run_id: str, visit: str, committed: list[str], reason: str) -> None:
        self.run_id = run_id
        self.visit = visit
        self.committed = committed
        self.reason = reason
        valid = ", ".join(committed) if committed else "none"
        super().__init__(f"run {run_id}: {visit!r} {reason}; the visits to fork at are: {valid}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.run_id, self.visit, self.committed, self.reason))


class BudgetExhausted(RunError):
    """A model or tool call inside a visit was not made: it would pass the run's budget.

    Attributes:
        node: the visit's node or instance id.
        what: the call refused (``model call``, ``tool call 'bash'``).
        reason: which limit, and what was left.
    """

    def __init__(self, node: str, what: str, reason: str) -> None:
        self.node = node
        self.what = what
        self.reason = reason
        super().__init__(f"node {node!r}: {what} not made, the budget is spent ({reason})")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.node, self.what, self.reason))


class AuditChainBroken(RunError):
    """A run's audit events were edited, dropped or reordered.

    Attributes:
        run_id: the run.
        seq: the sequence number of the first event that fails to verify.
    """

    def __init__(self, run_id: str, seq: int, reason: str) -> None:
        self.run_id = run_id
        self.seq = seq
        self.reason = reason
        super().__init__(f"run {run_id}: audit event {seq} fails verification: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.run_id, self.seq, self.reason))


# -- programs -----------------------------------------------------------------------


class WorkflowError(RunError):
    """A workflow (:mod:`plait.workflows`) cannot go on."""


class NonDeterminism(WorkflowError):
    """A workflow's replay asked, at a journaled position, for another step than the
    one its journal holds: the code changed in a way its running runs cannot follow.

    Attributes:
        position: the step's position in the run (0 first).
        recorded: the journaled step (``name(args digest)``).
        requested: the step the replay asked for.
    """

    def __init__(self, run_id: str, position: int, recorded: str, requested: str) -> None:
        self.run_id, self.position = run_id, position
        self.recorded, self.requested = recorded, requested
        super().__init__(
            f"workflow run {run_id} is not deterministic at step {position}: the journal "
            f"holds {recorded}, the code now asks for {requested} (guard the change with "
            "ctx.patched(name), or let old runs finish on the old code)"
        )


class StepFailed(WorkflowError):
    """A workflow step raised; the journal keeps its error, so a replay raises it again.

    Attributes:
        step: the step's name.
        position: its position in the run.
        error: ``Type: message`` of what it raised.
    """

    def __init__(self, step: str, position: int, error: str) -> None:
        self.step, self.position, self.error = step, position, error
        super().__init__(f"step {position} ({step}) failed: {error}")


class WorkflowParked(WorkflowError):
    """An in-session workflow asked a question nobody answered up front.

    Attributes:
        ask: the question.
        options: its options (None: free text).
    """

    def __init__(self, ask: str, options: list[str] | None) -> None:
        self.ask, self.options = ask, options
        super().__init__(f"the workflow waits on an answer to {ask!r}: pass answers={{...}}")


class ProgramError(PlaitError):
    """A program could not be saved, found, promoted or run."""


class ProgramNotFound(ProgramError, LookupError):
    """No registered callable, import path or saved program answers to this ref."""


class ProgramNotPromoted(ProgramError):
    """A promoted version was required and this one is not promoted.

    Attributes:
        name: the saved program.
        version: the version that would have to be promoted.
    """

    def __init__(self, name: str, version: int) -> None:
        self.name = name
        self.version = version
        super().__init__(
            f"program {name!r} version {version} is not promoted: a person promotes it with "
            f"`plait programs promote {name} --version {version}`"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.name, self.version))


class ProgramInputInvalid(ProgramError, ValueError):
    """A program's input does not validate against its declared input model."""


class CapabilityMissing(ProgramError, PermissionError):
    """Program code used a capability its caller was not given."""


# -- decisions ----------------------------------------------------------------------


class DecisionError(PlaitError):
    """A decision could not be raised, answered or read."""


class DecisionNotFound(DecisionError, LookupError):
    """No decision has this id."""


class DecisionClosed(DecisionError):
    """The decision is no longer open (answered, cancelled or expired)."""


class NotPermitted(DecisionError, PermissionError):
    """Only a human principal may do this (answer a decision, raise a budget)."""


# -- schedules ----------------------------------------------------------------------


class ScheduleError(PlaitError):
    """A schedule could not be created, changed or delivered."""


class ScheduleNotFound(ScheduleError, LookupError):
    """No schedule has this id."""


class DeliveryFailed(ScheduleError):
    """A sink did not take a scheduled run's result (a webhook answered an error, a
    file could not be written); the delivery is tried again later."""

    retryable = True
