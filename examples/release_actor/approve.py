# graph-approve: the sign-off of release `payload.run`, which only a person gives.
#
# Without `decision` it raises the decision (its id is derived from the run, so raising
# again returns the same one) and returns its id; with one it waits up to `wait_ms` for
# the answer: status "open" if none came yet, ok=True only for a "yes".
run = payload.run
if payload.get("decision") is None:
    raised = await tools.call(
        "decisions.raise",
        {
            "title": "Release " + run + "?",
            "input": "confirm",
            "id": "release-" + run,
            "data": {"run": run, "graph": "runs/" + run + "/graph"},
        },
    )
    return {"decision": raised["id"], "status": raised["status"]}
decision = await decisions.wait(payload.decision, timeout_ms=int(payload.get("wait_ms", 60_000)))
answer = decision.get("answer") or {}
return {
    "decision": payload.decision,
    "status": decision["status"],
    "ok": decision["status"] == "answered" and answer.get("option") == "yes",
    "by": answer.get("by"),
}
