#!/usr/bin/env bash
# Installs every Debian package that building, testing and running Sparge Studio needs.
# Idempotent: prints nothing and installs nothing when everything is already there.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config ninja-build clang libclang-rt-dev
  libhdf5-dev hdf5-tools
  libcli11-dev nlohmann-json3-dev libfmt-dev libgtest-dev
  libimgui-dev libglfw3-dev libgl-dev libegl-dev libegl1-mesa-dev libgles-dev libstb-dev
  xvfb xauth libgl1-mesa-dri mesa-utils fonts-dejavu-core
  python3 python3-h5py python3-numpy python3-pytest
  libopenmpi-dev openmpi-bin
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
