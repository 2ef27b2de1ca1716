#!/usr/bin/env bash
# Runs the tests of SpargeApply, the reference engine and sparge-eval with the environment that
# scripts/install-py-deps.sh made (torch, transformers, the SmolLM2 weights, this package installed).
# usage: run_apply_tests.sh VENV_DIR. Exit 77 (ctest: skipped) with the reason when that environment is absent.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
VPY="$1/bin/python"
if [ ! -x "$VPY" ]; then
  echo "captures_apply_pytest skipped: no $VPY (scripts/install-py-deps.sh installs torch, transformers and the weights)"
  exit 77
fi
cd "$(mktemp -d)"  # the installed package, not the source tree, is what the tests import
exec "$VPY" -m pytest -q -rsx -p no:cacheprovider "$HERE/test_reference_engine.py" "$HERE/test_apply.py" \
  "$HERE/test_apply_smollm2.py"
