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
# Export targets are checked when the actions are parsed, before the capture is opened and run (exit 2).
[ "$(studio c.h5 export-masks=c.h5)" -eq 2 ] || fail "exporting masks onto the open capture must fail: $(cat log)"
grep -q "input" log || fail "the failure does not say why: $(cat log)"
cmp -s c.h5 orig.h5 || fail "the open capture was overwritten"

[ "$(studio c.h5 export-report=missing/r.md)" -eq 2 ] || fail "a report into a missing folder must fail"
[ ! -e missing ] || fail "the Markdown export created the missing folder"
long="$(printf 'r%.0s' $(seq 1 295)).json"
for spec in "export-report=t.xyz|unknown format" "export-report=$long|the file name is 300 bytes long" \
            "export-params=$long|the file name is 300 bytes long"; do
  action="${spec%%|*}" msg="${spec##*|}"
  start=$(date +%s)
  [ "$(studio c.h5 "$action")" -eq 2 ] || fail "${action:0:40}: must be refused: $(head -c 400 log)"
  grep -qF "$msg" log || fail "${action:0:40}: message lacks '$msg': $(head -c 400 log)"
  grep -qF -- "--action" log || fail "${action:0:40}: message does not name the action: $(head -c 400 log)"
  ! grep -q "rendering with" log || fail "${action:0:40}: checked only after the window opened"
  [ $(($(date +%s) - start)) -lt 10 ] || fail "${action:0:40}: refused late"
done

# The command line's values follow the CLI's rules: empty, NaN and out-of-range values are refused (exit 2,
# naming the option) before a window opens; --threads beyond the machine is capped with a note.
for args in "--font-scale nan" "--font-scale 0" "--threads -1" "--size 4294967616x1000" "--timeout inf" \
            "--head -3" "--mouse nan,1"; do
  # shellcheck disable=SC2086
  env -u DISPLAY "$STUDIO" c.h5 --backend egl $args --action view=overview >log 2>&1
  rc=$?
  [ "$rc" -eq 2 ] || fail "sparge-studio $args: exit $rc, expected 2: $(cat log)"
  grep -qF -- "${args%% *}" log || fail "sparge-studio $args: message does not name the option: $(cat log)"
done
env -u DISPLAY "$STUDIO" "" --backend egl --action view=overview >log 2>&1
[ $? -eq 2 ] || fail "an empty capture path must be refused: $(cat log)"
grep -q "capture file" log || fail "empty capture path: $(cat log)"
env -u DISPLAY "$STUDIO" c.h5 --backend egl --engine cpu --threads 100000 --timeout 300 --action view=overview \
  >log 2>&1 || fail "--threads 100000: $(cat log)"
grep -q "note: --threads 100000 capped at" log || fail "no note about the thread cap: $(cat log)"

echo old > real.csv && chmod 640 real.csv && ln -s real.csv link.csv
[ "$(studio c.h5 export-report=link.csv)" -eq 0 ] || fail "report through a link: $(cat log)"
[ -L link.csv ] || fail "the link was replaced by a file"
grep -q "^entry," real.csv || fail "the link's target was not written"
[ "$(stat -c %a real.csv)" = 640 ] || fail "mode not kept: $(stat -c %a real.csv)"

echo old > ro.json && chmod 444 ro.json
[ "$(studio c.h5 export-report=ro.json)" -eq 2 ] || fail "a read-only target must be refused"
[ "$(cat ro.json)" = old ] || fail "the read-only file was replaced"
leftovers="$(ls -A | grep -v -x -e c.h5 -e orig.h5 -e real.csv -e link.csv -e ro.json -e log -e config)"
[ -z "$leftovers" ] || fail "files left behind: $leftovers"
echo "ok: gui exports"
