# Shell helpers shared by the end-to-end test scripts (sourced, not run).

fail() { echo "FAIL: $*" >&2; exit 1; }

expect_exit() {  # expect_exit CODE MESSAGE_SUBSTRING -- command...
  local want="$1" msg="$2"; shift 3
  local out rc
  out="$("$@" 2>&1)"; rc=$?
  [ "$rc" -eq "$want" ] || fail "'$*' exited $rc, expected $want; output: $out"
  if [ -n "$msg" ]; then
    grep -qF -- "$msg" <<<"$out" || fail "'$*' output lacks '$msg'; output: $out"
  fi
}
