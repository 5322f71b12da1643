"""One agent turn assembled in one place: :func:`prepare_turn`.

An agent actor's turn on a message and a one-off turn (``agents.run``) are the same
thing from the model's side: the profile's instructions, the conversation carried in
(none for a one-off), the user message, the profile's tools plus the capability tools
acting through a :class:`~plait.agents.tools.TurnTools`, trusted or not. This module
builds that once: the executor environment, the messages and the
:class:`~plait.graphs.agent_loop.Turn`; the callers run it and commit what it did.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plait.agents.tools import TurnEffects, TurnTools, with_capabilities
from plait.graphs.agent_loop import Turn
from plait.graphs.budget import VisitBudget
from plait.graphs.ports import AnswersUpFront, ApprovalPort, ExecEnv, LivePort
from plait.mesh import Mesh
from plait.models import CallContext, Message, Model
from plait.profiles import AgentProfile
from plait.programs import ProgramCatalog
from plait.tools import ToolRegistry


@dataclass(frozen=True)
class PreparedTurn:
    """A turn ready to run.

    Attributes:
        turn: the model loop's settings.
        messages: what the model is given: instructions, the conversation, the prompt.
        tools: what the capability tools act through (bind it while the turn runs).
    """

    turn: Turn
    messages: list[Message]
    tools: TurnTools

    @property
    def first_new(self) -> int:
        """The index of the user message: it and what follows are the turn's own."""
        return len(self.messages) - 1


def prepare_turn(
    mesh: Mesh,
    *,
    actor_id: str,
    message_id: str,
    profile: AgentProfile,
    prompt: str,
    effects: TurnEffects,
    tools: ToolRegistry,
    model: Model | None,
    context: CallContext,
    conversation: Sequence[Message] = (),
    max_rounds: int = 8,
    budget: VisitBudget | None = None,
    approvals: ApprovalPort | None = None,
    cwd: Path | None = None,
    programs: ProgramCatalog | None = None,
    run_program: Callable[[str, Any, bool], Awaitable[Any]] | None = None,
    on_outside: Callable[[str], Awaitable[None]] | None = None,
    read_taint: Callable[[], bool] | None = None,
    live: LivePort | None = None,
) -> PreparedTurn:
    """Assemble one turn of ``profile`` on ``prompt``; trusted unless ``effects.tainted``.

    Args:
        mesh: the mesh the capability tools act on.
        actor_id: who takes the turn (decisions are raised by it).
        message_id: the message it handles (derived ids come from it).
        profile: the agent's profile: instructions, tools, model.
        prompt: the user message.
        effects: where the turn's mesh effects are held until its commit; its
            ``tainted`` says whether the turn starts untrusted, and is set once outside
            content comes in.
        tools: the process's tools (the capability tools are added).
        model: a model answering for every agent (None: the profile's).
        context: who calls the model.
        conversation: the messages carried in from earlier turns.
        max_rounds: model calls at most.
        budget: what the turn may spend (default: unlimited).
        approvals: asks a person to approve gated tools (default: refuses them).
        cwd: where tools work (default: the working directory).
        programs: the catalog program nodes look refs up in.
        run_program: runs a program with the agent's capabilities (see TurnTools).
        on_outside: called before a tool with effects outside the mesh runs.
        read_taint: whether a capability tool has read a tainted value (the turn then
            loses its pre-approvals).
        live: where the model streams its reply as it comes (None: it does not stream).
    """
    env = ExecEnv(
        agent=profile.name,
        model=model,
        profiles={profile.name: profile},
        tools=with_capabilities(tools),
        approvals=approvals if approvals is not None else AnswersUpFront(),
        cwd=cwd if cwd is not None else Path.cwd(),
        protected=mesh.local_files,
        mesh=mesh,
        programs=programs,
        live=live,
    )
    messages = (
        [Message(role="system", content=profile.system_prompt)] if profile.system_prompt else []
    )
    messages += [*conversation, Message(role="user", content=prompt)]
    turn = Turn(
        env=env,
        profile=profile,
        model=env.model_for(profile),
        context=context,
        tools=list(profile.tools),
        trusted=not effects.tainted,
        max_rounds=max_rounds,
        budget=budget if budget is not None else VisitBudget(),
        on_untrusted=lambda: setattr(effects, "tainted", True),
        read_taint=read_taint,
    )
    capability = TurnTools(
        mesh, actor_id, message_id, effects, run_program=run_program, on_outside=on_outside
    )
    return PreparedTurn(turn, messages, capability)


__all__ = ["PreparedTurn", "prepare_turn"]
