// Capture format v1 writer: q/k/v in the requested dtype and layout, one head per gzip chunk.
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <set>

#include "entry_attrs.h"
#include "hdf5_util.h"
#include "sparge/core/capture.h"
#include "sparge/core/error.h"
#include "sparge/core/half.h"

namespace sparge::core {
namespace {

std::string withDetail(const std::string& problem) {
  const std::string detail = h5::lastErrorDetail();
  return detail.empty() ? problem : problem + " (HDF5: " + detail + ")";
}

}  // namespace

struct CaptureWriter::Impl {
  std::string path;
  int fd = -1;  // the destination, opened up front so that a bad path fails at once
  Compression compression = Compression::Gzip;
  h5::Handle file;
  h5::Handle entries;
  std::set<std::string> names;

  ~Impl() {
    if (fd >= 0) ::close(fd);
  }

  [[noreturn]] void fail(const std::string& h5path, const std::string& problem) const {
    throw Error(path + ":" + h5path, problem);
  }

  void writeTensor(hid_t group, const std::string& groupPath, Tensor tensor, std::span<const float> data,
                   const EntryInfo& info, int64_t heads, int64_t tokens, int64_t dim);
};

void CaptureWriter::Impl::writeTensor(hid_t group, const std::string& groupPath, Tensor tensor,
                                      std::span<const float> data, const EntryInfo& info, int64_t heads,
                                      int64_t tokens, int64_t dim) {
  const char* name = toString(tensor);
  const std::string dsPath = groupPath + "/" + name;
  const std::string writeFailed = "writing failed";
  const std::string fixWrite = " — check free disk space and permissions";
  const auto B = static_cast<hsize_t>(info.batch), H = static_cast<hsize_t>(heads),
             N = static_cast<hsize_t>(tokens), D = static_cast<hsize_t>(dim);
  const bool nhd = info.layout == Layout::NHD;
  const std::array<hsize_t, 4> dims =
      nhd ? std::array<hsize_t, 4>{B, N, H, D} : std::array<hsize_t, 4>{B, H, N, D};
  const std::array<hsize_t, 4> chunk =
      nhd ? std::array<hsize_t, 4>{1, N, 1, D} : std::array<hsize_t, 4>{1, 1, N, D};

  h5::Handle space = h5::dataspace(H5Screate_simple(4, dims.data(), nullptr));
  h5::Handle dcpl = h5::plist(H5Pcreate(H5P_DATASET_CREATE));
  if (!space || !dcpl || H5Pset_chunk(dcpl.get(), 4, chunk.data()) < 0)
    fail(dsPath, withDetail(writeFailed) + fixWrite);
  if (compression == Compression::Gzip && H5Zfilter_avail(H5Z_FILTER_DEFLATE) > 0) {
    // Shuffle groups the high and low bytes of 16/32-bit values, which makes gzip far more effective.
    H5Pset_shuffle(dcpl.get());
    H5Pset_deflate(dcpl.get(), 4);
  }

  h5::Handle half;
  hid_t fileType = H5T_IEEE_F32LE, memType = H5T_NATIVE_FLOAT;
  if (info.dtype == DType::Float16) {
    half = h5::halfType();
    if (!half) fail(dsPath, withDetail(writeFailed) + fixWrite);
    fileType = memType = half.get();  // our bits, written without HDF5 conversion
  } else if (info.dtype == DType::BFloat16) {
    fileType = H5T_STD_U16LE;
    memType = H5T_NATIVE_UINT16;
  }
  h5::Handle ds =
      h5::dataset(H5Dcreate2(group, name, fileType, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
  if (!ds) fail(dsPath, withDetail(writeFailed) + fixWrite);
  if (info.dtype == DType::BFloat16 && !h5::writeString(ds.get(), "dtype", "bfloat16")) {
    fail(dsPath, withDetail(writeFailed) + fixWrite);
  }

  // One head at a time (one chunk each) keeps the conversion buffer small.
  const hsize_t perHead = N * D;
  const std::array<hsize_t, 4> count =
      nhd ? std::array<hsize_t, 4>{1, N, 1, D} : std::array<hsize_t, 4>{1, 1, N, D};
  // Same 4-D shape as the file selection: HDF5's fast path (a 1-D memory space is mapped per element).
  h5::Handle memSpace = h5::dataspace(H5Screate_simple(4, count.data(), nullptr));
  std::vector<uint16_t> bits(info.dtype == DType::Float32 ? 0 : perHead);
  for (hsize_t b = 0; b < B; ++b) {
    for (hsize_t h = 0; h < H; ++h) {
      const float* src = data.data() + (b * H + h) * perHead;
      const void* buf = src;
      if (info.dtype == DType::Float16) {
        for (hsize_t i = 0; i < perHead; ++i) bits[i] = floatToHalf(src[i]);
        buf = bits.data();
      } else if (info.dtype == DType::BFloat16) {
        for (hsize_t i = 0; i < perHead; ++i) bits[i] = floatToBf16(src[i]);
        buf = bits.data();
      }
      const std::array<hsize_t, 4> start =
          nhd ? std::array<hsize_t, 4>{b, 0, h, 0} : std::array<hsize_t, 4>{b, h, 0, 0};
      if (H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) <
              0 ||
          H5Dwrite(ds.get(), memType, memSpace.get(), space.get(), H5P_DEFAULT, buf) < 0) {
        fail(dsPath, withDetail(writeFailed) + fixWrite);
      }
    }
  }
}

CaptureWriter::CaptureWriter(const std::string& path, Compression compression)
    : impl_(std::make_unique<Impl>()) {
  std::lock_guard lock(h5::mutex());
  h5::silenceErrors();
  impl_->path = path;
  impl_->compression = compression;
  impl_->fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (impl_->fd < 0) {
    throw Error(path, "cannot create the file (" + std::string(std::strerror(errno)) +
                          ") — check that the folder exists and is writable");
  }
  // Built in memory and written at close() (h5::createInMemory says why).
  impl_->file = h5::createInMemory();
  if (!impl_->file) throw Error(path, withDetail("cannot create the file in memory"));
  if (!h5::writeInteger(impl_->file.get(), "sparge_capture_version", 1)) {
    impl_->fail("/", withDetail("writing the version attribute failed") + " — check free disk space");
  }
  impl_->entries = h5::group(H5Gcreate2(impl_->file.get(), "entries", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  if (!impl_->entries)
    impl_->fail("/entries", withDetail("creating the group failed") + " — check free disk space");
}

CaptureWriter::~CaptureWriter() {
  try {
    close();
  } catch (...) {
    // A destructor must not throw; callers who care about a failed flush call close() themselves.
  }
}

void CaptureWriter::setRootAttribute(const std::string& name, const std::string& value) {
  std::lock_guard lock(h5::mutex());
  if (!impl_->file) impl_->fail("/", "the writer is closed — set attributes before close()");
  if (name.empty() || name == "sparge_capture_version") {
    impl_->fail(
        "/", "cannot set root attribute '" + name + "' — pick another name (the version is written for you)");
  }
  if (!h5::writeString(impl_->file.get(), name, value)) {
    impl_->fail("/", withDetail("writing root attribute " + name + " failed") + " — check free disk space");
  }
}

void CaptureWriter::addEntry(const EntryInfo& info, std::span<const float> q, std::span<const float> k,
                             std::span<const float> v) {
  std::lock_guard lock(h5::mutex());
  const std::string groupPath = "/entries/" + info.name;
  if (!impl_->file) impl_->fail(groupPath, "the writer is closed — add entries before close()");
  if (info.name.empty() || info.name.find('/') != std::string::npos || info.name == "." ||
      info.name == "..") {
    impl_->fail(groupPath, "invalid entry name '" + info.name + "' — use a non-empty name without '/'");
  }
  if (impl_->names.count(info.name))
    impl_->fail(groupPath, "entry written twice — entry names must be unique");
  if (info.batch <= 0 || info.headsQ <= 0 || info.headsKV <= 0 || info.tokensQ <= 0 || info.tokensKV <= 0 ||
      info.headDim <= 0 || info.headDimV <= 0) {
    impl_->fail(groupPath, "every dimension (B, Hq, Hkv, Nq, Nkv, D, Dv) must be at least 1");
  }
  if (info.headsQ % info.headsKV != 0) {
    impl_->fail(groupPath, "Hq = " + std::to_string(info.headsQ) + " is not a multiple of Hkv = " +
                               std::to_string(info.headsKV) + " — GQA needs Hq to be a multiple of Hkv");
  }
  if (info.scaleFromFile && !(info.scale > 0 && std::isfinite(info.scale))) {
    impl_->fail(groupPath, "scale must be a positive finite number");
  }
  if (std::string p = windowProblem(info.window, info.causal); !p.empty()) impl_->fail(groupPath, p);
  if (std::string p = kindProblem(info.kind); !p.empty()) impl_->fail(groupPath, p);
  auto checkSize = [&](std::span<const float> data, Tensor t, int64_t heads, int64_t tokens, int64_t dim) {
    const int64_t expected = info.batch * heads * tokens * dim;
    if (static_cast<int64_t>(data.size()) != expected) {
      impl_->fail(groupPath + "/" + toString(t), "got " + std::to_string(data.size()) + " values, expected " +
                                                     std::to_string(expected) + " (B*H*N*D, HND order)");
    }
  };
  checkSize(q, Tensor::Q, info.headsQ, info.tokensQ, info.headDim);
  checkSize(k, Tensor::K, info.headsKV, info.tokensKV, info.headDim);
  checkSize(v, Tensor::V, info.headsKV, info.tokensKV, info.headDimV);

  h5::Handle g =
      h5::group(H5Gcreate2(impl_->entries.get(), info.name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  if (!g) impl_->fail(groupPath, withDetail("creating the group failed") + " — check free disk space");
  impl_->names.insert(info.name);

  const std::string attrFailed = "writing attributes failed";
  bool ok = h5::writeInteger(g.get(), "causal", info.causal ? 1 : 0);
  if (info.scaleFromFile) ok = ok && h5::writeDouble(g.get(), "scale", info.scale);
  if (info.layer) ok = ok && h5::writeInteger(g.get(), "layer", *info.layer);
  if (info.step) ok = ok && h5::writeInteger(g.get(), "step", *info.step);
  if (info.layout == Layout::NHD) ok = ok && h5::writeString(g.get(), "layout", "NHD");
  ok = ok && writeEntryExtras(g.get(), info);
  if (!ok) impl_->fail(groupPath, withDetail(attrFailed) + " — check free disk space");

  impl_->writeTensor(g.get(), groupPath, Tensor::Q, q, info, info.headsQ, info.tokensQ, info.headDim);
  impl_->writeTensor(g.get(), groupPath, Tensor::K, k, info, info.headsKV, info.tokensKV, info.headDim);
  impl_->writeTensor(g.get(), groupPath, Tensor::V, v, info, info.headsKV, info.tokensKV, info.headDimV);
}

void CaptureWriter::close() {
  std::lock_guard lock(h5::mutex());
  if (!impl_ || !impl_->file) return;
  impl_->entries.reset();
  std::string image;
  const bool assembled = h5::fileImage(impl_->file.get(), image);
  impl_->file.reset();  // closes even if assembling failed, so a retry cannot touch a dead handle
  if (!assembled) throw Error(impl_->path, withDetail("assembling the file in memory failed"));
  std::string why = h5::writeAll(impl_->fd, image);
  if (::close(impl_->fd) != 0 && why.empty()) why = std::strerror(errno);
  impl_->fd = -1;
  if (!why.empty())
    throw Error(impl_->path, "writing the file failed (" + why + ") — check free disk space and permissions");
}

}  // namespace sparge::core
