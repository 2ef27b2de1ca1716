# Sourced: makes an Open MPI runtime unpacked from Debian's .deb files into $1 (dpkg -x) usable from there
# (no installation): Open MPI and PMIx find their components and help files relative to the prefix.
P="$1"
export OPAL_PREFIX=$P/usr
export MPIRUN=$P/usr/bin/mpirun.openmpi
export OPAL_SYSCONFDIR=$P/etc/openmpi
X=$P/usr/lib/x86_64-linux-gnu/pmix2
export PMIX_PREFIX=$X PMIX_LIBDIR=$X/lib PMIX_PKGLIBDIR=$X/lib/pmix PMIX_DATAROOTDIR=$X/share PMIX_DATADIR=$X/share \
  PMIX_PKGDATADIR=$X/share/pmix
export PATH=$P/usr/bin:$PATH
export LD_LIBRARY_PATH=$P/usr/lib/x86_64-linux-gnu:$P/usr/lib/x86_64-linux-gnu/openmpi/lib:$P/usr/lib/x86_64-linux-gnu/pmix2/lib:$P/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# One host: shared memory between ranks, the ob1 messaging layer; no InfiniBand/libfabric probing.
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_pml=ob1
export OMPI_MCA_mtl=^ofi,psm,psm2 OMPI_MCA_osc=^ucx
