"""``plait graph inspect|events``: the read-only views of one run (``runs`` lists them:
:mod:`plait.cli.run_list`)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from plait.cli._common import MeshOption, fail, print_json, run
from plait.cli._graph_app import graph_app
from plait.cli._ids import RUNS, RunArgument, resolve
from plait.cli._output import (
    JsonFlag,
    JsonOption,
    Output,
    OutputOption,
    as_text,
    mode,
    rows,
    say,
    styled,
    utc_time,
)
from plait.cli.run_progress import verifier_critique
from plait.errors import AuditChainBroken
from plait.graphs.trajectory import TrajectoryStep
from plait.ids import RunId
from plait.mesh import open_mesh
from plait.runs import AuditEvent, RunRecord, Runs
from plait.runs.audit import read_events


@graph_app.command("inspect")
def inspect_cmd(
    run_id: RunArgument,
    as_json: JsonOption = False,
    verify: Annotated[bool, typer.Option("--verify", help="Verify the audit chain.")] = False,
    full: Annotated[
        bool, typer.Option("--full", help="Print tool arguments and results in full.")
    ] = False,
    mesh: MeshOption = None,
) -> None:
    """Show a run's history: per visit its status, time, verdict, tools, usage, answers."""

    async def main() -> None:
        async with open_mesh(mesh) as m:
            runs = Runs(m)
            rid = RunId(await resolve(m, RUNS, run_id))
            rec = await runs.get(rid)
            output = await runs.output(rec)
            broken: AuditChainBroken | None = None
            verified = None
            if verify:
                try:
                    verified = await runs.verify(rid)
                except AuditChainBroken as exc:
                    broken = exc
            origin = await runs.forked_from(rid)
            try:
                trajectory = await runs.trajectory(rid)
            except AuditChainBroken:
                if broken is None:
                    raise
                trajectory = []  # the chain's own report says what is wrong with it
        if as_json:
            body: dict[str, Any] = {
                "run_id": rec.run_id,
                "status": rec.status,
                "graph": rec.graph.model_dump(),
                "output": output,
                "ended_detail": rec.ended_detail,
                "trajectory": [step.model_dump(mode="json") for step in trajectory],
                "forked_from": origin.model_dump() if origin is not None else None,
            }
            if verify:
                body["verified"] = broken is None
                body["verify_error"] = str(broken) if broken else None
            print_json(body)
        else:
            _print_inspect(rec, trajectory, full)
            if origin is not None:
                say(
                    f"forked from {origin.run_id} after {origin.node}:{origin.visit} "
                    f"(its event {origin.seq}, {origin.hash[:12]})"
                )
            if verified is not None:
                say(styled("audit chain verified", "green"), f": {verified} events")
        if broken is not None:
            fail(str(broken))

    run(main)


_CLIP = 200
"""Characters of a tool's arguments or result shown without --full."""


def _clip(value: Any, full: bool) -> str:
    text = as_text(value)
    return text if full or len(text) <= _CLIP else f"{text[:_CLIP]}… ({len(text)} chars, --full)"


def _print_inspect(rec: RunRecord, trajectory: list[TrajectoryStep], full: bool) -> None:
    """The human form of ``graph inspect``: one block per visit."""
    g = rec.graph
    detail = f" ({rec.ended_detail})" if rec.ended_detail else ""
    say(
        "run ",
        styled(rec.run_id, "bold"),
        f" {rec.status}{detail} — ",
        f"{g.agent}/{g.name} v{g.version} (sha256 {g.sha256[:12]})",
    )
    marks = {"done": ("✓", "green"), "failed": ("✗", "red"), "waiting": ("⏸", "yellow")}
    for step in trajectory:
        mark, color = marks.get(step.status, ("·", "dim"))
        elapsed = f" {step.elapsed:.2f}s" if step.elapsed is not None else ""
        verdict = f" → {step.verdict}" if step.verdict else ""
        say(
            styled(f"  {mark} ", color),
            step.node,
            f" (visit {step.visit})",
            verdict,
            elapsed,
            " ",
            styled(step.status, "dim"),
        )
        if step.status == "waiting" and step.prompt:
            say("      asks: ", _clip(step.prompt, full))
        if step.verdict:
            say("      critique: ", verifier_critique(step.output, step.verdict) or "(none)")
        elif step.output is not None:
            say("      output: ", _clip(step.output, full))
        if step.error:
            say(styled("      error: ", "red"), step.error)
        for call in step.tools:
            say("      tool ", styled(str(call.name), "bold"), " ", _clip(call.arguments, full))
            say("        → ", _clip(call.result, full))
        usage = step.usage
        if usage.input_tokens or usage.output_tokens or usage.dollars:
            say(
                f"      tokens {usage.input_tokens} in, {usage.output_tokens} out, "
                f"${usage.dollars:.4f}"
            )
        decision = step.decision
        if decision:
            by = decision.by
            if by and decision.label:
                by = f"{by} (as {decision.label})"  # PLAIT_USER: a label, not who
            when = f" at {utc_time(decision.at)} UTC" if decision.at else ""
            answered = f" by {by}{when}: " if by else ""
            say(
                f"      decision {decision.id} {decision.status}{answered}",
                as_text(decision.answer or ""),
            )


@graph_app.command("events")
def events_cmd(
    run_id: RunArgument,
    as_json: JsonFlag = False,
    output: OutputOption = None,
    mesh: MeshOption = None,
) -> None:
    """Print a run's audit chain: every committed transition, oldest first."""
    shown = mode(output, as_json)

    async def main() -> None:
        async with open_mesh(mesh) as m:
            rid = await resolve(m, RUNS, run_id)
            await Runs(m).get(RunId(rid))  # a run that is not there is said so
            events = await read_events(m, rid)
        if shown is Output.json:
            print_json([e.model_dump(mode="json") for e in events])
            return
        rows(
            ("seq", "time", "type", "node", "visit", "actor", "detail"),
            [
                (
                    e.seq,
                    utc_time(e.at),
                    e.type,
                    e.node or "",
                    e.visit or "",
                    e.actor,
                    _event_detail(e),
                )
                for e in events
            ],
            narrow=(0, 2, 3, 4, 6),
            fit=6,
            wide=shown is Output.wide,
        )

    run(main)


def _event_detail(event: AuditEvent) -> str:
    """The rest of an audit event, on one line."""
    parts = {
        "verdict": event.verdict,
        "error": event.error,
        "usage": _usage_text(event.usage) if event.usage else None,
        **{k: v for k, v in event.detail.items() if k not in ("started_at", "ended_at")},
    }
    return " ".join(f"{k}={as_text(v)}" for k, v in parts.items() if v not in (None, "", {}))


def _usage_text(usage: dict[str, float]) -> str:
    tokens = int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))
    return f"{tokens}tok/${usage.get('dollars', 0.0):.4f}"


__all__ = ["events_cmd", "inspect_cmd"]
