// Tests of token permutations on entries: the whole-sequence permutation (tokens off the grid in place),
// the permuted entry, refusals, outputs restored to the capture's order against an fp64 oracle, block maps
// seen in capture order against a token-by-token count, grid attributes in captures and parameter files.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cmath>
#include <numeric>

#include "hdf5_util.h"
#include "sparge/core/annotate.h"
#include "sparge/core/capture.h"
#include "sparge/core/cpu_engine.h"
#include "sparge/core/params_io.h"
#include "sparge/core/permutation.h"
#include "sparge/core/synthetic.h"
#include "test_util.h"

using namespace sparge::core;
using sparge::test::expectError;
using sparge::test::TempDir;

namespace {

// A bidirectional synthetic entry of `tokens` tokens with a grid placed from `offset` (tokens after the grid
// stay text-like), fp32 so that the oracle sees the same values.
std::shared_ptr<const EntryData> entryWithGrid(TokenGrid g, int64_t tokens, int64_t heads = 2) {
  SynthSpec s;
  s.headsQ = s.headsKV = heads;
  s.tokensQ = s.tokensKV = tokens;
  s.headDim = s.headDimV = 16;
  s.segment = 32;
  s.dtype = DType::Float32;
  auto e = std::make_shared<EntryData>(makeSyntheticEntry(s));
  e->info.grid = g;
  return e;
}

TokenGrid grid(int64_t t, int64_t h, int64_t w, int64_t offset = 0, GridTokens on = GridTokens::QKV) {
  TokenGrid g;
  g.frames = t;
  g.height = h;
  g.width = w;
  g.offset = offset;
  g.tokens = on;
  return g;
}

// Dense attention of one head in double precision, rows in the capture's order.
std::vector<double> denseOracle(const EntryData& e, int64_t h) {
  const EntryInfo& in = e.info;
  const float* q = e.qHead(0, h);
  const float* k = e.kHead(0, in.kvHeadOf(h));
  const float* v = e.vHead(0, in.kvHeadOf(h));
  std::vector<double> out(size_t(in.tokensQ * in.headDimV), 0.0);
  for (int64_t i = 0; i < in.tokensQ; ++i) {
    std::vector<double> s(size_t(in.tokensKV));
    double m = -INFINITY, l = 0;
    for (int64_t j = 0; j < in.tokensKV; ++j) {
      double dot = 0;
      for (int64_t c = 0; c < in.headDim; ++c) dot += double(q[i * in.headDim + c]) * k[j * in.headDim + c];
      s[size_t(j)] = dot * in.scale;
      m = std::max(m, s[size_t(j)]);
    }
    for (int64_t j = 0; j < in.tokensKV; ++j) {
      const double p = std::exp(s[size_t(j)] - m);
      l += p;
      for (int64_t c = 0; c < in.headDimV; ++c)
        out[size_t(i * in.headDimV + c)] += p * v[j * in.headDimV + c];
    }
    for (int64_t c = 0; c < in.headDimV; ++c) out[size_t(i * in.headDimV + c)] /= l;
  }
  return out;
}

EntryResult denseRun(const std::shared_ptr<const EntryData>& e) {
  CpuEngine engine(1);
  engine.setEntry(e);
  RunConfig c;
  c.numerics = Numerics::None;
  c.defaults.dense = true;
  RunOptions o;
  o.keepOutput = true;
  return engine.run(c, o);
}

}  // namespace

TEST(TokenPermutation, BijectionWithTokensOffTheGridInPlace) {
  for (auto [g, tokens] : {std::pair{grid(3, 5, 7, 11), int64_t(130)},
                           {grid(1, 13, 11), int64_t(143)},
                           {grid(5, 1, 3, 0), int64_t(20)},
                           {grid(2, 7, 5, 17), int64_t(87)}})
    for (Permutation p : {Permutation::RowMajor, Permutation::TimeMajor, Permutation::Hilbert}) {
      EntryInfo info = entryWithGrid(g, tokens)->info;
      const TokenPermutation perm = tokenPermutation(info, p, "test");
      ASSERT_EQ(int64_t(perm.q.size()), tokens);
      std::vector<int64_t> sorted = perm.q;
      std::sort(sorted.begin(), sorted.end());
      std::vector<int64_t> iota(static_cast<size_t>(tokens));
      std::iota(iota.begin(), iota.end(), 0);
      EXPECT_EQ(sorted, iota) << toString(p);
      for (int64_t i = 0; i < tokens; ++i) {
        const bool onGrid = i >= g.offset && i < g.offset + g.count();
        if (!onGrid)
          EXPECT_EQ(perm.q[size_t(i)], i) << "token off the grid moved: " << i;
        else
          EXPECT_TRUE(perm.q[size_t(i)] >= g.offset && perm.q[size_t(i)] < g.offset + g.count());
      }
      EXPECT_EQ(perm.q, perm.kv);
    }
}

TEST(TokenPermutation, PermutedEntryHoldsTheRowsOfThePermutation) {
  const auto base = entryWithGrid(grid(2, 3, 5, 4, GridTokens::Q), 40);
  const auto permuted = permuteEntry(base, Permutation::Hilbert, "test");
  const TokenPermutation perm = tokenPermutation(base->info, Permutation::Hilbert, "test");
  EXPECT_TRUE(perm.kv.empty());  // grid on the queries only: keys and values stay as captured
  EXPECT_EQ(permuted->info.permutation, Permutation::Hilbert);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 40; ++i)
      for (int64_t c = 0; c < 16; ++c) {
        ASSERT_EQ(permuted->qHead(0, h)[i * 16 + c], base->qHead(0, h)[perm.q[size_t(i)] * 16 + c]);
        ASSERT_EQ(permuted->kHead(0, h)[i * 16 + c], base->kHead(0, h)[i * 16 + c]);
      }
  EXPECT_EQ(permuteEntry(base, Permutation::None, "test"), base);  // none: the same data, no copy
}

TEST(TokenPermutation, RefusedWithoutAGridAndOnCausalOrWindowedEntries) {
  auto e = std::make_shared<EntryData>(*entryWithGrid(grid(1, 4, 4), 16));
  e->info.grid.reset();
  expectError([&] { permuteEntry(e, Permutation::Hilbert, "--permute"); },
              {"--permute", "no token grid", "annotate"});
  e->info.grid = grid(1, 4, 4);
  e->info.causal = true;
  expectError([&] { permuteEntry(e, Permutation::TimeMajor, "--permute"); }, {"causal", "--permute none"});
  e->info.causal = false;
  e->info.window = Window{8, 8};
  expectError([&] { permuteEntry(e, Permutation::RowMajor, "--permute"); }, {"windowed"});
  e->info.causal = true;
  EXPECT_EQ(permuteEntry(e, Permutation::None, "--permute"), e);  // none applies to every entry
}

// Every block kept: the output of a permuted run, restored to the capture's order, is dense attention of
// the capture (fp64 oracle); only the order of the fp32 sums over keys differs from the unpermuted run.
TEST(TokenPermutation, RestoredDenseOutputEqualsTheUnpermutedDenseOutput) {
  const auto base = entryWithGrid(grid(3, 5, 7, 9), 150);
  const EntryResult plain = denseRun(base);
  for (Permutation p : {Permutation::RowMajor, Permutation::TimeMajor, Permutation::Hilbert}) {
    EntryResult r = denseRun(permuteEntry(base, p, "test"));
    restoreOutputOrder(r, tokenPermutation(base->info, p, "test"));
    for (int64_t h = 0; h < 2; ++h) {
      const std::vector<double> oracle = denseOracle(*base, h);
      const std::vector<float>& got = r.heads[size_t(h)].output;
      const std::vector<float>& ref = plain.heads[size_t(h)].output;
      ASSERT_EQ(got.size(), oracle.size());
      double worst = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_NEAR(got[i], oracle[i], 1e-5) << toString(p) << " head " << h << " element " << i;
        worst = std::max(worst, std::fabs(double(got[i]) - ref[i]));
      }
      EXPECT_LE(worst, 1e-6) << toString(p);
      if (p == Permutation::RowMajor) {
        EXPECT_EQ(got, ref);  // the identity order: bit for bit
      }
      EXPECT_EQ(r.heads[size_t(h)].error.absDiff, 0.0);  // every block: no error against the reference
    }
  }
}

TEST(TokenPermutation, BlockMapInCaptureOrderCountsTokenPairs) {
  const auto base = entryWithGrid(grid(2, 9, 11, 30), 300);
  const Geometry g = kGeometry128x64;
  const TokenPermutation perm = tokenPermutation(base->info, Permutation::Hilbert, "test");
  const int nq = 3, nk = 5;
  std::vector<uint8_t> map(size_t(nq * nk));
  for (size_t i = 0; i < map.size(); ++i) map[i] = uint8_t((i * 7 + 3) % 3 == 0);
  const std::vector<float> got = blockMapInCaptureOrder(map, nq, nk, g, 300, 300, perm);
  // Token by token: where does capture token t sit in the permuted entry?
  std::vector<int64_t> where(static_cast<size_t>(300));
  for (int64_t i = 0; i < 300; ++i) where[size_t(perm.q[size_t(i)])] = i;
  for (int r = 0; r < nq; ++r)
    for (int c = 0; c < nk; ++c) {
      double on = 0, all = 0;
      for (int64_t i = r * 128; i < std::min<int64_t>(300, (r + 1) * 128); ++i)
        for (int64_t j = c * 64; j < std::min<int64_t>(300, (c + 1) * 64); ++j) {
          all += 1;
          on += map[size_t(where[size_t(i)] / 128 * nk + where[size_t(j)] / 64)];
        }
      EXPECT_NEAR(got[size_t(r * nk + c)], on / all, 1e-5) << r << "," << c;
    }
  const std::vector<float> identity = blockMapInCaptureOrder(map, nq, nk, g, 300, 300, TokenPermutation{});
  for (size_t i = 0; i < map.size(); ++i) EXPECT_NEAR(identity[i], float(map[i]), 1e-5);
}

TEST(GridAttributes, WrittenReadAndAnnotatedInPlace) {
  TempDir dir;
  const std::string path = dir.file("c.h5");
  auto e = entryWithGrid(grid(2, 3, 4, 6, GridTokens::QKV), 40);
  {
    CaptureWriter w(path, CaptureWriter::Compression::None);
    w.addEntry(e->info, e->q, e->k, e->v);
    EntryInfo plain = e->info;
    plain.name = "plain";
    plain.grid.reset();
    w.addEntry(plain, e->q, e->k, e->v);
  }
  {
    CaptureReader r(path);
    ASSERT_TRUE(r.entry(e->info.name).grid.has_value());
    EXPECT_EQ(*r.entry(e->info.name).grid, grid(2, 3, 4, 6));
    EXPECT_FALSE(r.entry("plain").grid.has_value());
  }
  setEntryGrid(path, "plain", grid(1, 5, 7, 5, GridTokens::KV));
  EXPECT_EQ(*CaptureReader(path).entry("plain").grid, grid(1, 5, 7, 5, GridTokens::KV));
  expectError([&] { setEntryGrid(path, "plain", grid(1, 5, 8, 5)); },
              {"/entries/plain", "does not fit", "40"});
  EXPECT_EQ(*CaptureReader(path).entry("plain").grid, grid(1, 5, 7, 5, GridTokens::KV));  // unchanged
  expectError([&] { setEntryGrid(path, "nope", grid(1, 2, 2)); }, {"nope"});
  setEntryGrid(path, "plain", std::nullopt);
  EXPECT_FALSE(CaptureReader(path).entry("plain").grid.has_value());
}

TEST(GridAttributes, BadAttributesAreRejectedWhenTheCaptureOpens) {
  TempDir dir;
  auto e = entryWithGrid(grid(1, 2, 2), 40);
  auto make = [&](const std::string& name, auto&& spoil) {
    const std::string path = dir.file(name);
    {
      CaptureWriter w(path, CaptureWriter::Compression::None);
      EntryInfo info = e->info;
      info.grid.reset();
      w.addEntry(info, e->q, e->k, e->v);
    }
    std::lock_guard lock(h5::mutex());
    h5::Handle f = h5::file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    h5::Handle g = h5::group(H5Gopen2(f.get(), ("/entries/" + e->info.name).c_str(), H5P_DEFAULT));
    spoil(g.get());
    return path;
  };
  auto shape = [](hid_t g, std::vector<int64_t> v) {
    const hsize_t dims[1] = {v.size()};
    h5::Handle space = h5::dataspace(H5Screate_simple(1, dims, nullptr));
    h5::Handle a = h5::attribute(H5Acreate2(g, "grid", H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT));
    H5Awrite(a.get(), H5T_NATIVE_INT64, v.data());
  };
  expectError([&] { CaptureReader(make("a.h5", [&](hid_t g) {
                      shape(g, {2, 4, 6});
                    })); },
              {"does not fit", "40"});
  expectError([&] { CaptureReader(make("b.h5", [&](hid_t g) { shape(g, {2, 4}); })); }, {"exactly three"});
  expectError([&] { CaptureReader(make("c.h5", [&](hid_t g) { h5::writeInteger(g, "grid_offset", 3); })); },
              {"grid_offset without attribute grid"});
  expectError(
      [&] {
        CaptureReader(make("d.h5", [&](hid_t g) {
          shape(g, {1, 2, 2});
          h5::writeString(g, "grid_tokens", "keys");
        }));
      },
      {"grid_tokens = \"keys\""});
  expectError([&] { CaptureReader(make("e.h5", [&](hid_t g) { shape(g, {1, 0, 2}); })); }, {"side below 1"});
}

TEST(GridAttributes, ParameterFilesRecordThePermutationAndRefuseAnotherGrid) {
  ParamsFile f;
  f.l1 = 0.05;
  f.l2 = 0.06;
  ParamsGroup g;
  g.name = "e";
  g.entries = {"e"};
  g.headsQ = 1;
  g.heads.push_back(ParamsHead{});
  f.groups.push_back(g);
  EntryInfo info;
  info.name = "e";
  info.headsQ = 1;
  info.tokensQ = info.tokensKV = 64;
  info.grid = grid(1, 8, 8);
  recordPermutation(f, Permutation::Hilbert, {{"e", info}});
  const ParamsFile back = parseParams(paramsToJson(f), "p.json");
  EXPECT_EQ(back.permute, Permutation::Hilbert);
  ASSERT_TRUE(back.groups[0].grid.has_value());
  EXPECT_EQ(permutationFor(back, "p.json", info), Permutation::Hilbert);
  EntryInfo other = info;
  other.grid = grid(1, 4, 16);
  expectError([&] { permutationFor(back, "p.json", other); }, {"p.json", "hilbert", "1x8x8", "1x4x16"});
  other.grid.reset();
  expectError([&] { permutationFor(back, "p.json", other); }, {"has no grid"});
  ParamsFile plain;
  plain.l1 = 0.05;
  plain.l2 = 0.06;
  EXPECT_EQ(parseParams(paramsToJson(plain), "q.json").permute, Permutation::None);
}
