# graph-release: the release node of the seed's resumable graph, run by its node program as
# programs.run(ref="graph-release", input={"run": run}, requirePromoted=True).
#
# Its effect is the record at runs/<run>/effects/release, written once: found, it is the
# result, verified rather than done again (an interrupted wake runs the node again).
key = "runs/" + π.run + "/effects/release"
found = await mesh.get(key=key)
if found is not None:
    return {**found["value"], "verified": True}
done = {"node": "release", "ok": True, "run": π.run}
await mesh.put(key=key, value=done, ifVersion=0)
return done
