#!/usr/bin/env bash
# The GUI's exports follow the CLI's rules (headless, EGL): never over the open capture, never into a
# folder that does not exist, links followed, modes kept, read-only files refused.
# usage: gui_exports_test.sh SPARGE_STUDIO SPARGE
set -uo pipefail
STUDIO="$1"
SPARGE="$2"
HERE="$(cd "$(dirname "$0")" && pwd)"
WORK="$(mktemp -d)"
trap 'chmod -R u+w "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT
cd "$WORK" || exit 1
# shellcheck source=../cli/test_lib.sh
source "$HERE/../cli/test_lib.sh"
export XDG_CONFIG_HOME="$WORK/config"  # never touch the user's settings
studio() {  # studio CAPTURE ACTION... ; prints the exit status
  local cap="$1"; shift
  local args=()
  for a in "$@"; do args+=(--action "$a"); done
  env -u DISPLAY "$STUDIO" "$cap" --backend egl --engine cpu --threads 2 --timeout 300 "${args[@]}" >log 2>&1
  echo $?
}

"$SPARGE" synth c.h5 --heads 2 --tokens 256 --dim 32 >/dev/null || fail "synth"
cp c.h5 orig.h5
[ "$(studio c.h5 export-masks=c.h5)" -eq 4 ] || fail "exporting masks onto the open capture must fail: $(cat log)"
grep -q "input" log || fail "the failure does not say why: $(cat log)"
cmp -s c.h5 orig.h5 || fail "the open capture was overwritten"

[ "$(studio c.h5 export-report=missing/r.md)" -eq 4 ] || fail "a report into a missing folder must fail"
[ ! -e missing ] || fail "the Markdown export created the missing folder"

echo old > real.csv && chmod 640 real.csv && ln -s real.csv link.csv
[ "$(studio c.h5 export-report=link.csv)" -eq 0 ] || fail "report through a link: $(cat log)"
[ -L link.csv ] || fail "the link was replaced by a file"
grep -q "^entry," real.csv || fail "the link's target was not written"
[ "$(stat -c %a real.csv)" = 640 ] || fail "mode not kept: $(stat -c %a real.csv)"

echo old > ro.json && chmod 444 ro.json
[ "$(studio c.h5 export-report=ro.json)" -eq 4 ] || fail "a read-only target must be refused"
[ "$(cat ro.json)" = old ] || fail "the read-only file was replaced"
leftovers="$(ls -A | grep -v -x -e c.h5 -e orig.h5 -e real.csv -e link.csv -e ro.json -e log -e config)"
[ -z "$leftovers" ] || fail "files left behind: $leftovers"
echo "ok: gui exports"
