// Stage attribution rules on kernel names (plain, mangled, demangled) and the enum string forms.
#include <gtest/gtest.h>

#include "sparge/profiler/stage.h"

using namespace sparge::prof;

TEST(StageRules, TableMapsEveryEnginePrefix) {
  // The table is part of the contract with the CUDA engine: check it row by row.
  std::vector<std::pair<std::string, Stage>> expected = {
      {"sparge_predict_", Stage::Predict},     {"sparge_quant_", Stage::Quantize},
      {"sparge_sparse_", Stage::Sparse},       {"sparge_dense_", Stage::Dense},
      {"sparge_reference_", Stage::Reference}, {"sparge_error_", Stage::Metrics},
      {"sparge_metrics_", Stage::Metrics},     {"sparge_other_", Stage::Other}};
  auto rules = stageRules();
  ASSERT_EQ(rules.size(), expected.size());
  for (size_t i = 0; i < rules.size(); ++i) {
    EXPECT_EQ(std::string(rules[i].prefix), expected[i].first);
    EXPECT_EQ(rules[i].stage, expected[i].second);
  }
}

TEST(StageRules, PlainNames) {
  EXPECT_EQ(stageForKernel("sparge_predict_pool"), Stage::Predict);
  EXPECT_EQ(stageForKernel("sparge_sparse_attn_fwd"), Stage::Sparse);
  EXPECT_EQ(stageForKernel("sparge_dense_attn"), Stage::Dense);
  EXPECT_EQ(stageForKernel("sparge_quant_qk_int8"), Stage::Quantize);
  EXPECT_EQ(stageForKernel("sparge_reference_fp32"), Stage::Reference);
  EXPECT_EQ(stageForKernel("sparge_error_reduce"), Stage::Metrics);
  EXPECT_EQ(stageForKernel("ampere_sgemm_128x64_nn"), Stage::Other);
  EXPECT_EQ(stageForKernel(""), Stage::Other);
}

TEST(StageRules, MangledNames) {
  EXPECT_EQ(stageForKernel("_Z19sparge_predict_poolPKfi"), Stage::Predict);
  EXPECT_EQ(stageForKernel("_ZN6sparge4cuda18sparge_sparse_attnILi128EEEvPKfPf"), Stage::Sparse);
  EXPECT_EQ(stageForKernel("_ZN6sparge4cuda6detail16sparge_dense_fwdILi64EEEvv"), Stage::Dense);
  EXPECT_EQ(stageForKernel("_Z19sparge_error_reducePKfS0_Pd"), Stage::Metrics);
}

TEST(StageRules, DemangledNames) {
  EXPECT_EQ(stageForKernel("void sparge::cuda::sparge_dense_fwd<64>(float const*, float*)"), Stage::Dense);
  EXPECT_EQ(stageForKernel("sparge::cuda::sparge_reference_attn(float*)"), Stage::Reference);
}

TEST(StageRules, PrefixMustStartAnIdentifier) {
  EXPECT_EQ(stageForKernel("my_sparge_predict_pool"), Stage::Other);
  EXPECT_EQ(stageForKernel("xsparge_dense_fwd"), Stage::Other);
  EXPECT_EQ(stageForKernel("Sparge_dense_fwd"), Stage::Other);  // case-sensitive, as kernel names are
  // A non-identifier prefix is skipped but a later proper occurrence still counts.
  EXPECT_EQ(stageForKernel("my_sparge_dense_x::sparge_sparse_y"), Stage::Sparse);
}

TEST(StageRules, LeftmostPrefixWins) {
  // The function name comes before its parameter types in both mangled and demangled forms.
  EXPECT_EQ(stageForKernel("sparge_sparse_attn(sparge_predict_params)"), Stage::Sparse);
  EXPECT_EQ(stageForKernel("_Z18sparge_sparse_attn21sparge_predict_params"), Stage::Sparse);
  EXPECT_EQ(stageForKernel("_Z19sparge_predict_pool18sparge_sparse_args"), Stage::Predict);
}

TEST(StageNames, RoundTrip) {
  for (Stage s : {Stage::Predict, Stage::Quantize, Stage::Sparse, Stage::Dense, Stage::Cudnn,
                  Stage::Reference, Stage::Metrics, Stage::Other, Stage::Total}) {
    ASSERT_TRUE(parseStage(toString(s)).has_value());
    EXPECT_EQ(*parseStage(toString(s)), s);
  }
  EXPECT_EQ(parseStage("error"), Stage::Metrics);
  EXPECT_STREQ(toString(Stage::Quantize), "quantize");
  EXPECT_STREQ(toString(Stage::Cudnn), "cudnn");
  EXPECT_FALSE(parseStage("bogus").has_value());
  EXPECT_STREQ(toString(TimingSource::Cupti), "cupti");
  EXPECT_STREQ(toString(TimingSource::CudaEvent), "cuda-event");
  EXPECT_STREQ(toString(TimingSource::WallClock), "wall");
  EXPECT_EQ(parseTimingSource("cuda-event"), TimingSource::CudaEvent);
  EXPECT_EQ(parseTimingSource("wall"), TimingSource::WallClock);
  EXPECT_EQ(parseTimingSource("cupti"), TimingSource::Cupti);
  EXPECT_FALSE(parseTimingSource("sundial").has_value());
}

TEST(Demangle, MangledAndPlain) {
  EXPECT_EQ(demangle("_Z19sparge_predict_poolPKfi"), "sparge_predict_pool(float const*, int)");
  EXPECT_EQ(demangle("sparge_dense_fwd"), "sparge_dense_fwd");
  EXPECT_EQ(demangle("_Znot_valid_mangling"), "_Znot_valid_mangling");
}
