// Tuned-parameter JSON: round trip, strict validation with file + JSON-path errors, entry matching.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

#include "sparge/core/error.h"
#include "sparge/core/params_io.h"

namespace sparge::core {
namespace {

ParamsFile sampleFile() {
  ParamsFile f;
  f.capture = "cap.h5";
  f.engine = "cpu (2 threads)";
  f.mode = SelectMode::Cdf;
  f.l1 = 0.05;
  f.l2 = 0.06;
  f.geometry = kGeometry64x128;
  f.smoothK = false;
  f.sink = true;
  ParamsGroup g;
  g.name = "l00";
  g.entries = {"l00"};
  g.layer = 0;
  g.headsQ = 3;
  for (int h = 0; h < 3; ++h) {
    ParamsHead ph;
    ph.head = h;
    ph.params.mode = SelectMode::Cdf;
    ph.params.theta = -1.0 + 0.0625 * h;
    ph.params.tau = 0.9541015625 + 0.001 * h;
    ph.params.lambda = 3.125 * (h + 1);
    ph.isSparse = h != 2;
    ph.params.dense = !ph.isSparse;
    ph.stage1Sparsity = 0.25 * h;
    ph.totalSparsity = 0.25 * h + 0.01;
    ph.l1 = 0.01 * (h + 1);
    g.heads.push_back(ph);
  }
  f.groups.push_back(g);
  ParamsGroup g2;
  g2.name = "layer 4";
  g2.entries = {"step0/l04", "step1/l04"};
  g2.layer = 4;
  g2.headsQ = 2;
  g2.complete = false;
  ParamsHead ph;
  ph.head = 1;
  ph.params.theta = 0.5;
  ph.params.tau = 0.97;
  ph.params.lambda = 12.5;
  g2.heads.push_back(ph);
  f.groups.push_back(g2);
  return f;
}

TEST(ParamsIo, RoundTripKeepsEveryField) {
  const ParamsFile f = sampleFile();
  const ParamsFile r = parseParams(paramsToJson(f), "mem.json");
  EXPECT_EQ(r.version, kParamsVersion);
  EXPECT_EQ(r.capture, "cap.h5");
  EXPECT_EQ(r.engine, f.engine);
  EXPECT_EQ(r.mode, SelectMode::Cdf);
  EXPECT_DOUBLE_EQ(r.l1, 0.05);
  EXPECT_DOUBLE_EQ(r.l2, 0.06);
  EXPECT_EQ(r.geometry, kGeometry64x128);
  EXPECT_FALSE(r.smoothK);
  EXPECT_TRUE(r.sink);
  ASSERT_EQ(r.groups.size(), 2u);
  const ParamsGroup& g = r.groups[0];
  EXPECT_EQ(g.name, "l00");
  ASSERT_TRUE(g.layer.has_value());
  EXPECT_EQ(*g.layer, 0);
  EXPECT_TRUE(g.complete);
  ASSERT_EQ(g.heads.size(), 3u);
  for (int h = 0; h < 3; ++h) {
    const ParamsHead& a = f.groups[0].heads[h];
    const ParamsHead& b = g.heads[h];
    EXPECT_EQ(b.head, h);
    EXPECT_EQ(b.params, a.params) << "head " << h;
    EXPECT_EQ(b.isSparse, a.isSparse);
    EXPECT_DOUBLE_EQ(b.stage1Sparsity, a.stage1Sparsity);
    EXPECT_DOUBLE_EQ(b.totalSparsity, a.totalSparsity);
    EXPECT_DOUBLE_EQ(b.l1, a.l1);
  }
  EXPECT_TRUE(g.heads[2].params.dense);
  EXPECT_FALSE(r.groups[1].complete);
  EXPECT_EQ(r.groups[1].entries, (std::vector<std::string>{"step0/l04", "step1/l04"}));
}

TEST(ParamsIo, TopKModeWritesTopkNotCdf) {
  ParamsFile f = sampleFile();
  f.mode = SelectMode::TopK;
  for (auto& g : f.groups)
    for (auto& h : g.heads) {
      h.params.mode = SelectMode::TopK;
      h.params.topk = 0.375;
    }
  const std::string text = paramsToJson(f);
  EXPECT_NE(text.find("\"topk\": 0.375"), std::string::npos);
  EXPECT_EQ(text.find("cdfthreshd"), std::string::npos);
  const ParamsFile r = parseParams(text, "mem.json");
  EXPECT_EQ(r.mode, SelectMode::TopK);
  EXPECT_EQ(r.groups[0].heads[1].params.mode, SelectMode::TopK);
  EXPECT_DOUBLE_EQ(r.groups[0].heads[1].params.topk, 0.375);
}

TEST(ParamsIo, WriteAndReadFile) {
  const std::string path = (std::filesystem::temp_directory_path() / "sparge_params_io_test.json").string();
  writeParams(path, sampleFile());
  const ParamsFile r = readParams(path);
  EXPECT_EQ(r.groups.size(), 2u);
  std::filesystem::remove(path);
}

TEST(ParamsIo, MissingFileNamesThePath) {
  try {
    readParams("/nonexistent/dir/p.json");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.where(), "/nonexistent/dir/p.json");
  }
}

// Applies `edit` to the JSON text of the sample file and expects a parse error at `where`.
void expectError(const std::function<void(std::string&)>& edit, const std::string& where,
                 const std::string& fragment) {
  std::string text = paramsToJson(sampleFile());
  edit(text);
  try {
    parseParams(text, "bad.json");
    FAIL() << "no error for " << where;
  } catch (const Error& e) {
    EXPECT_EQ(e.where(), where) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

void replaceOnce(std::string& s, const std::string& from, const std::string& to) {
  const size_t p = s.find(from);
  ASSERT_NE(p, std::string::npos) << from;
  s.replace(p, from.size(), to);
}

TEST(ParamsIo, BadFilesNameFileAndJsonPath) {
  expectError([](std::string& s) { s = "{ not json"; }, "bad.json:/", "not valid JSON");
  expectError([](std::string& s) { s = "[1, 2]"; }, "bad.json:/", "JSON object");
  expectError([](std::string& s) { replaceOnce(s, "\"l1\": 0.05", "\"l1_\": 0.05"); }, "bad.json:/l1",
              "missing key");
  expectError(
      [](std::string& s) { replaceOnce(s, "\"sparge_params_version\": 1", "\"sparge_params_version\": 2"); },
      "bad.json:/sparge_params_version", "unsupported version 2");
  expectError([](std::string& s) { replaceOnce(s, "\"mode\": \"cdf\"", "\"mode\": \"fast\""); },
              "bad.json:/mode", "unknown mode");
  expectError([](std::string& s) { replaceOnce(s, "\"geometry\": \"64x128\"", "\"geometry\": \"32x32\""); },
              "bad.json:/geometry", "32x32");
  expectError([](std::string& s) { replaceOnce(s, "\"cdfthreshd\": 0.9541015625", "\"cdfthreshd\": 1.5"); },
              "bad.json:/groups/0/heads/0/cdfthreshd", "[0, 1]");
  expectError([](std::string& s) { replaceOnce(s, "\"pvthreshd\": 3.125", "\"pvthreshd\": -1"); },
              "bad.json:/groups/0/heads/0/pvthreshd", ">= 0");
  expectError([](std::string& s) { replaceOnce(s, "\"simthreshd1\": -1.0", "\"simthreshd1\": \"low\""); },
              "bad.json:/groups/0/heads/0/simthreshd1", "expected a number");
  expectError([](std::string& s) { replaceOnce(s, "\"is_sparse\": true", "\"is_sparse\": 1"); },
              "bad.json:/groups/0/heads/0/is_sparse", "true or false");
  expectError([](std::string& s) { replaceOnce(s, "\"head\": 1,", "\"head\": 0,"); },
              "bad.json:/groups/0/heads/1/head", "duplicate head 0");
  expectError([](std::string& s) { replaceOnce(s, "\"head\": 1,", "\"head\": 7,"); },
              "bad.json:/groups/0/heads/1/head", "out of range");
  expectError([](std::string& s) { replaceOnce(s, "\"heads_q\": 3", "\"heads_q\": 4"); },
              "bad.json:/groups/0/heads", "holds 3 heads but heads_q is 4");
  expectError([](std::string& s) { replaceOnce(s, "\"heads_q\": 3", "\"heads_q\": 0"); },
              "bad.json:/groups/0/heads_q", "positive");
  expectError([](std::string& s) { replaceOnce(s, "\"sparsity\": 0.01", "\"sparsity\": 1.01"); },
              "bad.json:/groups/0/heads/0/sparsity", "must be in");
  expectError([](std::string& s) { replaceOnce(s, "\"name\": \"layer 4\"", "\"name\": \"l00\""); },
              "bad.json:/groups/1/name", "duplicate group");
}

TEST(ParamsIo, HeadParamsForMatchesByNameThenLayer) {
  ParamsFile f = sampleFile();
  const std::vector<HeadParams> byName = headParamsFor(f, "p.json", "l00", std::nullopt, 3);
  ASSERT_EQ(byName.size(), 3u);
  EXPECT_EQ(byName[1], f.groups[0].heads[1].params);
  // A new denoising step of layer 4, never tuned by name, is matched through its layer attribute.
  HeadParams fallback;
  fallback.theta = 0.25;
  std::vector<std::string> warnings;
  const std::vector<HeadParams> byLayer = headParamsFor(f, "p.json", "step9/l04", 4, 2, fallback, &warnings);
  ASSERT_EQ(byLayer.size(), 2u);
  EXPECT_EQ(byLayer[0], fallback);  // head 0 was not finished (incomplete group)
  EXPECT_EQ(byLayer[1], f.groups[1].heads[0].params);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("1 of 2 heads"), std::string::npos) << warnings[0];
}

TEST(ParamsIo, HeadParamsForRejectsUnknownEntryAndHeadCount) {
  const ParamsFile f = sampleFile();
  try {
    headParamsFor(f, "p.json", "l99", 99, 3);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.where(), "p.json");
    EXPECT_NE(std::string(e.what()).find("l99"), std::string::npos);
  }
  try {
    headParamsFor(f, "p.json", "l00", std::nullopt, 8);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("3 query heads"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("has 8"), std::string::npos) << e.what();
  }
}

TEST(ParamsIo, ApplyParamsSetsPerHeadAndTunedSettings) {
  const ParamsFile f = sampleFile();
  EntryInfo info;
  info.name = "l00";
  info.headsQ = 3;
  RunConfig cfg;  // 128x64, smooth_k on, no sink
  std::vector<std::string> warnings;
  applyParams(f, "p.json", info, cfg, &warnings);
  ASSERT_EQ(cfg.perHead.size(), 3u);
  EXPECT_EQ(cfg.perHead[2], f.groups[0].heads[2].params);
  EXPECT_EQ(cfg.geometry, kGeometry64x128);
  EXPECT_FALSE(cfg.smoothK);
  EXPECT_TRUE(cfg.sink);
  EXPECT_EQ(warnings.size(), 3u);
}

// The additions of the exact fallback, input identity and held-out validation survive a round trip.
TEST(ParamsIo, RoundTripOfNumericsIdentityAndHeldOut) {
  ParamsFile f = sampleFile();
  f.numerics = Numerics::Int8Fp8;
  f.exactFallback = ExactFallback::Layer;
  f.groups[0].tunedOn = {{"a.h5", "l00", "0123456789abcdef"}, {"b.h5", "l00", "fedcba9876543210"}};
  f.groups[0].heads[1].exact = true;
  f.groups[0].heads[1].l1Quant = 0.25;
  f.groups[0].heads[1].l1QuantQk = 0.125;
  f.groups[0].heads[2].heldOut = HeldOut{3, 1, 0.0625, "c.h5:l00"};
  const ParamsFile r = parseParams(paramsToJson(f), "mem.json");
  ASSERT_TRUE(r.exactFallback.has_value());
  EXPECT_EQ(*r.exactFallback, ExactFallback::Layer);
  EXPECT_EQ(r.groups[0].tunedOn, f.groups[0].tunedOn);
  EXPECT_TRUE(r.groups[1].tunedOn.empty());
  EXPECT_FALSE(r.groups[0].heads[0].exact);
  EXPECT_TRUE(r.groups[0].heads[1].exact);
  EXPECT_EQ(numericsOf(r, r.groups[0].heads[1]), Numerics::None);
  EXPECT_EQ(numericsOf(r, r.groups[0].heads[0]), Numerics::Int8Fp8);
  EXPECT_DOUBLE_EQ(r.groups[0].heads[1].l1Quant, 0.25);
  EXPECT_DOUBLE_EQ(r.groups[0].heads[1].l1QuantQk, 0.125);
  ASSERT_TRUE(r.groups[0].heads[2].heldOut.has_value());
  EXPECT_EQ(*r.groups[0].heads[2].heldOut, *f.groups[0].heads[2].heldOut);
  EXPECT_FALSE(r.groups[0].heads[0].heldOut.has_value());
  // Files without the keys read as before: no identity, the file's numerics, no fallback recorded.
  const ParamsFile old = parseParams(paramsToJson(sampleFile()), "old.json");
  EXPECT_FALSE(old.exactFallback.has_value());
  EXPECT_TRUE(old.groups[0].tunedOn.empty());
  EXPECT_FALSE(old.groups[0].heads[0].exact);
}

TEST(ParamsIo, RefusesAnEntryInTwoGroupsAndBadAdditions) {
  expectError([](std::string& s) { replaceOnce(s, "\"step0/l04\"", "\"l00\""); },
              "bad.json:/groups/1/entries/0", "listed in group \"l00\" and in group \"layer 4\"");
  expectError([](std::string& s) { replaceOnce(s, "\"step1/l04\"", "\"step0/l04\""); },
              "bad.json:/groups/1/entries/1", "listed twice");
  // The sample file is exact ("none"): a head may not claim quantized numerics of its own.
  expectError(
      [](std::string& s) {
        replaceOnce(s, "\"is_sparse\": true", "\"is_sparse\": true, \"numerics\": \"int8-fp8\"");
      },
      "bad.json:/groups/0/heads/0/numerics", "may only differ by being \"none\"");
  expectError(
      [](std::string& s) {
        replaceOnce(s, "\"is_sparse\": true", "\"is_sparse\": true, \"numerics\": \"fp4\"");
      },
      "bad.json:/groups/0/heads/0/numerics", "fp4");
  expectError(
      [](std::string& s) {
        replaceOnce(s, "\"sink\": true", "\"sink\": true, \"exact_fallback\": \"model\"");
      },
      "bad.json:/exact_fallback", "model");
  expectError(
      [](std::string& s) {
        replaceOnce(s, "\"entries\": [\n        \"l00\"\n      ],",
                    "\"entries\": [\"l00\"], \"tuned_on\": [{\"capture\": \"a.h5\", \"entry\": \"l00\"}],");
      },
      "bad.json:/groups/0/tuned_on/0/digest", "missing key");
  expectError(
      [](std::string& s) {
        replaceOnce(s, "\"is_sparse\": true",
                    "\"is_sparse\": true, \"held_out\": {\"inputs\": 1, \"violations\": 2, \"max_l1\": 0.1, "
                    "\"max_l1_entry\": \"x\"}");
      },
      "bad.json:/groups/0/heads/0/held_out/violations", "[0, inputs]");
}

TEST(ParamsIo, IdentityRefusesForeignInputsUnlessAsked) {
  ParamsFile f = sampleFile();
  f.groups[0].tunedOn = {{"a.h5", "l00", "00000000000000aa"}};
  EntryInfo info;
  info.name = "l00";
  info.headsQ = 3;
  EXPECT_EQ(checkParamsIdentity(f, "p.json", info, "a.h5", "00000000000000aa", false), "");
  // Another capture with the same content is the same input.
  EXPECT_EQ(checkParamsIdentity(f, "p.json", info, "copy.h5", "00000000000000aa", false), "");
  try {
    checkParamsIdentity(f, "p.json", info, "b.h5", "00000000000000bb", false);
    FAIL() << "a foreign entry was accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    for (const char* part : {"p.json", "a.h5:l00", "b.h5:l00", "--params-any-capture", "sparge tune b.h5"})
      EXPECT_NE(m.find(part), std::string::npos) << part << " not in " << m;
  }
  const std::string note = checkParamsIdentity(f, "p.json", info, "b.h5", "00000000000000bb", true);
  EXPECT_EQ(note.rfind(kHeldOutNote, 0), 0u) << note;
  // A group without tuned_on (an older file) cannot be checked: a note, never a refusal.
  info.name = "step0/l04";
  info.layer = 4;
  info.headsQ = 2;
  const std::string old = checkParamsIdentity(f, "p.json", info, "b.h5", "00000000000000bb", false);
  EXPECT_NE(old.find("tuned_on"), std::string::npos) << old;
}

}  // namespace
}  // namespace sparge::core
