# Seed the release graph of run `payload.run` once and start the actor that owns it.
#
#   plait exec examples/release_actor/start.py --payload run=r1
#
# The record at runs/<run>/graph is the graph's single source of truth; the actor
# `agent:graph-<run>` runs the promoted program `graph-step` once per message (one node
# per wake) and listens on the topic `graph.<run>` for its scheduled ticks. Optional
# payload entries: wait_ms (how long one wake waits on the sign-off, default 60000) and
# tick_ms (when a wake that found it unanswered looks again, default 600000).
run = payload.run
key = "runs/" + run + "/graph"
topic = "graph." + run
await mesh.put(key, {"node": "fetch", "status": "ready", "results": {}}, if_version=0)
settings = {"run": run}
for name in ("wait_ms", "tick_ms"):
    if name in payload:
        settings[name] = int(payload[name])
actor = await agents.create("graph-" + run, program="graph-step", topics=[topic], input=settings)
await agents.tell(actor["id"], "Start graph " + key + ".")
return {"run": run, "key": key, "actor": actor["id"], "topic": topic}
