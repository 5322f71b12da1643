#!/usr/bin/env bash
# One word, one meaning (round two): move modules and rename names to their one meaning.
#
# Re-runnable: every step is a no-op once done, so run it again after merging a branch
# that still uses the old names (`scripts/rename_round2.sh && git diff`), then commit.
# Lines carrying the marker "old-name alias" (the public API's aliases for the old names
# in plait/__init__.py) are left alone.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"

# Module moves: old path -> new path. A file that exists at both (a merge re-added the
# old one) is left for a person: the script says so and fails.
moves=(
  "plait/hosts:plait/cluster"
  "plait/runs/host.py:plait/runs/owner_services.py"
  "plait/runs/serving.py:plait/runs/heartbeats.py"
  "plait/runs/ports.py:plait/runs/mesh_ports.py"
  "plait/cli/_serving.py:plait/cli/_foreground.py"
  "tests/runs/test_serving.py:tests/runs/test_heartbeats.py"
)
status=0
move() {
  local old=$1 new=$2
  if [ -d "$old" ]; then
    mkdir -p "$new"
    local f
    while IFS= read -r f; do
      move "$f" "$new/${f#"$old"/}"
    done < <(git ls-files "$old")
    rmdir "$old" 2>/dev/null || true
  elif [ -e "$old" ]; then
    if [ -e "$new" ]; then
      echo "rename_round2: both $old and $new exist; fold $old into $new by hand" >&2
      status=1
    else
      mkdir -p "$(dirname "$new")"
      git mv "$old" "$new"
    fi
  fi
}
for pair in "${moves[@]}"; do
  move "${pair%%:*}" "${pair#*:}"
done

files() {
  git ls-files -- plait tests bench examples README.md DESIGN.md \
    | grep -E '\.(py|md|toml|txt|html|js|yaml|yml|cfg|ini)$' || true
}

# Names, whole words only; each pattern maps an old name to its new one.
subst=(
  's#\bplait\.hosts\b#plait.cluster#g'
  's#\bplait/hosts/#plait/cluster/#g'
  's#\bplait\.runs\.host\b#plait.runs.owner_services#g'
  's#\bplait/runs/host\.py\b#plait/runs/owner_services.py#g'
  's#\bplait\.runs\.serving\b#plait.runs.heartbeats#g'
  's#\bplait/runs/serving\.py\b#plait/runs/heartbeats.py#g'
  's#\bplait\.runs\.ports\b#plait.runs.mesh_ports#g'
  's#\bplait/runs/ports\.py\b#plait/runs/mesh_ports.py#g'
  's#\bplait\.cli\._serving\b#plait.cli._foreground#g'
  's#\bplait/cli/_serving\.py\b#plait/cli/_foreground.py#g'
  's#\btest_serving\b#test_heartbeats#g'
  's#\bRunHost\b#OwnerServices#g'
  's#\bDecisionBoard\b#DecisionAsker#g'
  's#\bDecisionDesk\b#DecisionAnswerer#g'
  's#\b\(services\|served\|serving\)\.host\b#\1.owner_services#g'
)
script=""
for s in "${subst[@]}"; do
  script+="/old-name alias/!${s}"$'\n'
done
mapfile -t all < <(files)
if [ ${#all[@]} -gt 0 ]; then
  # Touch only files holding an old name, so mtimes of the rest stay put.
  mapfile -t hit < <(grep -lE 'plait[./]hosts|plait[./]runs[./](host|serving|ports)\b|_serving\b|test_serving|RunHost|DecisionBoard|DecisionDesk|(services|served|serving)\.host\b' "${all[@]}" || true)
  if [ ${#hit[@]} -gt 0 ]; then
    sed -i "$script" "${hit[@]}"
  fi
fi

# The layer table names the package; the runs room's line names its modules.
sed -i 's#^    "hosts",$#    "cluster",#' tests/test_layers.py
sed -i -e 's#^    "ports",$#    "mesh_ports",#' -e 's#^    "serving",$#    "heartbeats",#' \
  -e 's#^    "host",$#    "owner_services",#' tests/runs/test_layers.py

# Fields named for the old meaning of "host": the run services' part for run owners.
sed -i -e 's#^    host: OwnerServices$#    owner_services: OwnerServices#' \
  -e 's#\bself\.host\b#self.owner_services#g' plait/runs/services.py
sed -i -e 's#^    def host(self) -> OwnerServices:#    def owner_services(self) -> OwnerServices:#' \
  -e 's#\bself\.services\.host\b#self.services.owner_services#g' plait/runs/serve.py

# record_key of a keyed run (plait/graphs/keyed.py) is not plait.runs.record.record_key.
mapfile -t keyed < <(grep -lE 'plait\.graphs\.keyed|^def record_key\(graph' plait tests bench examples -r --include='*.py' || true)
for f in "${keyed[@]}"; do
  if [ "$f" = plait/graphs/keyed.py ] || grep -qE 'from plait\.graphs\.keyed import[^#]*\brecord_key\b' "$f"; then
    sed -i 's#\brecord_key\b#keyed_record_key#g' "$f"
  fi
done

# Imports and __all__ sort by name, so renamed names move: let ruff put them back in order.
ruff=.venv/bin/ruff
[ -x "$ruff" ] || ruff=$(command -v ruff || true)
if [ -n "$ruff" ]; then
  "$ruff" check -q --select I,RUF022 --fix plait tests bench examples || true
  "$ruff" format -q plait tests bench examples
else
  echo "rename_round2: ruff not found; run ruff check --select I,RUF022 --fix and ruff format" >&2
fi

exit $status
