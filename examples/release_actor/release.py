# graph-release: record release `payload.run`, once.
#
# The release record at releases/<run>/release is the effect. An interrupted wake may
# have written it before its graph record moved on, so it is looked for first: found,
# it is verified (it names this run's fetch) and returned instead of written again.
run = payload.run
key = "releases/" + run + "/release"
fetched = (await mesh.get("releases/" + run + "/fetch"))["value"]
found = await mesh.get(key)
if found is not None:
    if found["value"].get("changes") != fetched["changes"]:
        return {"ok": False, "error": key + " exists and records other changes"}
    return {**found["value"], "verified": True}
release = {"version": fetched["version"], "changes": fetched["changes"], "release_key": key}
await mesh.put(key, release, if_version=0)
return release
