#!/usr/bin/env bash
# Runs sparge-studio in screenshot mode on the sample capture at two θ/τ settings (under Xvfb with a real
# GLFW window, or with EGL off-screen and no X server), then checks the PNGs: not blank, and the mask
# region differs between the two settings.
set -euo pipefail
mode=$1 app=$2 check=$3 capture=$4 out=$5
mkdir -p "$out"
export XDG_CONFIG_HOME="$out/config"   # never touch the user's settings
common=("$capture" --entry l15_s000 --head 2 --size 1600x1000 --frames 4 --engine cpu --timeout 500)
a=(--set theta=-1 --set tau=0.5 --set lambda=20)
b=(--set theta=-1 --set tau=0.995 --set lambda=50)
case "$mode" in
  xvfb)
    # The pointer rests at the screen centre under Xvfb; the app ignores the real pointer in
    # screenshot mode, so no hover effect can leak into the images.
    xvfb-run -a -s "-screen 0 1920x1200x24" "$app" "${common[@]}" "${a[@]}" --backend glfw --screenshot "$out/a.png"
    xvfb-run -a -s "-screen 0 1920x1200x24" "$app" "${common[@]}" "${b[@]}" --backend glfw --screenshot "$out/b.png"
    ;;
  egl)
    env -u DISPLAY "$app" "${common[@]}" "${a[@]}" --backend egl --screenshot "$out/a.png"
    env -u DISPLAY "$app" "${common[@]}" "${b[@]}" --backend egl --screenshot "$out/b.png"
    ;;
  *) echo "mode must be xvfb or egl" >&2; exit 2 ;;
esac
# The head-detail and grid area: the centre column of the default layout (fractions of the image).
"$check" "$out/a.png" "$out/b.png" 0.21 0.05 0.67 0.95
