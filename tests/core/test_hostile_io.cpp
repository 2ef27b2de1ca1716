// Hostile inputs and safe outputs in core: shapes that overflow, data that was never written, attributes
// out of range, special files and external links as captures; export targets (links, modes, read-only,
// open inputs, stale temporaries); names that are not UTF-8; the memory estimate; parameter files with
// numbers beyond double range and the "complete" flag.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "hdf5_util.h"  // RAII handles and attribute writers for hand-made files
#include "isolated.h"
#include "sparge/core/atomic_file.h"
#include "sparge/core/capture.h"
#include "sparge/core/error.h"
#include "sparge/core/exports.h"
#include "sparge/core/memory_guard.h"
#include "sparge/core/names.h"
#include "sparge/core/params_io.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace sparge::core;
using sparge::Error;
using sparge::test::expectError;
using sparge::test::TempDir;

namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> folderNames(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// ---------- captures made with the HDF5 C API: one entry "e0" whose q is described by the caller ----------

struct QSpec {
  std::vector<hsize_t> dims;
  std::vector<hsize_t> chunk;  // empty: contiguous
  bool write = true;           // false: declared, never written
};
QSpec data(std::vector<hsize_t> dims, std::vector<hsize_t> chunk = {}) {
  return QSpec{std::move(dims), std::move(chunk), true};
}
QSpec declared(std::vector<hsize_t> dims, std::vector<hsize_t> chunk = {}) {
  return QSpec{std::move(dims), std::move(chunk), false};
}
// Link creation that makes missing intermediate groups ("entries" of "entries/e0").
sparge::core::h5::Handle groupCreation() {
  sparge::core::h5::Handle p = sparge::core::h5::plist(H5Pcreate(H5P_LINK_CREATE));
  H5Pset_create_intermediate_group(p.get(), 1);
  return p;
}
const QSpec kSmall = data({1, 2, 16, 8});

void writeDataset(hid_t group, const char* name, const QSpec& spec) {
  namespace h5 = sparge::core::h5;
  h5::Handle space = h5::dataspace(H5Screate_simple(int(spec.dims.size()), spec.dims.data(), nullptr));
  h5::Handle dcpl = h5::plist(H5Pcreate(H5P_DATASET_CREATE));
  if (!spec.chunk.empty()) H5Pset_chunk(dcpl.get(), int(spec.chunk.size()), spec.chunk.data());
  h5::Handle ds = h5::dataset(
      H5Dcreate2(group, name, H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
  if (!spec.write) return;
  hsize_t n = 1;
  for (hsize_t d : spec.dims) n *= d;
  const std::vector<float> values(n, 0.5f);
  H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
}

// Writes a capture with one entry "e0"; `extra` may add attributes or links to the entry group.
template <class Fn>
void makeCapture(const std::string& path, const QSpec& q, const QSpec& kv, Fn extra) {
  namespace h5 = sparge::core::h5;
  h5::Handle f = h5::file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  h5::writeInteger(f.get(), "sparge_capture_version", 1);
  h5::Handle g =
      h5::group(H5Gcreate2(f.get(), "entries/e0", groupCreation().get(), H5P_DEFAULT, H5P_DEFAULT));
  writeDataset(g.get(), "q", q);
  writeDataset(g.get(), "k", kv);
  writeDataset(g.get(), "v", kv);
  extra(g.get());
}

void makeCapture(const std::string& path, const QSpec& q, const QSpec& kv) {
  makeCapture(path, q, kv, [](hid_t) {});
}

}  // namespace

// ============================ captures ============================

TEST(HostileCapture, ShapesThatOverflowAreRefusedAtOpen) {
  TempDir dir;
  // The reported file: Hq = 2^58 + 1 made B·H·N·D wrap and the loader overflow its buffer.
  makeCapture(dir.file("heads.h5"), declared({1, (hsize_t(1) << 58) + 1, 1, 64}, {1, 1, 1, 64}),
              data({1, 1, 1, 64}));
  expectError([&] { CaptureReader r(dir.file("heads.h5")); },
              {"heads.h5:/entries/e0/q", "more than 2147483647"});
  makeCapture(dir.file("product.h5"), declared({1, 2147483647, 2147483647, 64}, {1, 1, 1, 64}),
              data({1, 1, 1, 64}));
  expectError([&] { CaptureReader r(dir.file("product.h5")); }, {"more values than any machine can hold"});
}

TEST(HostileCapture, DataThatWasNeverWrittenIsRefused) {
  TempDir dir;
  // 4 GiB of q declared in a few KB: every chunk unallocated (it would read as zeros).
  makeCapture(dir.file("declared.h5"), declared({1, 32, 1 << 20, 32}, {1, 1, 1024, 32}),
              data({1, 1, 16, 32}));
  expectError([&] { CaptureReader r(dir.file("declared.h5")); }, {"/entries/e0/q", "0 of its 32768 chunks"});
  makeCapture(dir.file("contiguous.h5"), declared({1, 2, 16, 8}), kSmall);
  expectError([&] { CaptureReader r(dir.file("contiguous.h5")); }, {"never written"});
  makeCapture(dir.file("ok.h5"), data({1, 2, 16, 8}, {1, 1, 16, 8}), kSmall);
  EXPECT_NO_THROW(CaptureReader r(dir.file("ok.h5")));
}

TEST(HostileCapture, AttributesOutOfRangeAreRefused) {
  TempDir dir;
  const QSpec& q = kSmall;
  const QSpec& kv = kSmall;
  makeCapture(dir.file("c1.h5"), q, kv, [](hid_t g) { sparge::core::h5::writeDouble(g, "causal", 1e300); });
  expectError([&] { CaptureReader r(dir.file("c1.h5")); }, {"attribute causal is not a single integer"});
  makeCapture(dir.file("c2.h5"), q, kv, [](hid_t g) { sparge::core::h5::writeInteger(g, "causal", -7); });
  expectError([&] { CaptureReader r(dir.file("c2.h5")); }, {"causal = -7"});
  makeCapture(dir.file("l1.h5"), q, kv, [](hid_t g) { sparge::core::h5::writeDouble(g, "layer", 1e300); });
  expectError([&] { CaptureReader r(dir.file("l1.h5")); }, {"attribute layer is not a single integer"});
  makeCapture(dir.file("l2.h5"), q, kv, [](hid_t g) { sparge::core::h5::writeDouble(g, "layer", -9.3e18); });
  expectError([&] { CaptureReader r(dir.file("l2.h5")); }, {"attribute layer is not a single integer"});
  makeCapture(dir.file("ok.h5"), q, kv, [](hid_t g) {
    sparge::core::h5::writeDouble(g, "causal", 1.0);
    sparge::core::h5::writeDouble(g, "layer", 12.0);
  });
  CaptureReader r(dir.file("ok.h5"));
  EXPECT_TRUE(r.entry("e0").causal);
  EXPECT_EQ(r.entry("e0").layer, 12);
}

TEST(HostileCapture, SpecialFilesAndExternalLinksAreRefused) {
  TempDir dir;
  ASSERT_EQ(::mkfifo(dir.file("pipe.h5").c_str(), 0600), 0);
  expectError([&] { CaptureReader r(dir.file("pipe.h5")); }, {"pipe.h5", "FIFO"});
  expectError([&] { CaptureReader r("/dev/null"); }, {"/dev/null", "a device"});
  expectError([&] { CaptureReader r(dir.path().string()); }, {"is a folder"});
  // q is a link into another file (which could be a FIFO): never followed.
  makeCapture(dir.file("other.h5"), kSmall, kSmall);
  const std::string pipe = dir.file("pipe.h5");
  makeCapture(dir.file("link.h5"), kSmall, kSmall, [&](hid_t g) {
    H5Ldelete(g, "q", H5P_DEFAULT);
    H5Lcreate_external(pipe.c_str(), "/q", g, "q", H5P_DEFAULT, H5P_DEFAULT);
  });
  expectError([&] { CaptureReader r(dir.file("link.h5")); }, {"/entries/e0/q", "external link"});
}

TEST(HostileCapture, ACrashInsideHdf5IsAnError) {
  // HDF5 1.10 copies a variable-length string out of the global heap with the size stored in the file;
  // a huge size makes the library overflow its buffer (a segfault on main's build).
  TempDir dir;
  const std::string path = dir.file("heap.h5");
  {
    CaptureWriter w(path);
    w.setRootAttribute("model", "provenance text");  // variable-length: kept in the global heap
    EntryInfo info;
    info.name = "e0";
    info.batch = info.headsQ = info.headsKV = 1;
    info.tokensQ = info.tokensKV = 8;
    info.headDim = info.headDimV = 4;
    const std::vector<float> x(32, 0.25f);
    w.addEntry(info, x, x, x);
    w.close();
  }
  std::string bytes = readFile(path);
  const size_t heap = bytes.find("GCOL");
  ASSERT_NE(heap, std::string::npos);
  // Collection header (signature, version, 3 reserved, size) is 16 bytes; the first object's size is
  // 8 bytes after its index, reference count and 4 reserved bytes.
  const uint64_t huge = 0x2000000000000004ull;
  for (int i = 0; i < 8; ++i) bytes[heap + 24 + i] = char((huge >> (8 * i)) & 0xff);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  expectError([&] { CaptureReader r(path); },
              {"heap.h5", "the HDF5 library crashed reading the file's structure"});
}

TEST(HostileCapture, IsolatedWorkReportsHowItEnded) {
  EXPECT_EQ(runIsolated([] {}, 10).outcome, IsolatedOutcome::Finished);
  EXPECT_EQ(runIsolated([] { throw Error("x", "y"); }, 10).outcome, IsolatedOutcome::Threw);
  const IsolatedResult crash = runIsolated([] { std::raise(SIGSEGV); }, 10);
  EXPECT_EQ(crash.outcome, IsolatedOutcome::Crashed);
  EXPECT_EQ(crash.signal, SIGSEGV);
  EXPECT_EQ(runIsolated([] { ::sleep(30); }, 0.2).outcome, IsolatedOutcome::TimedOut);
}

// ============================ export targets ============================

TEST(AtomicOutput, FollowsLinksAndKeepsTheMode) {
  TempDir dir;
  const std::string target = dir.file("real.json"), link = dir.file("link.json");
  writeTextAtomically(target, "old");
  ::chmod(target.c_str(), 0640);
  fs::create_symlink("real.json", link);
  writeTextAtomically(link, "new");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(readFile(target), "new");
  struct stat st {};
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(folderNames(dir.path()), (std::vector<std::string>{"link.json", "real.json"}));
}

TEST(AtomicOutput, RefusesReadOnlyFilesFoldersAndSpecialFiles) {
  TempDir dir;
  const std::string ro = dir.file("ro.json");
  writeTextAtomically(ro, "keep");
  ::chmod(ro.c_str(), 0444);
  expectError([&] { writeTextAtomically(ro, "x"); }, {"ro.json", "is read-only"});
  EXPECT_EQ(readFile(ro), "keep");
  expectError([&] { writeTextAtomically(dir.path().string(), "x"); }, {"is a folder"});
  expectError([&] { writeTextAtomically(dir.file("missing/r.json"), "x"); }, {"missing", "does not exist"});
  ASSERT_EQ(::mkfifo(dir.file("fifo").c_str(), 0600), 0);
  expectError([&] { writeTextAtomically(dir.file("fifo"), "x"); }, {"not a regular file"});
  expectError([&] { checkWritableTarget(dir.file("missing/r.json"), "--report r.json"); },
              {"--report r.json", "does not exist"});
  EXPECT_NO_THROW(checkWritableTarget(dir.file("new.json"), "--report new.json"));
  EXPECT_EQ(folderNames(dir.path()),
            (std::vector<std::string>{"fifo", "ro.json"}));  // the check wrote nothing
}

TEST(AtomicOutput, NeverReplacesAnOpenCapture) {
  TempDir dir;
  const std::string cap = dir.file("c.h5"), hard = dir.file("hard.h5");
  makeCapture(cap, kSmall, kSmall);
  ASSERT_EQ(::link(cap.c_str(), hard.c_str()), 0);
  const std::string before = readFile(cap);
  {
    CaptureReader reader(cap);
    expectError([&] { writeTextAtomically(cap, "masks"); }, {"c.h5", "never replaces its input"});
    expectError([&] { writeTextAtomically(hard, "masks"); }, {"hard.h5", "never replaces its input"});
    EXPECT_EQ(readFile(cap), before);
  }
  EXPECT_NO_THROW(writeTextAtomically(hard, "closed: may be replaced"));
}

TEST(AtomicOutput, FailuresNameTheTargetAndLeaveNothing) {
  TempDir dir;
  const std::string path = dir.file("r.json");
  try {
    writeAtomically(path, [](const std::string& temp) { throw Error(temp, "simulated failure in " + temp); });
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), path + ": simulated failure in " + path);
  }
  EXPECT_TRUE(folderNames(dir.path()).empty());
}

TEST(AtomicOutput, RemovesTemporariesOfDeadProcessesOnly) {
  TempDir dir;
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);  // a pid that no longer runs
  const std::string dead = dir.file(".r.json.tmp-" + std::to_string(child) + "-0-1");
  const std::string alive = dir.file(".r.json.tmp-" + std::to_string(::getpid()) + "-9-9");
  const std::string other = dir.file(".x.json.tmp-" + std::to_string(child) + "-0-1");
  for (const std::string& p : {dead, alive, other}) std::ofstream(p) << "left over";
  writeTextAtomically(dir.file("r.json"), "new");
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(alive));
  EXPECT_TRUE(fs::exists(other));
}

// ============================ names ============================

TEST(Names, Utf8SafeEscapesOnlyInvalidText) {
  EXPECT_EQ(utf8Safe("l00 θ—ok \\ \x01"), "l00 θ—ok \\ \x01");  // valid UTF-8 is left alone
  EXPECT_EQ(utf8Safe("a\xff\\b"), "a\\xff\\\\b");
  EXPECT_EQ(utf8Safe("\xc0\xaf"), "\\xc0\\xaf");                    // overlong '/'
  EXPECT_EQ(utf8Safe("\xed\xa0\x80"), "\\xed\\xa0\\x80");           // a UTF-16 surrogate
  EXPECT_EQ(utf8Safe("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
  EXPECT_EQ(utf8Safe("\xe2\x82"), "\\xe2\\x82");                    // truncated sequence
  EXPECT_TRUE(isValidUtf8(utf8Safe("x\x80y\xfe")));
  EXPECT_NE(utf8Safe("a\xff\\"), utf8Safe("a\xfe\\"));
}

TEST(Names, PrintableEscapesControlCharacters) {
  EXPECT_EQ(printable("\x1b[31mred\x1b[0m"), "\\x1b[31mred\\x1b[0m");
  EXPECT_EQ(printable("a\nb\tc\x7f"), "a\\x0ab\\x09c\\x7f");
  EXPECT_EQ(printable("\xc2\x9b"
                      "2J"),
            "\\u009b2J");  // the one-byte CSI of 8-bit terminals
  EXPECT_EQ(printable("θ ±"), "θ ±");
}

TEST(Names, CsvFieldsAreQuotedWhenNeeded) {
  EXPECT_EQ(csvField("l00"), "l00");
  EXPECT_EQ(csvField("a,b"), "\"a,b\"");
  EXPECT_EQ(csvField("say \"hi\"\nbye"), "\"say \"\"hi\"\"\nbye\"");
  EXPECT_EQ(csvField("x\xff"), "x\\xff");
}

TEST(Names, ReportsOfOddNamesAreValid) {
  EntryResult r;
  r.info.name = "a,\"b\"\n\xff";
  r.config.geometry = kGeometry128x64;
  r.engine = "cpu";
  HeadResult h;
  r.heads.push_back(h);
  const std::string csv = reportCsv({r});
  const std::string row = csv.substr(csv.find('\n') + 1);
  EXPECT_EQ(row.rfind("\"a,\"\"b\"\"\n\\xff\",0,0,128x64,", 0), 0u) << row;
  TempDir dir;
  EXPECT_NO_THROW(writeReportJson(dir.file("r.json"), {r}, "cap\xfe.h5"));
  const std::string json = readFile(dir.file("r.json"));
  EXPECT_NE(json.find("\"cap\\\\xfe.h5\""), std::string::npos) << json.substr(0, 200);
  EXPECT_NE(json.find("a,\\\"b\\\"\\n\\\\xff"), std::string::npos);
}

// ============================ memory ============================

TEST(MemoryGuard, EstimatesFromTheShape) {
  EntryInfo e;
  e.batch = 1;
  e.headsQ = 2;
  e.headsKV = 1;
  e.tokensQ = 256;
  e.tokensKV = 512;
  e.headDim = 64;
  e.headDimV = 32;
  const MemoryEstimate m = estimateRunMemory(e, kGeometry128x64, 2);
  EXPECT_DOUBLE_EQ(m.entryBytes, 4.0 * (2 * 256 * 64 + 512 * (64 + 32)));  // 327680
  // 2 × 8 blocks; per head 15 bytes a block + a 256 × 32 float output; validity 9 bytes a block once.
  EXPECT_DOUBLE_EQ(m.engineBytes, 2 * (15 * 16 + 4 * 256 * 32) + 9 * 16);
  EXPECT_DOUBLE_EQ(m.referenceBytes, 2 * (4 * 16 + 4 * 256 * 32));
  // A shape whose products overflow int64 is still a finite estimate.
  e.tokensQ = e.tokensKV = 2147483647;
  e.headsQ = e.headsKV = 2147483647;
  const double huge = estimateRunMemory(e, kGeometry64x128, e.headsQ).total();
  EXPECT_TRUE(std::isfinite(huge) && huge > 1e20) << huge;
}

TEST(MemoryGuard, TooMuchIsAClearError) {
  MemoryEstimate m;
  m.entryBytes = 3.0 * 1024 * 1024;
  m.engineBytes = 1024 * 1024;
  setMemoryLimit(2.0 * 1024 * 1024);
  expectError([&] { checkMemory(m, "c.h5:/entries/l0"); },
              {"c.h5:/entries/l0", "needs about 4 MiB", "entry data 3 MiB", "--max-memory limit is 2 MiB",
               "--heads"});
  setMemoryLimit(8.0 * 1024 * 1024);
  EXPECT_NO_THROW(checkMemory(m, "c.h5:/entries/l0"));
  setMemoryLimit(0);
  if (availableMemoryBytes() > 0) {
    m.entryBytes = 1e30;
    expectError([&] { checkMemory(m, "x"); }, {"MemAvailable", "--entry"});
  }
}

TEST(MemoryGuard, ParsesSizes) {
  EXPECT_DOUBLE_EQ(parseByteSize("8G", "--max-memory"), 8.0 * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(parseByteSize("512MiB", "--max-memory"), 512.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(parseByteSize("1.5k", "--max-memory"), 1536.0);
  EXPECT_DOUBLE_EQ(parseByteSize("1000", "--max-memory"), 1000.0);
  for (const char* bad : {"", "0", "-1", "lots", "8X", "1e400", "nan"})
    expectError([&] { parseByteSize(bad, "--max-memory"); }, {"--max-memory", "is not a size"});
}

// ============================ parameter files ============================

namespace {
ParamsFile smallParams() {
  ParamsFile f;
  f.l1 = 0.05;
  f.l2 = 0.06;
  ParamsGroup g;
  g.name = "l0";
  g.entries = {"l0"};
  g.headsQ = 2;
  g.complete = false;
  ParamsHead h;
  h.head = 1;
  h.params.tau = 0.9;
  g.heads.push_back(h);
  f.groups.push_back(g);
  return f;
}
}  // namespace

TEST(HostileParams, NumbersBeyondDoubleRangeNameTheFile) {
  std::string text = paramsToJson(smallParams());
  text.replace(text.find("\"l1\": 0.05"), 10, "\"l1\": 1e400");
  expectError([&] { parseParams(text, "p.json"); }, {"p.json", "not valid JSON", "1e400"});
  text = paramsToJson(smallParams());
  text.replace(text.find("\"sparge_params_version\": 1"), 26, "\"sparge_params_version\": 4294967297");
  expectError([&] { parseParams(text, "p.json"); }, {"unsupported version 4294967297"});
}

TEST(HostileParams, TheCompleteFlagSaysWhyHeadsAreMissing) {
  ParamsFile f = smallParams();
  EXPECT_NE(paramsToJson(f).find("\"complete\": true"), std::string::npos);  // unset: written as complete
  const auto warningFor = [](const ParamsFile& file) {
    std::vector<std::string> warnings;
    headParamsFor(parseParams(paramsToJson(file), "p.json"), "p.json", "l0", std::nullopt, 2, {}, &warnings);
    return warnings.empty() ? std::string() : warnings[0];
  };
  f.complete = false;
  EXPECT_FALSE(parseParams(paramsToJson(f), "p.json").complete.value());
  EXPECT_NE(warningFor(f).find("1 of 2 heads (tuning was interrupted)"), std::string::npos) << warningFor(f);
  f.complete = true;
  EXPECT_NE(warningFor(f).find("only some heads were tuned"), std::string::npos) << warningFor(f);
  const std::string old =
      "{\"sparge_params_version\": 1, \"mode\": \"cdf\", \"l1\": 0.1, \"l2\": 0.1, "
      "\"geometry\": \"128x64\", \"smooth_k\": true, \"sink\": false, \"groups\": []}";
  EXPECT_FALSE(parseParams(old, "old.json").complete.has_value());
}

TEST(HostileParams, NamesThatAreNotUtf8RoundTrip) {
  ParamsFile f = smallParams();
  f.groups[0].name = f.groups[0].entries[0] = "l\xff";
  f.capture = "c\xfe.h5";
  const ParamsFile back = parseParams(paramsToJson(f), "p.json");
  ASSERT_NE(findGroup(back, "l\xff", std::nullopt), nullptr);
  EXPECT_EQ(back.capture, "c\\xfe.h5");
}

TEST(HostileParams, SpecialFilesAreRefusedBeforeOpening) {
  TempDir dir;
  ASSERT_EQ(::mkfifo(dir.file("p.json").c_str(), 0600), 0);
  expectError([&] { readParams(dir.file("p.json")); }, {"p.json", "FIFO"});
  expectError([&] { readParams(dir.path().string()); }, {"is a folder"});
}
