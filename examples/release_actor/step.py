# graph-step: one wake of a release graph's owner. It runs the current node only.
#
# The record at runs/<run>/graph ({node, status, results, decisionId?}) decides what
# runs; the message that woke the actor never does. Every write names the version read,
# so a wake that lost a race stops on the conflict (the actor settles it as such).
run = payload.run
key = "runs/" + run + "/graph"
topic = "graph." + run
order = {"fetch": "test", "test": "approve", "approve": "release", "release": "done"}

entry = await mesh.get(key)
if entry is None:
    return {"status": "missing", "key": key}
graph, version = entry["value"], entry["version"]
if graph["status"] in ("done", "failed"):
    return {"status": graph["status"], "key": key}
node = graph["node"]


async def write(value, expected):
    return (await mesh.put(key, value, if_version=expected))["version"]


async def advance(result, expected):
    # a node that reports ok=False fails the graph, its result kept as the evidence
    failed = isinstance(result, dict) and result.get("ok") is False
    after = order[node]
    status = "failed" if failed else ("done" if after == "done" else "ready")
    results = {**graph["results"], node: result}
    moved = {**graph, "node": node if failed else after, "status": status, "results": results}
    await write(moved, expected)
    if status == "ready":
        me = await mesh.self()
        await agents.tell(me["id"], "Continue " + key + ".")
    return {"status": status, "from": node, "to": None if failed else after}


if node == "approve":
    decision = graph.get("decisionId")
    if not decision:  # raised once; its id is in the record before anyone waits on it
        decision = (await programs.run("graph-approve", {"run": run}))["decision"]
        graph = {**graph, "decisionId": decision}
        version = await write(graph, version)
    answer = await programs.run(
        "graph-approve",
        {"run": run, "decision": decision, "wait_ms": payload.get("wait_ms", 60_000)},
    )
    if answer["status"] == "open":
        # look again later; the stable key keeps one tick pending however often we get here
        await mesh.publish(
            topic,
            "graph.tick",
            {"decision": decision},
            after_ms=payload.get("tick_ms", 600_000),
            key="graph-" + run,
        )
        return {"status": "waiting", "decision": decision}
    return await advance(answer, version)

# A record left "running" means a wake was interrupted inside this node: the node
# verifies what it did before doing it again (and says so in its result).
interrupted = graph["status"] == "running"
if not interrupted:
    version = await write({**graph, "status": "running"}, version)
result = await programs.run(
    "graph-" + node, {"run": run, "verify": interrupted}, require_promoted=True
)
return await advance(result, version)
