#!/usr/bin/env bash
# Runs the sparge_attn package's tests with the environment that scripts/install-py-deps.sh made (torch and the
# package installed there). usage: run_python_tests.sh VENV_DIR. Exit 77 (ctest: skipped) when it is absent.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
VPY="$1/bin/python"
if [ ! -x "$VPY" ]; then
  echo "capi_python skipped: no $VPY (scripts/install-py-deps.sh installs torch and sparge_attn)"
  exit 77
fi
cd "$(mktemp -d)"  # the installed package, not the source tree, is what the tests import
exec "$VPY" -m pytest -q -rsx -p no:cacheprovider "$HERE/test_sparge_attn.py"
