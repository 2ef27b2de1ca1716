#!/usr/bin/env bash
# Fetches the cuDNN frontend headers (NVIDIA's header-only C++ graph API over libcudnn) into DEST/include, from
# PyPI's nvidia-cudnn-frontend wheel at a pinned version, checked against its sha256. The headers stay in the
# build tree; they are never committed. Idempotent. Called by CMake (kernels/cudnn.cmake).
# usage: scripts/fetch-cudnn-frontend.sh DEST
set -euo pipefail
DEST="${1:?usage: fetch-cudnn-frontend.sh DEST}"
VERSION=1.32.0
WHEEL="nvidia_cudnn_frontend-${VERSION}-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"
SHA256=c6006556017a4d1c914c52a556c71b1267f2d6a0500f742e7b4edef539878df0
PY="${PYTHON:-python3}"

if [ -f "$DEST/include/cudnn_frontend.h" ] && [ "$(cat "$DEST/VERSION" 2>/dev/null)" = "$VERSION" ]; then
  exit 0
fi
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
# The wheel is the same for every Python; this one is named so that its checksum can be pinned.
"$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.11 --implementation cp \
  --platform manylinux_2_28_x86_64 --dest "$TMP" "nvidia-cudnn-frontend==$VERSION"
echo "$SHA256  $TMP/$WHEEL" | sha256sum --check --quiet -
rm -rf "$DEST.tmp"
mkdir -p "$DEST.tmp"
"$PY" - "$TMP/$WHEEL" "$DEST.tmp" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("include/")])
PY
echo "$VERSION" >"$DEST.tmp/VERSION"
rm -rf "$DEST"
mv "$DEST.tmp" "$DEST"
