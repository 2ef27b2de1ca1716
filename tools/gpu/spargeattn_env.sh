# Sourced by the GPU checks: unpacks SpargeAttn prebuilt for this GPU from folder $1 (spargeattn-py.tar.xz,
# spargeattn-so.tar.xz, the einops wheel) into $2/SpargeAttn, installs einops there when python lacks it, and
# sets SRC to the source folder to import it from ("" when $1 is empty) and PYTHONPATH.
spargeattn_env() {
  SRC=""
  [ -n "$1" ] || return 0
  SRC="$2/SpargeAttn"
  mkdir -p "$SRC"
  tar -xJf "$1/spargeattn-py.tar.xz" -C "$SRC" && tar -xJf "$1/spargeattn-so.tar.xz" -C "$SRC"
  python3 -c "import einops" 2>/dev/null ||
    python3 -m pip install -q --no-index --no-deps --target "$2/site" "$1"/einops-*.whl
  export PYTHONPATH="$2/site:${PYTHONPATH:-}"
}
