// Capture format v1 reader: validates all metadata at open time, reads tensor data lazily per head.
#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "capture_datasets.h"
#include "entry_attrs.h"
#include "hdf5_util.h"
#include "input_file.h"
#include "isolated.h"
#include "sparge/core/atomic_file.h"
#include "sparge/core/capture.h"
#include "sparge/core/digest.h"
#include "sparge/core/error.h"
#include "sparge/core/half.h"
#include "sparge/core/memory_guard.h"
#include "sparge/core/names.h"
#include "sparge/core/parallel.h"

namespace sparge::core {
namespace {

constexpr const char* kVersionAttr = "sparge_capture_version";
constexpr int kSupportedVersion = 1;
constexpr int64_t kMaxWindow = 2147483647;  // the largest dimension a capture may have (hdf5_util.h)

// Natural order: "l2" before "l10"; digit runs compare by value, everything else by character.
bool naturalLess(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const bool da = std::isdigit(static_cast<unsigned char>(a[i]));
    const bool db = std::isdigit(static_cast<unsigned char>(b[j]));
    if (da && db) {
      size_t ie = i, je = j;
      while (ie < a.size() && std::isdigit(static_cast<unsigned char>(a[ie]))) ++ie;
      while (je < b.size() && std::isdigit(static_cast<unsigned char>(b[je]))) ++je;
      size_t is = i, js = j;
      while (is + 1 < ie && a[is] == '0') ++is;
      while (js + 1 < je && b[js] == '0') ++js;
      const size_t la = ie - is, lb = je - js;
      if (la != lb) return la < lb;
      const int c = a.compare(is, la, b, js, lb);
      if (c != 0) return c < 0;
      i = ie;
      j = je;
    } else {
      if (a[i] != b[j]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]);
      ++i;
      ++j;
    }
  }
  if ((a.size() - i) != (b.size() - j)) return (a.size() - i) < (b.size() - j);
  return a < b;  // "l01" vs "l1": any fixed tie-break
}

herr_t collectLinkName(hid_t, const char* name, const H5L_info_t*, void* data) {
  static_cast<std::vector<std::string>*>(data)->push_back(name);
  return 0;
}

herr_t collectAttrName(hid_t, const char* name, const H5A_info_t*, void* data) {
  static_cast<std::vector<std::string>*>(data)->push_back(name);
  return 0;
}

std::string numberText(double d) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d);
  return std::string(buf, res.ptr);
}

// Text of a string or numeric root attribute (arrays of numbers as "[a, b]"); nullopt otherwise.
std::optional<std::string> attributeText(hid_t attr) {
  if (auto s = h5::readString(attr)) return s;
  h5::Handle type = h5::datatype(H5Aget_type(attr));
  if (!type) return std::nullopt;
  const H5T_class_t cls = H5Tget_class(type.get());
  if (cls != H5T_INTEGER && cls != H5T_FLOAT && cls != H5T_ENUM) return std::nullopt;
  const int64_t n = h5::elementCount(attr);
  if (n == 1) {
    if (cls == H5T_FLOAT) {
      if (auto d = h5::readNumber(attr)) return numberText(*d);
    } else {
      std::optional<uint64_t> beyond;
      if (auto i = h5::readInteger(attr, &beyond)) return std::to_string(*i);
      if (beyond) return std::to_string(*beyond);
    }
    return std::nullopt;
  }
  if (n < 1 || n > 64 || cls == H5T_ENUM) return std::nullopt;
  std::string out = "[";
  if (cls == H5T_INTEGER && H5Tget_sign(type.get()) == H5T_SGN_NONE) {
    std::vector<uint64_t> v(static_cast<size_t>(n));  // as int64, HDF5 would clamp values beyond 2^63 − 1
    if (H5Aread(attr, H5T_NATIVE_UINT64, v.data()) < 0) return std::nullopt;
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  } else if (cls == H5T_INTEGER) {
    std::vector<int64_t> v(static_cast<size_t>(n));
    if (H5Aread(attr, H5T_NATIVE_INT64, v.data()) < 0) return std::nullopt;
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  } else {
    std::vector<double> v(static_cast<size_t>(n));
    if (H5Aread(attr, H5T_NATIVE_DOUBLE, v.data()) < 0) return std::nullopt;
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + numberText(v[i]);
  }
  return out + "]";
}

// A thread's buffer for one head's raw 16-bit values, reused by its next reads: no read allocates and
// clears a buffer of its own. It keeps the largest head the thread read until the thread ends.
uint16_t* rawBuffer(size_t count) {
  thread_local std::unique_ptr<uint16_t[]> buffer;
  thread_local size_t capacity = 0;
  if (capacity < count) {
    buffer.reset();
    buffer = std::make_unique_for_overwrite<uint16_t[]>(count);
    capacity = count;
  }
  return buffer.get();
}

// Converts `n` stored 16-bit values to float and returns how many are NaN or ±Inf: those whose exponent
// bits are all set, exactly the values that are not finite once converted. One branch-free loop per kind
// of storage, which the compiler vectorises.
template <bool Swap, bool Half>
int64_t convert16(const uint16_t* raw, float* out, size_t n) {
  constexpr uint16_t kExponent = Half ? 0x7c00u : 0x7f80u;
  int64_t nonFinite = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint16_t x = Swap ? static_cast<uint16_t>((raw[i] >> 8) | (raw[i] << 8)) : raw[i];
    out[i] = Half ? halfToFloat(x) : bf16ToFloat(x);
    nonFinite += (x & kExponent) == kExponent;
  }
  return nonFinite;
}

int64_t convertRaw(Storage storage, bool swap, const uint16_t* raw, float* out, size_t n) {
  const bool half = storage == Storage::Half;
  if (swap) return half ? convert16<true, true>(raw, out, n) : convert16<true, false>(raw, out, n);
  return half ? convert16<false, true>(raw, out, n) : convert16<false, false>(raw, out, n);
}

int64_t countNonFinite(const float* values, size_t n) {
  int64_t count = 0;
  for (size_t i = 0; i < n; ++i) count += (std::bit_cast<uint32_t>(values[i]) & 0x7f800000u) == 0x7f800000u;
  return count;
}

}  // namespace

struct CaptureReader::Impl {
  struct EntryMeta {
    std::array<DatasetMeta, 3> ds;  // q, k, v
  };
  struct OpenDataset {
    size_t entry;
    int tensor;
    h5::Handle ds;
  };

  std::string path;
  int version = 0;
  bool guardInput = true;                      // register the file as an open input (not in trials)
  std::unique_ptr<InputFileGuard> inputGuard;  // no export may replace the open capture
  h5::Handle linkAccess = h5::refuseExternalLinks(H5P_LINK_ACCESS);
  h5::Handle groupAccess = h5::refuseExternalLinks(H5P_GROUP_ACCESS);
  h5::Handle file;
  std::vector<EntryInfo> infos;
  std::vector<EntryMeta> metas;
  std::map<std::string, size_t> index;
  std::vector<std::pair<std::string, std::string>> rootAttrs;
  // The last few datasets read stay open so that HDF5's chunk cache survives consecutive head reads
  // (it matters for files whose chunks span several heads, e.g. h5py's automatic chunking).
  mutable std::vector<OpenDataset> openDatasets;

  [[noreturn]] void fail(const std::string& h5path, const std::string& problem) const {
    throw Error(path + ":" + h5path, problem);
  }

  void readMetadataInChildFirst() const;
  void readMetadata();
  void openFile();
  void readVersion();
  void readRootAttributes();
  void readEntries();
  EntryInfo readEntry(const std::string& name, EntryMeta& meta);
  hid_t dataset(size_t entryIndex, Tensor tensor) const;
};

void CaptureReader::Impl::openFile() {
  namespace fs = std::filesystem;
  std::error_code ec;
  checkRegularInputFile(path, "capture");  // before any open: a FIFO would block it forever
  {
    std::ifstream probe(path, std::ios::binary);
    if (!probe) throw Error(path, "cannot read the file — check its permissions");
  }
  const htri_t isHdf5 = H5Fis_hdf5(path.c_str());
  if (isHdf5 < 0) throw Error(path, withDetail("cannot read the file") + " — check its permissions");
  if (isHdf5 == 0) {
    throw Error(path, fs::file_size(path, ec) == 0
                          ? "the file is empty, not an HDF5 capture — re-create the capture"
                          : "not an HDF5 file — a capture is an HDF5 file (see captures/FORMAT.md)");
  }
  file = h5::file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!file) fail("/", withDetail("file is truncated or corrupt: HDF5 cannot open it") + " — " + kFixCorrupt);
  if (guardInput) inputGuard = std::make_unique<InputFileGuard>(path);
}

void CaptureReader::Impl::readVersion() {
  const htri_t has = H5Aexists(file.get(), kVersionAttr);
  if (has < 0)
    fail("/", withDetail("file is truncated or corrupt: root attributes unreadable") + " — " + kFixCorrupt);
  if (has == 0) {
    fail("/", std::string("missing root attribute ") + kVersionAttr +
                  " — not a Sparge capture; add the attribute (= 1) as shown in captures/FORMAT.md");
  }
  h5::Handle attr = h5::attribute(H5Aopen(file.get(), kVersionAttr, H5P_DEFAULT));
  std::optional<int64_t> v = attr ? h5::readInteger(attr.get()) : std::nullopt;
  if (!v)
    fail("/", std::string("root attribute ") + kVersionAttr + " is not an integer — set it to the integer 1");
  if (*v != kSupportedVersion) {
    fail("/",
         "unknown capture version " + std::to_string(*v) + " (" + kVersionAttr +
             ") — this build reads version 1 only; use a matching Sparge Studio or re-export as version 1");
  }
  version = static_cast<int>(*v);
}

void CaptureReader::Impl::readRootAttributes() {
  std::vector<std::string> names;
  hsize_t idx = 0;
  if (H5Aiterate2(file.get(), H5_INDEX_NAME, H5_ITER_INC, &idx, collectAttrName, &names) < 0) return;
  for (const std::string& name : names) {
    h5::Handle attr = h5::attribute(H5Aopen(file.get(), name.c_str(), H5P_DEFAULT));
    if (!attr) continue;
    if (auto text = attributeText(attr.get())) rootAttrs.emplace_back(name, *text);
  }
}

void CaptureReader::Impl::readEntries() {
  const htri_t has = H5Lexists(file.get(), "entries", linkAccess.get());
  if (has < 0) fail("/entries", withDetail("file is truncated or corrupt") + " — " + kFixCorrupt);
  if (has > 0 && h5::isExternalLink(file.get(), "entries")) fail("/entries", kExternalLink);
  if (has == 0) {
    fail("/entries",
         "no /entries group — a capture keeps one group per attention call under /entries "
         "(see captures/FORMAT.md)");
  }
  h5::Handle entries = h5::group(H5Gopen2(file.get(), "entries", groupAccess.get()));
  if (!entries)
    fail("/entries", withDetail("/entries is not a group") + " — make /entries a group of entry groups");
  std::vector<std::string> names;
  hsize_t idx = 0;
  if (H5Literate(entries.get(), H5_INDEX_NAME, H5_ITER_INC, &idx, collectLinkName, &names) < 0) {
    fail("/entries", withDetail("file is truncated or corrupt: cannot list entries") + " — " + kFixCorrupt);
  }
  if (names.empty()) fail("/entries", "no entries — add at least one group /entries/<name> with q, k, v");
  std::sort(names.begin(), names.end(), naturalLess);
  for (const std::string& name : names) {
    if (h5::isExternalLink(entries.get(), name.c_str())) fail("/entries/" + name, kExternalLink);
    EntryMeta meta;
    EntryInfo info = readEntry(name, meta);
    index[name] = infos.size();
    infos.push_back(std::move(info));
    metas.push_back(meta);
  }
}

EntryInfo CaptureReader::Impl::readEntry(const std::string& name, EntryMeta& meta) {
  const std::string groupPath = "/entries/" + name;
  h5::Handle g = h5::group(H5Gopen2(file.get(), groupPath.c_str(), groupAccess.get()));
  if (!g) {
    fail(groupPath,
         withDetail("not a group") +
             " — every member of /entries must be a group holding q, k, v (or the file is corrupt)");
  }
  EntryInfo info;
  info.name = name;

  if (H5Aexists(g.get(), "layout") > 0) {
    h5::Handle attr = h5::attribute(H5Aopen(g.get(), "layout", H5P_DEFAULT));
    std::optional<std::string> s = attr ? h5::readString(attr.get()) : std::nullopt;
    std::string upper = s.value_or("");
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (s && upper == "HND") {
      info.layout = Layout::HND;
    } else if (s && upper == "NHD") {
      info.layout = Layout::NHD;
    } else {
      fail(groupPath, "attribute layout " + (s ? "= \"" + *s + "\"" : std::string("is not a string")) +
                          " — use \"HND\" ([B, H, N, D], the default) or \"NHD\" ([B, N, H, D])");
    }
  }

  const DatasetMeta q = inspectDataset(path, g.get(), groupPath, "q", info.layout, linkAccess.get());
  const DatasetMeta k = inspectDataset(path, g.get(), groupPath, "k", info.layout, linkAccess.get());
  const DatasetMeta v = inspectDataset(path, g.get(), groupPath, "v", info.layout, linkAccess.get());
  checkEntryDatasets(path, groupPath, q, k, v, info);
  auto num = [](int64_t x) { return std::to_string(x); };

  auto intAttr = [&](const char* attrName) -> std::optional<int64_t> {
    const htri_t has = H5Aexists(g.get(), attrName);
    if (has < 0) fail(groupPath, withDetail("file is truncated or corrupt") + " — " + kFixCorrupt);
    if (has == 0) return std::nullopt;
    h5::Handle attr = h5::attribute(H5Aopen(g.get(), attrName, H5P_DEFAULT));
    std::optional<uint64_t> beyond;
    std::optional<int64_t> val = attr ? h5::readInteger(attr.get(), &beyond) : std::nullopt;
    if (beyond)
      fail(groupPath, std::string("attribute ") + attrName + " = " + std::to_string(*beyond) +
                          " lies beyond the signed 64-bit range this reader takes (2^63 − 1) — store the "
                          "index as an int64");
    if (!val)
      fail(groupPath,
           std::string("attribute ") + attrName + " is not a single integer or bool — store it as an int");
    return val;
  };
  const int64_t causal = intAttr("causal").value_or(0);
  if (causal != 0 && causal != 1)
    fail(groupPath, "attribute causal = " + num(causal) + " — use 1 (causal) or 0 (not causal), or a bool");
  info.causal = causal == 1;
  info.layer = intAttr("layer");
  info.step = intAttr("step");
  if (info.layer.value_or(0) < 0)
    fail(groupPath, "attribute layer = " + num(*info.layer) + " — use an index >= 0");
  if (info.step.value_or(0) < 0)
    fail(groupPath, "attribute step = " + num(*info.step) + " — use an index >= 0");
  if (std::string problem = readEntryExtras(g.get(), info); !problem.empty()) fail(groupPath, problem);
  // Beyond any token count a window side means "unbounded"; such values would overflow query ± side.
  if (std::max(info.window.left, info.window.right) > kMaxWindow)
    fail(groupPath, "window " + toString(info.window) + " reaches beyond " + num(kMaxWindow) +
                        " keys — use -1 for an unbounded side");

  info.scale = 1.0 / std::sqrt(static_cast<double>(info.headDim));
  if (H5Aexists(g.get(), "scale") > 0) {
    h5::Handle attr = h5::attribute(H5Aopen(g.get(), "scale", H5P_DEFAULT));
    std::optional<double> s = attr ? h5::readNumber(attr.get()) : std::nullopt;
    if (!s || !std::isfinite(*s) || *s <= 0) {
      fail(groupPath, "attribute scale " +
                          (s ? "= " + numberText(*s) : std::string("is not a single number")) +
                          " — it must be a positive finite float (omit it for 1/sqrt(D))");
    }
    info.scale = *s;
    info.scaleFromFile = true;
  }

  meta.ds = {q, k, v};
  return info;
}

hid_t CaptureReader::Impl::dataset(size_t entryIndex, Tensor tensor) const {
  const int t = static_cast<int>(tensor);
  for (const OpenDataset& o : openDatasets) {
    if (o.entry == entryIndex && o.tensor == t) return o.ds.get();
  }
  const std::string dsPath = "/entries/" + infos[entryIndex].name + "/" + toString(tensor);
  h5::Handle dapl = h5::refuseExternalLinks(H5P_DATASET_ACCESS);
  H5Pset_chunk_cache(dapl.get(), 12421, 32u << 20, 0.75);
  h5::Handle ds = h5::dataset(H5Dopen2(file.get(), dsPath.c_str(), dapl.get()));
  if (!ds)
    fail(dsPath, withDetail("cannot open the dataset: file is truncated or corrupt") + " — " + kFixCorrupt);
  if (openDatasets.size() >= 3) openDatasets.erase(openDatasets.begin());
  openDatasets.push_back({entryIndex, t, std::move(ds)});
  return openDatasets.back().ds.get();
}

// HDF5 1.10 trusts some sizes stored in files (the global-heap objects behind variable-length strings),
// so a crafted capture can make the library overflow a buffer or loop. The metadata pass therefore runs
// once in a child process; only a file that the child read to the end without crashing is read here.
void CaptureReader::Impl::readMetadataInChildFirst() const {
  const char* limit = std::getenv("SPARGE_CAPTURE_OPEN_TIMEOUT");
  const double seconds = limit && std::atof(limit) > 0 ? std::atof(limit) : 120.0;
  const IsolatedResult r = runIsolated(
      [&] {
        h5::resetMutexAfterFork();
        Impl trial;
        trial.path = path;
        trial.guardInput = false;
        trial.readMetadata();
      },
      seconds);
  const std::string fix = " — the file is corrupt or was made to attack HDF5 readers; re-create the capture";
  if (r.outcome == IsolatedOutcome::Crashed) {
    throw Error(path, "the HDF5 library crashed reading the file's structure" +
                          (r.signal ? " (signal " + std::to_string(r.signal) + ")" : std::string()) + fix);
  }
  if (r.outcome == IsolatedOutcome::TimedOut)
    throw Error(path, "reading the file's structure did not finish in " + numberText(seconds) + " s" + fix);
}

void CaptureReader::Impl::readMetadata() {
  openFile();
  readVersion();
  readRootAttributes();
  readEntries();
}

CaptureReader::CaptureReader(const std::string& path) : impl_(std::make_unique<Impl>()) {
  std::lock_guard lock(h5::mutex());
  h5::silenceErrors();
  impl_->path = path;
  impl_->readMetadataInChildFirst();
  impl_->readMetadata();
}

CaptureReader::~CaptureReader() {
  std::lock_guard lock(h5::mutex());
  impl_.reset();
}

const std::string& CaptureReader::path() const {
  return impl_->path;
}
int CaptureReader::version() const {
  return impl_->version;
}
const std::vector<EntryInfo>& CaptureReader::entries() const {
  return impl_->infos;
}

const EntryInfo& CaptureReader::entry(const std::string& name) const {
  auto it = impl_->index.find(name);
  if (it == impl_->index.end()) {
    std::string names;
    for (size_t i = 0; i < impl_->infos.size() && i < 20; ++i)
      names += (i ? ", " : "") + shortForDisplay(impl_->infos[i].name);
    if (impl_->infos.size() > 20) names += ", ...";
    impl_->fail("/entries/" + shortForDisplay(name), "no such entry — the capture has: " + names);
  }
  return impl_->infos[it->second];
}

const std::vector<std::pair<std::string, std::string>>& CaptureReader::rootAttributes() const {
  return impl_->rootAttrs;
}

void CaptureReader::readHeadInto(const std::string& entryName, Tensor tensor, int64_t batch, int64_t head,
                                 float* out, int64_t* nonFinite, uint64_t* sliceHash) const {
  std::unique_lock lock(h5::mutex());
  h5::silenceErrors();  // a thread-safe HDF5 keeps this per thread, and loading threads read heads too
  const EntryInfo& info = entry(entryName);
  const size_t entryIndex = impl_->index.at(entryName);
  const DatasetMeta& m = impl_->metas[entryIndex].ds[static_cast<size_t>(tensor)];
  const std::string dsPath = "/entries/" + entryName + "/" + toString(tensor);
  if (batch < 0 || batch >= info.batch) {
    impl_->fail(dsPath, "batch index " + std::to_string(batch) + " out of range [0, " +
                            std::to_string(info.batch) + ") — pick a batch item the capture has");
  }
  if (head < 0 || head >= m.heads) {
    impl_->fail(dsPath, "head index " + std::to_string(head) + " out of range [0, " +
                            std::to_string(m.heads) + ") — this entry has " + std::to_string(m.heads) +
                            (tensor == Tensor::Q ? " query heads" : " KV heads"));
  }

  const hid_t ds = impl_->dataset(entryIndex, tensor);
  const auto n = static_cast<hsize_t>(m.tokens), d = static_cast<hsize_t>(m.dim);
  const auto b = static_cast<hsize_t>(batch), h = static_cast<hsize_t>(head);
  std::array<hsize_t, 4> start{}, count{};
  if (info.layout == Layout::HND) {
    start = {b, h, 0, 0};
    count = {1, 1, n, d};
  } else {
    start = {b, 0, h, 0};
    count = {1, n, 1, d};
  }
  const std::string where =
      "reading batch " + std::to_string(batch) + " head " + std::to_string(head) + " failed";
  h5::Handle fileSpace = h5::dataspace(H5Dget_space(ds));
  if (!fileSpace || H5Sselect_hyperslab(fileSpace.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(),
                                        nullptr) < 0) {
    impl_->fail(dsPath, withDetail(where + ": file is truncated or corrupt") + " — " + kFixCorrupt);
  }
  const hsize_t total = n * d;
  // The memory space has the selection's own 4-D shape: with a differently shaped (1-D) one, HDF5
  // maps chunks element by element, which made chunked reads ~20x slower.
  h5::Handle memSpace = h5::dataspace(H5Screate_simple(4, count.data(), nullptr));

  if (m.storage == Storage::Float32) {
    if (H5Dread(ds, H5T_NATIVE_FLOAT, memSpace.get(), fileSpace.get(), H5P_DEFAULT, out) < 0) {
      impl_->fail(dsPath, withDetail(where + ": file is truncated or corrupt") + " — " + kFixCorrupt);
    }
    lock.unlock();
    if (nonFinite) *nonFinite = countNonFinite(out, total);
    if (sliceHash) *sliceHash = headSliceHash(out, total, DType::Float32);
    return;
  }
  // Raw 16-bit read: the memory type is the file type itself, so HDF5 converts nothing (its own
  // half->float path is ~45x slower than ours).
  uint16_t* raw = rawBuffer(total);
  h5::Handle fileType = h5::datatype(H5Dget_type(ds));
  if (!fileType || H5Dread(ds, fileType.get(), memSpace.get(), fileSpace.get(), H5P_DEFAULT, raw) < 0) {
    impl_->fail(dsPath, withDetail(where + ": file is truncated or corrupt") + " — " + kFixCorrupt);
  }
  // The conversion needs no HDF5 call: other threads read their heads meanwhile.
  lock.unlock();
  const int64_t bad = convertRaw(m.storage, m.bigEndian, raw, out, total);
  if (nonFinite) *nonFinite = bad;
  // The stored values as little-endian words: the raw buffer itself unless the file is big-endian.
  if (sliceHash) {
    const DType stored = m.storage == Storage::Half ? DType::Float16 : DType::BFloat16;
    *sliceHash = m.bigEndian ? headSliceHashOfFloats(out, total, stored) : headSliceHash(raw, total, stored);
  }
}

std::vector<float> CaptureReader::readHead(const std::string& entryName, Tensor tensor, int64_t batch,
                                           int64_t head) const {
  const EntryInfo& info = entry(entryName);
  const bool q = tensor == Tensor::Q, v = tensor == Tensor::V;
  std::vector<float> out(
      static_cast<size_t>((q ? info.tokensQ : info.tokensKV) * (v ? info.headDimV : info.headDim)));
  readHeadInto(entryName, tensor, batch, head, out.data());
  return out;
}

EntryData loadEntry(const CaptureReader& reader, const std::string& entryName,
                    std::vector<NonFiniteReport>* nonFinite, int threads) {
  EntryData data;
  data.info = reader.entry(entryName);
  const EntryInfo& in = data.info;
  // Before allocating: the data plus one head's buffers is the least any run needs.
  checkMemory(estimateRunMemory(in, kGeometry128x64, 1), reader.path() + ":/entries/" + entryName);
  // Not cleared: every value is written by its head's read below, on the loading threads.
  data.q.resize(static_cast<size_t>(in.batch * in.headsQ * in.tokensQ * in.headDim));
  data.k.resize(static_cast<size_t>(in.batch * in.headsKV * in.tokensKV * in.headDim));
  data.v.resize(static_cast<size_t>(in.batch * in.headsKV * in.tokensKV * in.headDimV));
  // One task per (tensor, batch item, head), each writing its own slice: HDF5 reads take turns, the
  // conversions run side by side. Reports keep the (tensor, b, head) order whatever the threads.
  struct Slice {
    Tensor tensor;
    int64_t b, h;
    float* dst;
  };
  std::vector<Slice> slices;
  auto add = [&](Tensor t, FloatBuffer& dst, int64_t heads, int64_t perHead) {
    for (int64_t b = 0; b < in.batch; ++b)
      for (int64_t h = 0; h < heads; ++h) slices.push_back({t, b, h, dst.data() + (b * heads + h) * perHead});
  };
  add(Tensor::Q, data.q, in.headsQ, in.tokensQ * in.headDim);
  add(Tensor::K, data.k, in.headsKV, in.tokensKV * in.headDim);
  add(Tensor::V, data.v, in.headsKV, in.tokensKV * in.headDimV);
  // NaN/Inf are counted while each head is converted, not in a second pass over the entry.
  std::vector<int64_t> bad(slices.size(), 0);
  std::vector<uint64_t> hashes(slices.size(), 0);  // the digest's, hashed while each head is read
  parallelFor(int64_t(slices.size()), threads > 0 ? threads : bulkThreads(), [&](int64_t i) {
    const Slice& s = slices[size_t(i)];
    reader.readHeadInto(entryName, s.tensor, s.b, s.h, s.dst, nonFinite ? &bad[size_t(i)] : nullptr,
                        &hashes[size_t(i)]);
  });
  data.digest = entryDigest(in, hashes);
  for (size_t i = 0; i < slices.size(); ++i)
    if (bad[i] > 0 && nonFinite) nonFinite->push_back({slices[i].b, slices[i].h, slices[i].tensor, bad[i]});
  return data;
}

}  // namespace sparge::core
