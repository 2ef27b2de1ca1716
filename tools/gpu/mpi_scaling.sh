#!/usr/bin/env bash
# Scaling of `sparge tune` over GPUs on one multi-GPU machine: a synthetic 28 layers x 32 heads x 16K x
# D 128 capture tuned on 1 GPU (one process) and with mpirun on 4 and 2 GPUs; wall times, speedups, and
# whether every parameter file equals the one-GPU file byte for byte. Runs from the pack made by
# tools/gpu/mpi_pack.sh (gpu-pack/mpi, copied to the GPU machine). Results: $OUT/log.txt, $OUT/p*.json, and
# every run's unfiltered output with the progress lines in $OUT/raw*.txt.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT=${OUT:-$PWD/gpu-out}
W=/tmp/spmpi
mkdir -p "$OUT" $W/ompi
# The capture (10.5 GB at full size) goes to RAM when /dev/shm has room: the timings are about tuning.
DATA=$W
if [ "$(df --output=avail -k /dev/shm 2>/dev/null | tail -1)" -gt 25000000 ] 2>/dev/null; then DATA=/dev/shm/spmpi; fi
mkdir -p $DATA
tar -xJf "$HERE/pack.tar.xz" -C $W
tar -xJf "$HERE/ompi.tar.xz" -C $W/ompi
source "$HERE/mpi_env.sh" $W/ompi
export LD_LIBRARY_PATH=$W/lib:$LD_LIBRARY_PATH
# SPARGE_EXE runs another build of sparge (its MPI plugin beside it) with the same pack's libraries.
S=${SPARGE_EXE:-$W/bin/sparge}
LOG=$OUT/log.txt
now() { date +%s%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }'; }
# Overridable for a dry run on a CPU machine: ENGINE=cpu NGPU=2 ENTRIES=4 HEADS=4 TOKENS=1024 DIM=64.
# ORDER sets which GPU counts run, in order (below).
NGPU=${NGPU:-$(nvidia-smi -L | wc -l)}
ENTRIES=${ENTRIES:-28} HEADS=${HEADS:-32} TOKENS=${TOKENS:-16384} DIM=${DIM:-128}
# Exact numerics by default (QUANT overrides): scaling is about spreading the work over ranks, and the
# quantized numerics add the same extra exact pass per probe on every rank.
TUNE=(--l1 0.05 --l2 0.06 --engine "${ENGINE:-cuda}" --quant "${QUANT:-none}")
{
  nvidia-smi --query-gpu=index,name,driver_version,persistence_mode,clocks.sm,clocks.max.sm --format=csv 2>&1
  nproc; free -g | head -2; df -h /dev/shm /tmp | tail -2
  # Sockets, NUMA nodes and each GPU's CPU affinity: mpirun leaves the ranks unbound (--bind-to none) and
  # each rank binds itself to the CPUs near its GPU (SPARGE_BIND_NEAR_GPU=0 in the environment keeps the
  # ranks unbound, for comparison); the rank list in the output shows each rank's CPUs.
  lscpu 2>/dev/null | grep -E '^(Socket|NUMA node)' || true
  nvidia-smi topo -m 2>/dev/null | head -$((NGPU + 2)) || true
  echo "== mpirun smoke test (MPI init on $NGPU ranks)"
  if ! timeout 60 $MPIRUN --bind-to none -np "$NGPU" $S --version; then
    echo "shared-memory transport failed; using TCP over loopback"
    export OMPI_MCA_btl=self,tcp
    timeout 60 $MPIRUN --bind-to none -np "$NGPU" $S --version || echo "MPI smoke test FAILED"
  fi
  # The launcher's own share of a job's wall time: starting N processes that exit at once, and the same
  # with MPI's initialisation and finalisation (sparge --version opens the MPI transport under a launcher).
  for n in 2 $NGPU; do
    t=$(now); $MPIRUN --bind-to none -np $n true; a=$(elapsed $t)
    t=$(now); $MPIRUN --bind-to none -np $n $S --version >/dev/null; b=$(elapsed $t)
    echo "launcher, $n processes: mpirun true $a s, mpirun sparge --version $b s"
  done
  # CUDA's start-up, a fixed part of every rank's time: one process alone seeing one GPU (as a rank does)
  # and seeing all of them, then one process per GPU at once; with the hardware work queues sparge asks for
  # (2, unless CUDA_DEVICE_MAX_CONNECTIONS is set).
  if [ -x $W/bin/sparge_cuda_start_bench ]; then
    Q=${CUDA_DEVICE_MAX_CONNECTIONS:-2}
    echo "CUDA start-up with CUDA_DEVICE_MAX_CONNECTIONS=$Q"
    CUDA_DEVICE_MAX_CONNECTIONS=$Q CUDA_VISIBLE_DEVICES=0 $W/bin/sparge_cuda_start_bench "CUDA start-up, 1 process alone, 1 GPU visible"
    CUDA_DEVICE_MAX_CONNECTIONS=$Q $W/bin/sparge_cuda_start_bench "CUDA start-up, 1 process alone, $NGPU GPUs visible"
    for i in $(seq 0 $((NGPU - 1))); do
      CUDA_DEVICE_MAX_CONNECTIONS=$Q CUDA_VISIBLE_DEVICES=$i $W/bin/sparge_cuda_start_bench "CUDA start-up, $NGPU at once, GPU $i" &
    done
    wait
  fi
  # Uncompressed (synth's default) and on every core: ~30 s for the full size on a 64-core machine; gzip
  # made it take over 7 minutes, single-threaded inside HDF5.
  t=$(now)
  # KEEP_CAPTURE=1 keeps the capture for a following run of this script (and reuses one left by a previous).
  [ "${KEEP_CAPTURE:-0}" = 1 ] && [ -f $DATA/cap.h5 ] && echo "synth: reusing $DATA/cap.h5" || \
  timeout 240 $S synth $DATA/cap.h5 --entries $ENTRIES --heads $HEADS --tokens $TOKENS --dim $DIM --seed 1 \
    --threads "$(nproc)" >/dev/null || { echo "synth FAILED or took over 240 s"; exit 1; }
  echo "capture ready: $(elapsed $t) s, $(du -h $DATA/cap.h5 | cut -f1) in $DATA"
  declare -A T
  # ORDER (default "1 4 2") may repeat a count: a later run's time replaces an earlier one's, so a leading
  # "4" warms every GPU and the page cache before the timed runs.
  for n in ${ORDER:-1 4 2}; do
    [ "$n" -le "$NGPU" ] || continue
    echo "== tune on $n GPU(s)"
    devs=$(seq -s, 0 $((n - 1)))
    t=$(now)
    if [ "$n" -eq 1 ]; then
      CUDA_VISIBLE_DEVICES=0 timeout 200 $S tune $DATA/cap.h5 "${TUNE[@]}" -o $OUT/p1.json 2>&1 | tee -a $OUT/raw1.txt | grep -v '^tune:' | grep -vE '^[0-9]+ +[-0-9]|^  head |^head |^$'
    else
      CUDA_VISIBLE_DEVICES=$devs timeout 200 $MPIRUN --bind-to none -np $n $S tune $DATA/cap.h5 "${TUNE[@]}" -o $OUT/p$n.json 2>&1 \
        | tee -a $OUT/raw$n.txt | grep -v '^tune:' | grep -vE '^[0-9]+ +[-0-9]|^  head |^head |^$'
    fi
    T[$n]=$(elapsed $t)
    echo "wall: ${T[$n]} s"
  done
  echo "== scaling (wall time of the whole sparge tune command, capture in the page cache)"
  # job: sparge's own time from its start to the parameters written (the launcher's start and exit left out)
  job() { grep -a "heads tuned" $OUT/raw$1.txt | tail -1 | sed -E 's/.* in ([0-9.]+) s,.*/\1/'; }
  printf "%-6s %10s %9s %8s %9s %s\n" GPUs "wall s" speedup "job s" speedup "params file"
  for n in 1 2 4; do
    [ -n "${T[$n]:-}" ] || continue
    same="-"
    [ "$n" -gt 1 ] && { cmp -s $OUT/p1.json $OUT/p$n.json && same="identical to 1 GPU" || same="DIFFERS from 1 GPU"; }
    printf "%-6s %10.1f %8.2fx %8.1f %8.2fx %s\n" $n ${T[$n]} "$(awk -v a="${T[1]}" -v b="${T[$n]}" 'BEGIN { print a / b }')" \
      "$(job $n)" "$(awk -v a="$(job 1)" -v b="$(job $n)" 'BEGIN { print a / b }')" "$same"
  done
} 2>&1 | tee $LOG
[ "${KEEP_CAPTURE:-0}" = 1 ] || rm -rf /dev/shm/spmpi
