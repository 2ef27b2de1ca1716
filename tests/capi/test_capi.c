/* Tests of the C API in C (proving that sparge/attention.h is a C header): argument checks with their status
 * and message, the whole call against an exact attention oracle computed here in double precision, layouts
 * and the optional outputs against each other. CPU backend always; the CUDA backend too when a device is
 * usable (its outputs against the CPU backend's). Exit 0 when every check passed. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sparge/attention.h"

static int failures = 0;

#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      ++failures;                                          \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                        \
      fprintf(stderr, "\n");                               \
    }                                                      \
  } while (0)

/* fp16 of a value that fp16 holds exactly (the test data are k/64 for small integers k). */
static uint16_t exactHalf(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) == 0) return (uint16_t)(x >> 16);
  return (uint16_t)(((x >> 16) & 0x8000u) | ((((x >> 23) & 0xffu) - 112u) << 10) | ((x >> 13) & 0x3ffu));
}

static double halfValue(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
  return (h & 0x8000) ? -v : v;
}

static uint32_t rngState = 12345u;
static float smallValue(void) {
  rngState = rngState * 1664525u + 1013904223u;
  return (float)((int)(rngState >> 24) % 129 - 64) / 64.0f; /* k/64, k in [-64, 64]: exact in fp16 */
}

static uint16_t* randomHalves(size_t n) {
  uint16_t* x = (uint16_t*)malloc(n * sizeof(uint16_t));
  for (size_t i = 0; i < n; ++i) x[i] = exactHalf(smallValue());
  return x;
}

/* Expects `status` to equal `want` and the message to contain `fragment`. */
static void expectFailure(sparge_attn_status status, sparge_attn_status want, const char* fragment,
                          const char* what) {
  const char* msg = sparge_attn_last_error();
  CHECK(status == want, "%s: status %s, expected %s (%s)", what, sparge_attn_status_name(status),
        sparge_attn_status_name(want), msg);
  CHECK(strstr(msg, fragment) != NULL, "%s: message \"%s\" lacks \"%s\"", what, msg, fragment);
}

static sparge_attn_problem baseProblem(void) {
  sparge_attn_problem p;
  sparge_attn_problem_init(&p);
  p.heads_q = 4;
  p.heads_kv = 2;
  p.tokens_q = 150;
  p.tokens_kv = 150;
  p.head_dim = 64;
  p.backend = SPARGE_ATTN_BACKEND_CPU;
  return p;
}

/* The struct layouts the Python bindings (sparge_attn/_capi.py) mirror; test_sparge_attn.py checks the same
 * numbers against ctypes. x86-64 / aarch64 (LP64). */
static void testStructSizes(void) {
  CHECK(sizeof(sparge_attn_problem) == 200, "sizeof(sparge_attn_problem) = %zu", sizeof(sparge_attn_problem));
  CHECK(sizeof(sparge_attn_head_params) == 64, "sizeof(sparge_attn_head_params) = %zu",
        sizeof(sparge_attn_head_params));
  CHECK(sizeof(sparge_attn_outputs) == 48, "sizeof(sparge_attn_outputs) = %zu", sizeof(sparge_attn_outputs));
}

static void testVersion(void) {
  CHECK(sparge_attn_version() == SPARGE_ATTN_VERSION, "runtime version %d, header %d", sparge_attn_version(),
        SPARGE_ATTN_VERSION);
  CHECK(strncmp(sparge_attn_version_string(), "1.0.0", 5) == 0, "version string %s",
        sparge_attn_version_string());
}

static void expectPlanFailure(sparge_attn_problem* p, sparge_attn_status want, const char* fragment,
                              const char* what) {
  sparge_attn_plan* plan = (sparge_attn_plan*)0x1;
  expectFailure(sparge_attn_plan_create(p, &plan), want, fragment, what);
  CHECK(plan == NULL, "%s: the plan pointer was not cleared", what);
}

static void testProblemChecks(void) {
  sparge_attn_problem p = baseProblem();
  p.heads_q = 3;
  expectPlanFailure(&p, SPARGE_ATTN_ERROR_INVALID_ARGUMENT, "multiple of heads_kv", "heads that do not divide");
  p = baseProblem();
  p.head_dim = 96;
  expectPlanFailure(&p, SPARGE_ATTN_ERROR_UNSUPPORTED, "head_dim 96", "head dim 96");
  p = baseProblem();
  p.dtype = (sparge_attn_dtype)7;
  expectPlanFailure(&p, SPARGE_ATTN_ERROR_INVALID_ARGUMENT, "dtype", "dtype 7");
  p = baseProblem();
  p.tokens_q = 0;
  expectPlanFailure(&p, SPARGE_ATTN_ERROR_INVALID_ARGUMENT, "tokens_q", "no query");
  p = baseProblem();
  p.block_q = 64;
  p.block_k = 64;
  expectPlanFailure(&p, SPARGE_ATTN_ERROR_INVALID_ARGUMENT, "128x64 or 64x128", "geometry 64x64");
  p = baseProblem();
  p.layout = SPARGE_ATTN_LAYOUT_STRIDED;
  p.q_strides.batch = 4 * 150 * 64;
  p.q_strides.head = 150 * 64;
  p.q_strides.token = 60;
  expectPlanFailure(&p, SPARGE_ATTN_ERROR_INVALID_ARGUMENT, "q_strides", "a stride that is not 16-byte aligned");
  p = baseProblem();
  p.scale = NAN;
  expectPlanFailure(&p, SPARGE_ATTN_ERROR_INVALID_ARGUMENT, "scale", "a NaN scale");
  p = baseProblem();
  p.window_left = -2;
  expectPlanFailure(&p, SPARGE_ATTN_ERROR_INVALID_ARGUMENT, "window", "a window of -2");
  p = baseProblem();
  p.struct_size = 8;
  expectPlanFailure(&p, SPARGE_ATTN_ERROR_INVALID_ARGUMENT, "struct_size", "a struct_size of 8");
  {
    struct {
      sparge_attn_problem p;
      uint64_t laterField;
    } newer;
    newer.p = baseProblem();
    newer.p.struct_size = (uint32_t)sizeof(newer);
    newer.laterField = 1;
    expectPlanFailure(&newer.p, SPARGE_ATTN_ERROR_VERSION, "newer header", "a struct from a newer header");
    newer.laterField = 0; /* zeros in the unknown fields are fine */
    sparge_attn_plan* plan = NULL;
    CHECK(sparge_attn_plan_create(&newer.p, &plan) == SPARGE_ATTN_OK, "a larger struct with zeros: %s",
          sparge_attn_last_error());
    sparge_attn_plan_destroy(plan);
  }
  if (sparge_attn_cuda_device_count() == 0) {
    p = baseProblem();
    p.backend = SPARGE_ATTN_BACKEND_CUDA;
    expectPlanFailure(&p, SPARGE_ATTN_ERROR_NO_DEVICE, "", "CUDA without a device");
  }
  expectFailure(sparge_attn_plan_create(NULL, NULL), SPARGE_ATTN_ERROR_INVALID_ARGUMENT, "null",
                "null arguments");
}

/* Per-head parameters, owned by the test. */
typedef struct Heads {
  double theta[8], tau[8], topk[8], lambda[8];
  uint8_t dense[8];
  sparge_attn_head_params hp;
} Heads;

static void initHeads(Heads* h, int heads, sparge_attn_select select, double value, int dense) {
  memset(h, 0, sizeof(*h));
  for (int i = 0; i < heads; ++i) {
    h->theta[i] = -0.1;
    h->tau[i] = value;
    h->topk[i] = value;
    h->lambda[i] = 50;
    h->dense[i] = (uint8_t)dense;
  }
  h->hp.struct_size = sizeof(h->hp);
  h->hp.heads = heads;
  h->hp.select = select;
  h->hp.simthreshd1 = h->theta;
  h->hp.cdfthreshd = h->tau;
  h->hp.topk = h->topk;
  h->hp.pvthreshd = h->lambda;
  h->hp.dense = h->dense;
}

static void testRunChecks(void) {
  sparge_attn_problem p = baseProblem();
  sparge_attn_plan* plan = NULL;
  CHECK(sparge_attn_plan_create(&p, &plan) == SPARGE_ATTN_OK, "plan: %s", sparge_attn_last_error());
  CHECK(sparge_attn_last_error()[0] == 0, "the last error is not cleared by a success");
  uint16_t *q = randomHalves(4 * 150 * 64), *k = randomHalves(2 * 150 * 64), *v = randomHalves(2 * 150 * 64);
  uint16_t* o = (uint16_t*)calloc(4 * 150 * 64, 2);
  Heads h;
  initHeads(&h, 4, SPARGE_ATTN_SELECT_CDF, 0.9, 0);
  h.theta[2] = NAN;
  expectFailure(sparge_attn_run(plan, q, k, v, o, &h.hp, NULL, NULL, 0, NULL), SPARGE_ATTN_ERROR_INVALID_ARGUMENT,
                "head 2", "a NaN θ");
  initHeads(&h, 4, SPARGE_ATTN_SELECT_CDF, 0.9, 0);
  h.lambda[1] = -1;
  expectFailure(sparge_attn_run(plan, q, k, v, o, &h.hp, NULL, NULL, 0, NULL), SPARGE_ATTN_ERROR_INVALID_ARGUMENT,
                "pvthreshd", "a negative λ");
  initHeads(&h, 4, SPARGE_ATTN_SELECT_CDF, 1.5, 0);
  expectFailure(sparge_attn_run(plan, q, k, v, o, &h.hp, NULL, NULL, 0, NULL), SPARGE_ATTN_ERROR_INVALID_ARGUMENT,
                "cdfthreshd", "τ above 1");
  initHeads(&h, 2, SPARGE_ATTN_SELECT_CDF, 0.9, 0);
  expectFailure(sparge_attn_run(plan, q, k, v, o, &h.hp, NULL, NULL, 0, NULL), SPARGE_ATTN_ERROR_INVALID_ARGUMENT,
                "query heads", "parameters for 2 of 4 heads");
  initHeads(&h, 4, SPARGE_ATTN_SELECT_TOPK, 0.5, 0);
  h.hp.topk = NULL;
  expectFailure(sparge_attn_run(plan, q, k, v, o, &h.hp, NULL, NULL, 0, NULL), SPARGE_ATTN_ERROR_INVALID_ARGUMENT,
                "topk", "top-k mode without top-k values");
  initHeads(&h, 4, SPARGE_ATTN_SELECT_TOPK, 0.5, 0);
  expectFailure(sparge_attn_run(plan, NULL, k, v, o, &h.hp, NULL, NULL, 0, NULL), SPARGE_ATTN_ERROR_INVALID_ARGUMENT,
                "q is null", "a null q");
  expectFailure(sparge_attn_run(plan, q, k, v, o, NULL, NULL, NULL, 0, NULL), SPARGE_ATTN_ERROR_INVALID_ARGUMENT,
                "params", "null parameters");
  free(q), free(k), free(v), free(o);
  sparge_attn_plan_destroy(plan);
}

/* Exact attention of query head h, batch 0, in double: out[Nq][D]. Inputs HND. */
static void oracle(const uint16_t* q, const uint16_t* k, const uint16_t* v, int Hq, int Hkv, int Nq, int Nkv,
                   int D, int causal, int h, double* out) {
  const int hk = h / (Hq / Hkv);
  double* s = (double*)malloc(sizeof(double) * Nkv);
  for (int i = 0; i < Nq; ++i) {
    double m = -INFINITY, l = 0;
    for (int j = 0; j < Nkv; ++j) {
      double dot = 0;
      for (int d = 0; d < D; ++d)
        dot += halfValue(q[((size_t)h * Nq + i) * D + d]) * halfValue(k[((size_t)hk * Nkv + j) * D + d]);
      s[j] = (causal && j > i) ? -INFINITY : dot / sqrt((double)D);
      if (s[j] > m) m = s[j];
    }
    for (int d = 0; d < D; ++d) out[(size_t)i * D + d] = 0;
    for (int j = 0; j < Nkv; ++j) {
      const double p = exp(s[j] - m);
      l += p;
      for (int d = 0; d < D; ++d) out[(size_t)i * D + d] += p * halfValue(v[((size_t)hk * Nkv + j) * D + d]);
    }
    for (int d = 0; d < D; ++d) out[(size_t)i * D + d] /= l;
  }
  free(s);
}

/* Dense heads in exact numerics: the C API's output against the oracle, within fp16 rounding. */
static void testAgainstOracle(sparge_attn_backend backend, int causal, int Nq, int Nkv) {
  sparge_attn_problem p = baseProblem();
  p.backend = backend;
  p.numerics = SPARGE_ATTN_NUMERICS_NONE;
  p.causal = causal;
  p.tokens_q = Nq;
  p.tokens_kv = Nkv;
  sparge_attn_plan* plan = NULL;
  CHECK(sparge_attn_plan_create(&p, &plan) == SPARGE_ATTN_OK, "plan: %s", sparge_attn_last_error());
  if (!plan) return;
  const size_t nQ = (size_t)4 * Nq * 64, nKv = (size_t)2 * Nkv * 64;
  uint16_t *q = randomHalves(nQ), *k = randomHalves(nKv), *v = randomHalves(nKv);
  uint16_t* o = (uint16_t*)calloc(nQ, 2);
  Heads h;
  initHeads(&h, 4, SPARGE_ATTN_SELECT_CDF, 0.5, 1);
  CHECK(sparge_attn_run(plan, q, k, v, o, &h.hp, NULL, NULL, 0, NULL) == SPARGE_ATTN_OK, "run: %s",
        sparge_attn_last_error());
  double* ref = (double*)malloc(sizeof(double) * Nq * 64);
  double worst = 0;
  for (int head = 0; head < 4; ++head) {
    oracle(q, k, v, 4, 2, Nq, Nkv, 64, causal, head, ref);
    for (int x = 0; x < Nq * 64; ++x) {
      const double got = halfValue(o[(size_t)head * Nq * 64 + x]);
      const double err = fabs(got - ref[x]) / (1e-3 + fabs(ref[x]));
      if (err > worst) worst = err;
    }
  }
  CHECK(worst < 2e-3, "backend %d causal %d %dx%d: worst relative error %g against the oracle", (int)backend,
        causal, Nq, Nkv, worst);
  free(q), free(k), free(v), free(o), free(ref);
  sparge_attn_plan_destroy(plan);
}

/* [H][N][D] -> [N][H][D] (batch 1). */
static uint16_t* toNhd(const uint16_t* x, int H, int N, int D) {
  uint16_t* t = (uint16_t*)malloc((size_t)H * N * D * 2);
  for (int h = 0; h < H; ++h)
    for (int n = 0; n < N; ++n) memcpy(&t[((size_t)n * H + h) * D], &x[((size_t)h * N + n) * D], (size_t)D * 2);
  return t;
}

/* The optional outputs against each other and against counts made here (causal 150 x 150 at 128x64: 2 x 3
 * blocks, 5 of them valid), and an NHD run against the HND one, bit for bit. */
static void testOutputsAndLayouts(void) {
  sparge_attn_problem p = baseProblem();
  p.causal = 1;
  sparge_attn_plan *plan = NULL, *nhdPlan = NULL;
  CHECK(sparge_attn_plan_create(&p, &plan) == SPARGE_ATTN_OK, "plan: %s", sparge_attn_last_error());
  p.layout = SPARGE_ATTN_LAYOUT_NHD;
  CHECK(sparge_attn_plan_create(&p, &nhdPlan) == SPARGE_ATTN_OK, "NHD plan: %s", sparge_attn_last_error());
  int32_t nq = 0, nk = 0;
  sparge_attn_plan_grid(plan, &nq, &nk, NULL, NULL);
  CHECK(nq == 2 && nk == 3, "grid %dx%d, expected 2x3", nq, nk);
  uint16_t *q = randomHalves(4 * 150 * 64), *k = randomHalves(2 * 150 * 64), *v = randomHalves(2 * 150 * 64);
  uint16_t *o = (uint16_t*)calloc(4 * 150 * 64, 2), *oNhd = (uint16_t*)calloc(4 * 150 * 64, 2);
  uint8_t mask[4 * 6], skipped[4 * 6], maskNhd[4 * 6];
  int32_t lut[4 * 6], count[4 * 2];
  int64_t stats[4 * SPARGE_ATTN_STATS];
  sparge_attn_outputs out;
  memset(&out, 0, sizeof out);
  out.struct_size = sizeof out;
  out.block_mask = mask, out.lut = lut, out.lut_count = count, out.pv_skipped = skipped, out.head_stats = stats;
  Heads h;
  initHeads(&h, 4, SPARGE_ATTN_SELECT_CDF, 0.6, 0);
  CHECK(sparge_attn_run(plan, q, k, v, o, &h.hp, &out, NULL, 0, NULL) == SPARGE_ATTN_OK, "run: %s",
        sparge_attn_last_error());
  for (int head = 0; head < 4; ++head) {
    int64_t selected = 0, skips = 0;
    for (int i = 0; i < 2; ++i) {
      const uint8_t* row = mask + (head * 2 + i) * 3;
      const int32_t* l = lut + (head * 2 + i) * 3;
      int j = -1, n = 0;
      for (int t = 0; t < count[head * 2 + i]; ++t) {
        j = t == 0 ? l[0] : j + l[t];
        CHECK(j < 3 && row[j], "head %d row %d: LUT entry %d (block %d) is not in the mask", head, i, t, j);
      }
      for (int x = 0; x < 3; ++x) n += row[x], skips += skipped[(head * 2 + i) * 3 + x];
      CHECK(n == count[head * 2 + i], "head %d row %d: %d mask blocks, LUT count %d", head, i, n, count[head * 2 + i]);
      selected += n;
      CHECK(!row[2] || i == 1, "head %d: block (0, 2) holds no visible pair but is on", head);
    }
    const int64_t* s = stats + head * SPARGE_ATTN_STATS;
    CHECK(s[SPARGE_ATTN_STAT_VALID_BLOCKS] == 5, "head %d: %lld valid blocks, expected 5", head,
          (long long)s[SPARGE_ATTN_STAT_VALID_BLOCKS]);
    CHECK(s[SPARGE_ATTN_STAT_SELECTED_BLOCKS] == selected && s[SPARGE_ATTN_STAT_SKIPPED_PV] == skips &&
              s[SPARGE_ATTN_STAT_COMPUTED_PV] == selected - skips,
          "head %d: counters disagree with the mask and the PV-skip map", head);
  }
  uint16_t *qn = toNhd(q, 4, 150, 64), *kn = toNhd(k, 2, 150, 64), *vn = toNhd(v, 2, 150, 64);
  sparge_attn_outputs outNhd;
  memset(&outNhd, 0, sizeof outNhd);
  outNhd.struct_size = sizeof outNhd;
  outNhd.block_mask = maskNhd;
  CHECK(sparge_attn_run(nhdPlan, qn, kn, vn, oNhd, &h.hp, &outNhd, NULL, 0, NULL) == SPARGE_ATTN_OK, "NHD run: %s",
        sparge_attn_last_error());
  uint16_t* back = toNhd(o, 4, 150, 64); /* HND output as NHD */
  CHECK(memcmp(back, oNhd, (size_t)4 * 150 * 64 * 2) == 0, "NHD output differs from the HND one");
  CHECK(memcmp(mask, maskNhd, sizeof mask) == 0, "NHD mask differs from the HND one");
  free(q), free(k), free(v), free(o), free(oNhd), free(qn), free(kn), free(vn), free(back);
  sparge_attn_plan_destroy(plan);
  sparge_attn_plan_destroy(nhdPlan);
}

int main(void) {
  testStructSizes();
  testVersion();
  testProblemChecks();
  testRunChecks();
  testAgainstOracle(SPARGE_ATTN_BACKEND_CPU, 1, 150, 150);
  testAgainstOracle(SPARGE_ATTN_BACKEND_CPU, 0, 100, 300);
  testOutputsAndLayouts();
  if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
  else printf("all C API checks passed (CUDA devices: %d)\n", sparge_attn_cuda_device_count());
  return failures ? 1 : 0;
}
