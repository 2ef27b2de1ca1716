#!/usr/bin/env bash
# Packs what a multi-GPU machine without Open MPI needs to run `mpirun ... sparge` (tools/gpu/mpi_scaling.sh):
# the CUDA build's sparge and MPI plugin with the shared libraries the GPU machine lacks, and Debian's
# Open MPI runtime (its .deb files unpacked with dpkg -x into a prefix that tools/gpu/mpi_env.sh makes usable
# wherever it lands). Output: gpu-pack/mpi/ ($SPARGE_PACK_DIR/mpi; git-ignored).
# Build first: SPARGE_BUILD_DIR=build-gpu scripts/build.sh
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${SPARGE_BUILD_DIR:-$ROOT/build-gpu}"
OUTDIR="${SPARGE_PACK_DIR:-$ROOT/gpu-pack}/mpi"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/bin" "$TMP/lib" "$TMP/debs" "$TMP/ompi" "$OUTDIR"
[ -f "$BUILD/cli/libsparge_mpi.so" ] || { echo "no $BUILD/cli/libsparge_mpi.so: install libopenmpi-dev and rebuild"; exit 1; }
cp "$BUILD/cli/sparge" "$BUILD/cli/libsparge_mpi.so" "$BUILD/kernels/sparge_cuda_start_bench" "$TMP/bin/"
strip "$TMP/bin/sparge" "$TMP/bin/libsparge_mpi.so" "$TMP/bin/sparge_cuda_start_bench"
# sparge's own libraries (HDF5 and the like), not glibc/libstdc++ and not Open MPI's (from the .debs).
for lib in $(ldd "$TMP/bin/sparge" | awk '/=>/{print $3}' | sort -u); do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libresolv.so*|libutil.so*|libgcc_s.so*|libstdc++.so*) ;;
    *) cp -L "$lib" "$TMP/lib/" ;;
  esac
done
tar -cJf "$OUTDIR/pack.tar.xz" -C "$TMP" bin lib
# Open MPI and the libraries it loads (its transports' too), as Debian ships them.
(cd "$TMP/debs" && apt-get download -qq openmpi-bin openmpi-common libopenmpi3 libpmix2 libevent-core-2.1-7 \
  libevent-pthreads-2.1-7 libhwloc15 libfabric1 libucx0 libibverbs1 ibverbs-providers librdmacm1 \
  libpsm-infinipath1 libpsm2-2 libmunge2 libnl-3-200 libnl-route-3-200 libnuma1 libatomic1 2>/dev/null)
for f in "$TMP"/debs/*.deb; do dpkg -x "$f" "$TMP/ompi"; done
tar -cJf "$OUTDIR/ompi.tar.xz" -C "$TMP/ompi" .
cp "$ROOT/tools/gpu/mpi_scaling.sh" "$ROOT/tools/gpu/mpi_env.sh" "$OUTDIR/"
du -sh "$OUTDIR"
