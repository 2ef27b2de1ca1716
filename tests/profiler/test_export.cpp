// Exports: JSON parsed back, CSV columns and comment lines, Chrome trace structure, format by extension.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "report_fixture.h"
#include "sparge/core/error.h"
#include "sparge/profiler/export.h"

using namespace sparge::prof;
using nlohmann::json;

namespace {

// RFC 4180 fields: quoted fields may hold commas and doubled quotes.
std::vector<std::string> splitCsv(const std::string& line) {
  std::vector<std::string> out;
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(field);
      field.clear();
    } else {
      field += c;
    }
  }
  out.push_back(field);
  return out;
}

std::string readFile(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST(Export, FormatByExtension) {
  EXPECT_EQ(formatForPath("out/t.json"), TimingFormat::Json);
  EXPECT_EQ(formatForPath("t.JSON"), TimingFormat::Json);
  EXPECT_EQ(formatForPath("t.trace.json"), TimingFormat::ChromeTrace);
  EXPECT_EQ(formatForPath("t.csv"), TimingFormat::Csv);
  EXPECT_THROW(formatForPath("t.txt"), sparge::Error);
  EXPECT_THROW(formatForPath("json"), sparge::Error);
}

TEST(Export, JsonParsesBackWithEveryFigure) {
  TimingReport r = buildReport(fixtures::syntheticInput());
  json j = json::parse(toJson(r));
  EXPECT_EQ(j["sparge_timings_version"], 1);
  EXPECT_EQ(j["source"], "cupti");
  EXPECT_FALSE(j["clock"].get<std::string>().empty());
  EXPECT_EQ(j["device"]["name"], "Test GPU, rev \"A\"");
  EXPECT_DOUBLE_EQ(j["device"]["max_sm_clock_mhz"].get<double>(), 1980.0);
  EXPECT_EQ(j["warmup_runs"], 1);
  EXPECT_EQ(j["profiled_runs"], 3);
  EXPECT_EQ(j["run"]["entry"], "l0");
  ASSERT_TRUE(j["stages"].is_array());
  bool sawSparse = false;
  for (const auto& s : j["stages"]) {
    for (const char* key :
         {"stage", "source", "count", "min_ms", "median_ms", "max_ms", "mean_ms", "total_ms"})
      EXPECT_TRUE(s.contains(key)) << key;
    if (s["stage"] == "sparse" && s["source"] == "cupti") {
      sawSparse = true;
      EXPECT_EQ(s["count"], 3);
      EXPECT_NEAR(s["median_ms"].get<double>(), 0.4, 1e-12);
    }
  }
  EXPECT_TRUE(sawSparse);
  ASSERT_TRUE(j["kernels"].is_array());
  EXPECT_EQ(j["kernels"].size(), 3u);
  EXPECT_NEAR(j["derived"]["speedup"].get<double>(), 2.0, 1e-12);
  EXPECT_EQ(j["derived"]["speedup_baseline"], "dense");
  EXPECT_TRUE(j["derived"]["dense_equivalent_tops"].is_number());
  EXPECT_TRUE(j["derived"]["executed_tops"].is_number());
  EXPECT_EQ(j["runs"].size(), 3u);
}

TEST(Export, JsonCarriesLaunchConfigurationCudnnFiguresAndNotes) {
  ReportInput in = fixtures::syntheticInput();
  for (KernelSample& k : in.kernels) {
    if (k.stage != Stage::Sparse) continue;
    k.launch.grid = {16, 4, 1};
    k.launch.block = {256, 1, 1};
    k.launch.registersPerThread = 96;
  }
  in.notes = {"cuDNN not timed: libcudnn.so.9 not loaded"};
  json j = json::parse(toJson(buildReport(in)));
  bool sawLaunch = false;
  for (const auto& k : j["kernels"]) {
    ASSERT_TRUE(k.contains("launch"));
    ASSERT_TRUE(k.contains("dense_equivalent_tops"));
    if (k["launch"].is_null()) continue;
    sawLaunch = true;
    EXPECT_EQ(k["launch"]["grid"], json::array({16, 4, 1}));
    EXPECT_EQ(k["launch"]["block"], json::array({256, 1, 1}));
    EXPECT_EQ(k["launch"]["registers_per_thread"], 96);
  }
  EXPECT_TRUE(sawLaunch);
  EXPECT_TRUE(j["derived"]["cudnn_ms"].is_null());
  EXPECT_TRUE(j["derived"].contains("speedup_over_dense"));
  EXPECT_TRUE(j["derived"].contains("cudnn_tops"));
  ASSERT_EQ(j["notes"].size(), 1u);
  EXPECT_EQ(j["notes"][0], "cuDNN not timed: libcudnn.so.9 not loaded");
}

TEST(Export, JsonWritesNullForMissingFigures) {
  json j = json::parse(toJson(buildReport(ReportInput{})));
  EXPECT_TRUE(j["derived"]["speedup"].is_null());
  EXPECT_TRUE(j["derived"]["dense_equivalent_tops"].is_null());
  EXPECT_EQ(j["source"], "wall");
}

TEST(Export, CsvHasCommentsHeaderAndFifteenColumns) {
  TimingReport r = buildReport(fixtures::syntheticInput());
  std::istringstream in(toCsv(r));
  std::string line;
  std::vector<std::string> comments;
  std::vector<std::vector<std::string>> rows;
  while (std::getline(in, line)) {
    if (line.rfind("# ", 0) == 0) {
      EXPECT_TRUE(rows.empty()) << "comment after the header: " << line;
      comments.push_back(line);
    } else {
      rows.push_back(splitCsv(line));
    }
  }
  auto hasComment = [&](const std::string& prefix) {
    for (const auto& c : comments)
      if (c.rfind(prefix, 0) == 0) return true;
    return false;
  };
  EXPECT_TRUE(hasComment("# source: cupti"));
  EXPECT_TRUE(hasComment("# device: Test GPU"));
  EXPECT_TRUE(hasComment("# clock: "));
  EXPECT_TRUE(hasComment("# max_sm_clock_mhz: 1980"));
  ASSERT_FALSE(rows.empty());
  const std::vector<std::string> header = {"kind",
                                           "name",
                                           "stage",
                                           "source",
                                           "count",
                                           "min_ms",
                                           "median_ms",
                                           "max_ms",
                                           "mean_ms",
                                           "total_ms",
                                           "grid",
                                           "block",
                                           "registers_per_thread",
                                           "static_shared_bytes",
                                           "dynamic_shared_bytes"};
  EXPECT_EQ(rows[0], header);
  size_t stageRows = 0, kernelRows = 0;
  for (size_t i = 1; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].size(), header.size()) << "row " << i;
    if (rows[i][0] == "stage") ++stageRows;
    if (rows[i][0] == "kernel") {
      ++kernelRows;
      if (rows[i][1] == "sparge_sparse_attn<128>(float const*, float*)") {  // the comma survived quoting
        EXPECT_EQ(rows[i][2], "sparse");
        EXPECT_EQ(rows[i][4], "5");
        EXPECT_NEAR(std::stod(rows[i][6]), 0.2, 1e-6);
      }
    }
  }
  EXPECT_EQ(stageRows, r.stages.size());
  EXPECT_EQ(kernelRows, 3u);
}

TEST(Export, ChromeTraceHasWhatPerfettoNeeds) {
  TimingReport r = buildReport(fixtures::syntheticInput());
  json j = json::parse(toChromeTrace(r));
  ASSERT_TRUE(j.contains("traceEvents"));
  ASSERT_TRUE(j["traceEvents"].is_array());
  int complete = 0, processNames = 0, threadNames = 0;
  for (const auto& e : j["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph"));
    ASSERT_TRUE(e["pid"].is_number_integer());
    ASSERT_TRUE(e["tid"].is_number_integer());
    ASSERT_TRUE(e["name"].is_string());
    if (e["ph"] == "X") {
      ++complete;
      ASSERT_TRUE(e["ts"].is_number());
      ASSERT_TRUE(e["dur"].is_number());
      EXPECT_GE(e["dur"].get<double>(), 0.0);
      EXPECT_TRUE(e["cat"].is_string());
      EXPECT_TRUE(e["args"].is_object());
    } else if (e["ph"] == "M") {
      if (e["name"] == "process_name") ++processNames;
      if (e["name"] == "thread_name") ++threadNames;
      EXPECT_TRUE(e["args"].contains("name") || e["args"].contains("sort_index"));
    }
  }
  EXPECT_EQ(complete, 3 + 11);
  EXPECT_EQ(processNames, 2);  // runs process + GPU 0
  EXPECT_EQ(threadNames, 3);   // runs, stream 7, stream 8
  // A kernel event: microseconds, category = stage.
  bool found = false;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] == "dense" && e["args"]["run"] == "3") {
      found = true;
      EXPECT_NEAR(e["dur"].get<double>(), 1000.0, 1e-6);               // 1.0 ms
      EXPECT_NEAR(e["ts"].get<double>(), 1000.0 + 1.0 + 500.0, 1e-6);  // run 3 starts 1 ms after run 2
    }
  }
  EXPECT_TRUE(found);
}

TEST(Export, WriteTimingsPicksFormatAndWritesAtomically) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("sparge_prof_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  TimingReport r = buildReport(fixtures::syntheticInput());
  writeTimings(r, (dir / "t.json").string());
  writeTimings(r, (dir / "t.csv").string());
  writeTimings(r, (dir / "t.trace.json").string());
  EXPECT_EQ(json::parse(readFile(dir / "t.json"))["source"], "cupti");
  EXPECT_TRUE(json::parse(readFile(dir / "t.trace.json")).contains("traceEvents"));
  EXPECT_EQ(readFile(dir / "t.csv").rfind("# sparge_timings_version: 1", 0), 0u);
  EXPECT_THROW(writeTimings(r, (dir / "t.txt").string()), sparge::Error);
  EXPECT_FALSE(fs::exists(dir / "t.txt"));
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 3u);  // no temporary files left behind
  fs::remove_all(dir);
}

namespace {
ReportInput withClockSamples() {
  ReportInput in = fixtures::syntheticInput();
  const double mhz[] = {900, 1755, 1980, 1980};
  for (size_t i = 0; i < in.runs.size(); ++i) in.runs[i].smClockMHz = mhz[i];
  return in;
}
const char* kClockNote = "SM clock during runs 1980 MHz median (1755-1980), max 1980 MHz (NVML)";
}  // namespace

TEST(Export, SmClockInJsonCsvAndTrace) {
  TimingReport r = buildReport(withClockSamples());
  json j = json::parse(toJson(r));
  const json& c = j["device"]["sm_clock_mhz"];
  ASSERT_TRUE(c.is_object()) << j["device"].dump();
  EXPECT_DOUBLE_EQ(c["min"].get<double>(), 1755);
  EXPECT_DOUBLE_EQ(c["median"].get<double>(), 1980);
  EXPECT_DOUBLE_EQ(c["max"].get<double>(), 1980);
  EXPECT_EQ(c["samples"], 3);
  EXPECT_EQ(c["source"], "nvml");
  EXPECT_EQ(j["device"]["clock_note"], kClockNote);

  const std::string csv = toCsv(r);
  EXPECT_NE(csv.find("# sm_clock_mhz: min 1755.000000 median 1980.000000 max 1980.000000 (nvml, 3 runs)\n"),
            std::string::npos)
      << csv;
  EXPECT_NE(csv.find(std::string("# clock_note: ") + kClockNote + "\n"), std::string::npos) << csv;

  json t = json::parse(toChromeTrace(r));
  EXPECT_DOUBLE_EQ(t["otherData"]["sm_clock_mhz"]["median"].get<double>(), 1980);
  EXPECT_EQ(t["otherData"]["sm_clock_mhz"]["source"], "nvml");
  EXPECT_EQ(t["otherData"]["clock_note"], kClockNote);
  EXPECT_DOUBLE_EQ(t["otherData"]["max_sm_clock_mhz"].get<double>(), 1980);
}

TEST(Export, MissingSmClockIsNullWithTheReason) {
  ReportInput in = fixtures::syntheticInput();
  in.smClockMissing = "NVML unavailable: /nonexistent/libnvidia-ml.so.1";
  TimingReport r = buildReport(in);
  json j = json::parse(toJson(r));
  EXPECT_TRUE(j["device"]["sm_clock_mhz"].is_null());
  EXPECT_EQ(j["device"]["sm_clock_missing"], in.smClockMissing);
  EXPECT_NE(toCsv(r).find("# sm_clock_mhz: n/a (NVML unavailable: /nonexistent/libnvidia-ml.so.1)\n"),
            std::string::npos);
  json t = json::parse(toChromeTrace(r));
  EXPECT_TRUE(t["otherData"]["sm_clock_mhz"].is_null());
  EXPECT_EQ(t["otherData"]["sm_clock_missing"], in.smClockMissing);
}
