"""Agent actors: agent profiles running as durable actors, one turn per message.

- :mod:`plait.agents.config` — an agent actor's settings and ids (``agent:NAME``).
- :mod:`plait.agents.store` — its conversation, state, turns and held mail in the mesh.
- :mod:`plait.agents.tools` — the capabilities as tools, with a turn's buffered effects.
- :mod:`plait.agents.message` — :class:`AgentMessage`, a mailbox body parsed once.
- :mod:`plait.agents.turn` — :func:`prepare_turn`, one turn assembled in one place.
- :mod:`plait.agents.actor` — the actor kind: one agent turn per message, committed
  with its ack; budgets park it; crashes follow ``on_indeterminate``.
- :mod:`plait.agents.program_actor` — program actors: each message runs one program
  (``program=REF``) instead of a model turn.
- :mod:`plait.agents.exec_actor` — exec actors (``runner="pi"``): each message is one
  model turn that writes one program and runs it in the sandbox.
- :mod:`plait.agents.service` — :class:`Agents`: start, tell, list, show, stop.
- :mod:`plait.agents.live` — an actor's turns on its live channel, token by token
  (``plait agents watch NAME``).

Fleets are agent actors coordinating through topics
(:func:`plait.actors.subscribe`) and compare-and-swap on mesh keys.
"""

from __future__ import annotations

from plait.agents.config import AGENT_KIND, AgentActorConfig, AgentBudget, agent_actor_id
from plait.agents.message import AgentMessage
from plait.agents.service import AgentDetails, AgentInfo, Agents
from plait.agents.tools import CAPABILITY_TOOLS

__all__ = [
    "AGENT_KIND",
    "CAPABILITY_TOOLS",
    "AgentActorConfig",
    "AgentBudget",
    "AgentDetails",
    "AgentInfo",
    "AgentMessage",
    "Agents",
    "agent_actor_id",
]
