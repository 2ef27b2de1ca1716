// Writing the token grid of one entry into an existing capture: validate, write, flush, read back.
#include "sparge/core/annotate.h"

#include "entry_attrs.h"
#include "hdf5_util.h"
#include "input_file.h"
#include "sparge/core/capture.h"
#include "sparge/core/error.h"

namespace sparge::core {
namespace {

// Writes the attributes with the file open for writing; HDF5's file lock makes the open fail while another
// program (h5py, a running sparge) has the file open, which is the only guard HDF5 offers.
void writeGrid(const std::string& path, const std::string& groupPath, const std::optional<TokenGrid>& grid) {
  std::lock_guard lock(h5::mutex());
  h5::silenceErrors();
  h5::Handle file = h5::file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
  if (!file)
    throw Error(path, "cannot open the capture for writing (" + h5::lastErrorDetail() +
                          ") — check that the file is writable and that no other program has it open");
  h5::Handle group = h5::group(H5Gopen2(file.get(), groupPath.c_str(), H5P_DEFAULT));
  if (!group) throw Error(path + ":" + groupPath, "cannot open the entry group for writing");
  if (!writeGridAttributes(group.get(), grid))
    throw Error(path + ":" + groupPath, "writing the grid attributes failed (" + h5::lastErrorDetail() + ")");
  if (H5Fflush(file.get(), H5F_SCOPE_GLOBAL) < 0)
    throw Error(path, "flushing the capture failed (" + h5::lastErrorDetail() + ")");
}

}  // namespace

void setEntryGrid(const std::string& path, const std::string& entryName,
                  const std::optional<TokenGrid>& grid) {
  checkRegularInputFile(path, "capture");
  const std::string groupPath = "/entries/" + entryName;
  {
    const CaptureReader before(path);  // validates every entry
    const EntryInfo& info = before.entry(entryName);
    if (grid)
      if (std::string p = gridProblem(*grid, info.tokensQ, info.tokensKV); !p.empty())
        throw Error(path + ":" + groupPath, p);
  }
  writeGrid(path, groupPath, grid);
  const CaptureReader after(path);
  if (after.entry(entryName).grid != grid)
    throw Error(path + ":" + groupPath,
                "the grid read back differs from the one written — the file may be "
                "damaged; restore it from a copy");
}

}  // namespace sparge::core
