#!/usr/bin/env bash
# A/B of `sparge bench` on one GPU: the same sweep with two builds (say main and a branch), run in turns
# A B A B so that clock drift falls on both, then per cell (N, D, causal, top-k) the ratio of B's whole-call
# median to A's and of their dense walks, and the geometric mean over cells. Each build is a pack made by
# tools/gpu/pack.sh (pack.tar.xz: bin/ and lib/) or a folder holding bin/sparge (or cli/sparge, a build
# folder) with its libraries on the system.
# usage (repository root on the GPU machine):
#   tools/gpu/ab_bench.sh A B [sparge bench options]     e.g. A=main-pack/pack.tar.xz B=gpu-pack/pack.tar.xz
# Defaults: --tokens 8192,16384 --dims 64,128 --topk 1.0,0.5,0.2, two rounds ($ROUNDS); output in $OUT
# (default ./gpu-out/ab): the bench JSON of every run, log.txt and ab.txt (the ratios).
set -uo pipefail
[ $# -ge 2 ] || { sed -n '2,11p' "$0"; exit 2; }
A="$1"
B="$2"
shift 2
ARGS=("$@")
[ ${#ARGS[@]} -gt 0 ] || ARGS=(--tokens 8192,16384 --dims 64,128 --topk 1.0,0.5,0.2)
OUT="${OUT:-$PWD/gpu-out/ab}"
ROUNDS="${ROUNDS:-2}"
mkdir -p "$OUT"
HERE="$(cd "$(dirname "$0")" && pwd)"

# The sparge binary of build $1 (unpacked under $OUT/$2 when it is a pack); its libraries go on the path.
binary() {
  local src="$1" name="$2"
  if [ -f "$src" ]; then
    mkdir -p "$OUT/$name" && tar -xJf "$src" -C "$OUT/$name" || return 1
    echo "$OUT/$name/bin/sparge"
  elif [ -x "$src/bin/sparge" ]; then
    echo "$src/bin/sparge"
  elif [ -x "$src/cli/sparge" ]; then
    echo "$src/cli/sparge"
  else
    return 1
  fi
}
SA="$(binary "$A" a)" || { echo "no sparge in $A"; exit 2; }
SB="$(binary "$B" b)" || { echo "no sparge in $B"; exit 2; }
export LD_LIBRARY_PATH="$OUT/a/lib:$OUT/b/lib:${LD_LIBRARY_PATH:-}"
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  echo "A: $A"
  echo "B: $B"
  echo "sparge bench ${ARGS[*]}"
} | tee "$OUT/log.txt"
for r in $(seq 1 "$ROUNDS"); do
  for side in a b; do
    bin="$SA"
    [ "$side" = b ] && bin="$SB"
    echo "== round $r, build $side" | tee -a "$OUT/log.txt"
    "$bin" bench "${ARGS[@]}" --json "$OUT/$side$r.json" >>"$OUT/log.txt" 2>&1 \
      || { echo "build $side failed in round $r (see $OUT/log.txt)"; exit 1; }
  done
done
python3 - "$OUT" "$ROUNDS" <<'PY' | tee "$OUT/ab.txt"
import json, math, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def cells(side):
    c = {}
    for r in range(1, rounds + 1):
        for res in json.load(open(f"{out}/{side}{r}.json"))["results"]:
            for s in res["sparse"]:
                key = (res["tokens"], res["head_dim"], res["causal"], s["topk"])
                c.setdefault(key, {"call": [], "dense": []})
                c[key]["call"].append(s["call"]["median_ms"])
                c[key]["dense"].append(res["dense"]["median_ms"])
    return c
a, b = cells("a"), cells("b")
print(f"{'N':>6} {'D':>4} {'causal':>6} {'top-k':>5} {'A call':>8} {'B call':>8} {'B/A':>6} {'B/A dense':>9}")
logs = []
for key in sorted(a):
    if key not in b:
        continue
    ca, cb = statistics.median(a[key]["call"]), statistics.median(b[key]["call"])
    da, db = statistics.median(a[key]["dense"]), statistics.median(b[key]["dense"])
    logs.append(math.log(cb / ca))
    print(f"{key[0]:>6} {key[1]:>4} {str(bool(key[2])):>6} {key[3]:>5.2f} {ca:>8.3f} {cb:>8.3f} {cb / ca:>6.3f} {db / da:>9.3f}")
if logs:
    print(f"geometric mean of B/A (whole call) over {len(logs)} cells: {math.exp(sum(logs) / len(logs)):.3f}")
PY
