#!/usr/bin/env bash
# Generates the malformed corpus and runs sparge on every file. usage: corpus_test.sh SPARGE OUTDIR PYTHON
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
rm -rf "$2"
"$3" "$HERE/make_corpus.py" "$2"
exec "$3" "$HERE/run_corpus.py" "$1" "$2"
