# graph-test: every change fetched must name the area it touches ("area: what").
#
# Its report at releases/<run>/test is recorded once; ok=False fails the graph with the
# offending changes as evidence.
key = "releases/" + payload.run + "/test"
found = await mesh.get(key)
if found is not None:
    return {**found["value"], "verified": True}
fetched = await mesh.get("releases/" + payload.run + "/fetch")
if fetched is None:
    return {"ok": False, "error": "nothing fetched for " + payload.run}
changes = fetched["value"]["changes"]
unnamed = [c for c in changes if ": " not in c]
report = {"ok": not unnamed, "checked": len(changes), "unnamed": unnamed}
await mesh.put(key, report, if_version=0)
return report
