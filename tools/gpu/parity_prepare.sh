#!/usr/bin/env bash
# Prepares the numerics parity check against SpargeAttn (bench/parity_spargeattn.py): the Whisper captures,
# this build's masks and reports for every run of bench/parity_manifest.json, and a folder that carries to a
# GPU machine. usage: tools/gpu/parity_prepare.sh SPARGE_BIN WORK_DIR [SPARGEATTN_SOURCE]
#   SPARGEATTN_SOURCE: a checkout of thu-ml/SpargeAttn@bfd980b; it is copied into WORK_DIR/SpargeAttn with
#   setup.py's `-Xcompiler -include,cassert` removed and a README.md added (the build needs both).
# Then on the GPU machine: bash WORK_DIR/device.sh   (writes parity.json / parity.txt to $OUT; SAMPLE=path of
# captures/sample.h5 there, by default three folders up, as for WORK_DIR = .wt/<name>/gpu)
# Without a GPU, after a change to the CPU engine: re-run this script without SPARGEATTN_SOURCE and
#   python3 bench/parity_spargeattn.py --manifest WORK_DIR/manifest.json --upstream OLD_parity.json --out new.json
set -euo pipefail
sparge="$(realpath "$1")"; mkdir -p "$2"; work="$(realpath "$2")"; src="${3:-}"
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$work/parity"
[ -f "$work/parity/whisper_enc_b.h5" ] || python3 "$here/../../bench/make_whisper_captures.py" --out-dir "$work/parity"
cp "$here/../../bench/parity_spargeattn.py" "$here/../../bench/parity_runs.py" "$here/../../bench/parity_manifest.json" "$work/"
mv "$work/parity_manifest.json" "$work/manifest.json"
python3 "$here/../../bench/parity_runs.py" "$work/manifest.json" "$sparge" --engine cpu
if [ -n "$src" ]; then
  rm -rf "$work/SpargeAttn" && mkdir -p "$work/SpargeAttn"
  (cd "$src" && git archive HEAD csrc spas_sage_attn setup.py LICENSE) | tar -x -C "$work/SpargeAttn"
  sed -i 's|    "-Xcompiler", "-include,cassert",.*||' "$work/SpargeAttn/setup.py"
  echo "SpargeAttn (build copy for the parity check)" > "$work/SpargeAttn/README.md"
fi
cat > "$work/device.sh" <<'DEV'
#!/usr/bin/env bash
# On the GPU machine: wheels carried in whl/ (h5py, einops) if missing there, SpargeAttn built in place, the check.
set -uo pipefail
cd "$(dirname "$0")"
if ls whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site whl/*.whl && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="${PYTHONPATH:-}:$PWD/SpargeAttn" PYTHONUNBUFFERED=1
# The causal check reads the bundled sample; by default WORK_DIR is .wt/<name>/gpu inside the repository.
[ -e sample.h5 ] || ln -s "${SAMPLE:-$PWD/../../../captures/sample.h5}" sample.h5
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv | tee "$OUT/gpu.txt"
(cd SpargeAttn && TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=14 python3 setup.py build_ext --inplace > "$OUT/build.log" 2>&1) \
  || { echo "SpargeAttn build failed"; tail -40 "$OUT/build.log"; exit 1; }
python3 parity_spargeattn.py --manifest manifest.json --out "$OUT/parity.json" 2>&1 | tee "$OUT/parity.txt"
DEV
chmod +x "$work/device.sh"
echo "prepared $work"
