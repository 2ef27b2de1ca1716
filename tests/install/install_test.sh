#!/usr/bin/env bash
# Installs the build to a temporary prefix, moves the tree, and runs the installed programs from an
# unrelated folder: `sparge info` with no argument must open the bundled sample, `sparge-studio` must
# render it off-screen (EGL), and no program may carry the source tree's path to its data.
# usage: install_test.sh CMAKE BUILD_DIR WORK_DIR SOURCE_DIR cli|cli+gui
set -euo pipefail
cmake=$1 build=$2 work=$3 source=$4 parts=$5
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work" && mkdir -p "$work/elsewhere"
"$cmake" --install "$build" --prefix "$work/first" >"$work/install.log" ||
  fail "install: $(cat "$work/install.log")"
mv "$work/first" "$work/moved"
P="$work/moved"
[ -f "$P/share/sparge-studio/sample.h5" ] || fail "sample capture not installed"
cd "$work/elsewhere"
unset SPARGE_DATA_DIR

out=$("$P/bin/sparge" info 2>&1) || fail "sparge info after moving the tree: $out"
grep -qF "$P/share/sparge-studio/sample.h5" <<<"$out" ||
  fail "sparge info did not open the installed sample: $out"
grep -qF "l20_s000" <<<"$out" || fail "sparge info lists no entries: $out"
if grep -aqF "$source/captures" "$P/bin/sparge"; then fail "bin/sparge holds the source tree's data path"; fi

# The override wins, and a wrong one is named in the error (no silent fallback).
out=$(SPARGE_DATA_DIR="$work/nowhere" "$P/bin/sparge" info 2>&1) && fail "a wrong SPARGE_DATA_DIR was ignored"
grep -qF "SPARGE_DATA_DIR" <<<"$out" || fail "the error does not name SPARGE_DATA_DIR: $out"
out=$(SPARGE_DATA_DIR="$P/share/sparge-studio" "$P/bin/sparge" info 2>&1) || fail "SPARGE_DATA_DIR: $out"

if [ "$parts" = cli+gui ]; then
  [ -f "$P/share/applications/sparge-studio.desktop" ] || fail "desktop entry not installed"
  [ -f "$P/share/icons/hicolor/scalable/apps/sparge-studio.svg" ] || fail "icon not installed"
  [ -f "$P/share/sparge-studio/fonts/DejaVuSans.ttf" ] || fail "fonts not installed"
  # Data paths only: CUDA builds carry source file names as line information for the profilers.
  for data in "$source/captures" "$source/assets"; do
    if grep -aqF "$data" "$P/bin/sparge-studio"; then fail "bin/sparge-studio holds the data path $data"; fi
  done
  # No file argument: the app opens the bundled sample; select-entry fails (exit 4) if it did not.
  export XDG_CONFIG_HOME="$work/config"
  env -u DISPLAY "$P/bin/sparge-studio" --backend egl --engine cpu --size 1200x800 --frames 3 --timeout 300 \
    --action select-entry=l15_s000 --screenshot "$work/shot.png" >"$work/studio.log" 2>&1 ||
    fail "sparge-studio after moving the tree: $(cat "$work/studio.log")"
  # A rendered window compresses to far more than a blank one (a few KB).
  [ "$(stat -c %s "$work/shot.png")" -gt 20000 ] || fail "the screenshot is missing or blank"
fi
echo "install tree relocatable: ok"
