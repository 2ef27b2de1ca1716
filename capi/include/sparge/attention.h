/* The C API of libsparge_attn: SpargeAttn's whole call (Stage 1, quantization, Stage 2) on the caller's
 * tensors, on a CUDA device or on the CPU. Documentation: docs/capi.md.
 *
 * Pattern: describe the problem once (sparge_attn_problem), create a plan (host work only, no device
 * allocation), query its workspace size, then run it as often as needed. A CUDA run launches kernels on the
 * caller's stream (and on two streams it forks from it and joins back into it before returning) and does
 * nothing else: no allocation, no synchronisation, no environment reads, so that it can be captured in a
 * CUDA graph. A host thread's first run on a device creates those two streams and their events once. Every
 * call returns a status; sparge_attn_last_error() says what went wrong, in words, for the calling thread.
 *
 * ABI rules: functions take plain C types and opaque handles; every struct starts with `struct_size`, which
 * the caller sets to sizeof(the struct) as its header declares it (zero the struct, then set struct_size;
 * sparge_attn_problem_init sets a problem's defaults), so that later versions can append fields. The library accepts a struct from an older header (its missing fields take
 * their defaults) and refuses one from a newer header whose unknown fields are not zero. */
#ifndef SPARGE_ATTENTION_H
#define SPARGE_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SPARGE_ATTN_VERSION_MAJOR 1
#define SPARGE_ATTN_VERSION_MINOR 0
#define SPARGE_ATTN_VERSION_PATCH 0
/* major * 10000 + minor * 100 + patch; compare with sparge_attn_version() at run time. */
#define SPARGE_ATTN_VERSION \
  (SPARGE_ATTN_VERSION_MAJOR * 10000 + SPARGE_ATTN_VERSION_MINOR * 100 + SPARGE_ATTN_VERSION_PATCH)

#if defined(__GNUC__)
#define SPARGE_ATTN_API __attribute__((visibility("default")))
#else
#define SPARGE_ATTN_API
#endif

typedef enum sparge_attn_status {
  SPARGE_ATTN_OK = 0,
  SPARGE_ATTN_ERROR_INVALID_ARGUMENT = 1, /* a null pointer, a bad shape, dtype, stride, parameter, ... */
  SPARGE_ATTN_ERROR_UNSUPPORTED = 2,      /* valid, but not supported here (head dim, numerics on this GPU) */
  SPARGE_ATTN_ERROR_WORKSPACE = 3,        /* workspace missing, too small or misaligned */
  SPARGE_ATTN_ERROR_NO_DEVICE = 4,        /* CUDA asked for, but no usable device (or a CPU-only build) */
  SPARGE_ATTN_ERROR_CUDA = 5,             /* the CUDA runtime reported an error */
  SPARGE_ATTN_ERROR_VERSION = 6,          /* a struct from a newer header with fields this library lacks */
  SPARGE_ATTN_ERROR_INTERNAL = 7          /* anything else (out of host memory, ...) */
} sparge_attn_status;

typedef enum sparge_attn_dtype {
  SPARGE_ATTN_FLOAT16 = 0,
  SPARGE_ATTN_BFLOAT16 = 1
} sparge_attn_dtype;

/* Stage 2's arithmetic (docs/numerics.md). */
typedef enum sparge_attn_numerics {
  SPARGE_ATTN_NUMERICS_INT8_FP8 = 0, /* INT8 Q·Kᵀ, FP8 e4m3 P·V (SpargeAttn on sm89/sm90) */
  SPARGE_ATTN_NUMERICS_INT8_FP16 = 1, /* INT8 Q·Kᵀ, fp16 P·V (SpargeAttn on sm80) */
  SPARGE_ATTN_NUMERICS_NONE = 2       /* exact: fp16/bf16 inputs, fp32 accumulation */
} sparge_attn_numerics;

typedef enum sparge_attn_backend {
  SPARGE_ATTN_BACKEND_AUTO = 0, /* CUDA when this library has it and a device is usable, else CPU */
  SPARGE_ATTN_BACKEND_CUDA = 1, /* device pointers, kernels on the caller's stream */
  SPARGE_ATTN_BACKEND_CPU = 2   /* host pointers, the CPU engine (multi-threaded, allocates) */
} sparge_attn_backend;

typedef enum sparge_attn_layout {
  SPARGE_ATTN_LAYOUT_HND = 0,     /* [B, H, N, D] contiguous */
  SPARGE_ATTN_LAYOUT_NHD = 1,     /* [B, N, H, D] contiguous */
  SPARGE_ATTN_LAYOUT_STRIDED = 2  /* the strides given in sparge_attn_problem */
} sparge_attn_layout;

typedef enum sparge_attn_select {
  SPARGE_ATTN_SELECT_CDF = 0, /* keep blocks while the cumulative probability <= cdfthreshd (τ) */
  SPARGE_ATTN_SELECT_TOPK = 1 /* keep trunc(topk · nk) blocks per row */
} sparge_attn_select;

/* Strides of a [B, H, N, D] tensor in elements; the D stride is 1. */
typedef struct sparge_attn_strides {
  int64_t batch, head, token;
} sparge_attn_strides;

/* Everything about a call but its data and per-head parameters; a plan is made from it. */
typedef struct sparge_attn_problem {
  uint32_t struct_size;
  int32_t batch;      /* B >= 1 */
  int32_t heads_q;    /* Hq >= 1 */
  int32_t heads_kv;   /* Hkv >= 1, divides Hq (GQA: query head h reads KV head h / (Hq / Hkv)) */
  int32_t tokens_q;   /* Nq >= 1 */
  int32_t tokens_kv;  /* Nkv >= 1 (cross-attention: Nq != Nkv) */
  int32_t head_dim;   /* D of Q, K, V and O: 64, 128 or 256 */
  sparge_attn_dtype dtype; /* of Q, K, V and O */
  sparge_attn_numerics numerics;
  sparge_attn_backend backend;
  int32_t device;     /* CUDA device ordinal (CUDA backend); -1: the current device when the plan is made */
  int32_t causal;     /* 1: query t sees keys <= t (top-left aligned), exactly, in every block */
  int64_t window_left, window_right; /* local window [t - left, t + right]; -1 = unbounded (both -1: none).
                                        Set both to -1 when unused (zero means a window of width 0). */
  int32_t block_q, block_k; /* tile geometry 128x64 or 64x128; 0, 0: 64x128 on Hopper, else 128x64 */
  double scale;       /* softmax scale; 0: 1/sqrt(D) (Stage 1 always uses D^-1/2, as SpargeAttn) */
  int32_t smooth_k;   /* 1: subtract K's token mean before pooling and quantizing K (SpargeAttn's default) */
  int32_t attention_sink; /* 1: key block 0 always on */
  int32_t diagonal;   /* 1: blocks holding key == query always on (an extension of Sparge Studio) */
  int32_t cpu_threads;/* CPU backend: threads, 0 = every core */
  sparge_attn_layout layout; /* of Q, K, V and O; STRIDED: the four strides below */
  sparge_attn_strides q_strides, k_strides, v_strides, o_strides;
} sparge_attn_problem;

/* Fills `p` with the defaults: B = Hq = Hkv = 1, N = 0, D = 0, fp16, int8-fp8, backend AUTO, device -1,
 * no causal mask, no window, default geometry and scale, smooth_k on, HND. Returns SPARGE_ATTN_OK. */
SPARGE_ATTN_API sparge_attn_status sparge_attn_problem_init(sparge_attn_problem* p);

/* Per query head parameters (arrays of heads_q values, in host memory); read at every run. */
typedef struct sparge_attn_head_params {
  uint32_t struct_size;
  int32_t heads;             /* the number of values in each array: heads_q */
  sparge_attn_select select; /* CDF (cdfthreshd) or top-k (topk) for every head */
  const double* simthreshd1; /* θ: blocks with self-similarity <= θ are forced on; required, finite */
  const double* cdfthreshd;  /* τ in [0, 1] (CDF); required in CDF mode */
  const double* topk;        /* fraction in (0, 1] (top-k); required in top-k mode */
  const double* pvthreshd;   /* λ >= 0 (base 2, +inf: never skip); null: 50 for every head */
  const uint8_t* dense;      /* optional: 1 = every valid block, no PV skip (is_sparse false) */
  const uint8_t* exact;      /* optional: 1 = this head runs Stage 2 in exact numerics */
} sparge_attn_head_params;

/* Number of int64 statistics per (batch, query head) in sparge_attn_outputs::head_stats. */
#define SPARGE_ATTN_STATS 5
enum {
  SPARGE_ATTN_STAT_VALID_BLOCKS = 0,    /* blocks holding a visible (query, key) pair */
  SPARGE_ATTN_STAT_SELECTED_BLOCKS = 1, /* chosen by Stage 1 (Q·Kᵀ computed) */
  SPARGE_ATTN_STAT_COMPUTED_PV = 2,     /* selected and P·V computed */
  SPARGE_ATTN_STAT_SKIPPED_PV = 3,      /* selected, P·V skipped (λ) */
  SPARGE_ATTN_STAT_EMPTY_ROWS = 4       /* query rows that saw no key (output 0) */
};

/* Optional outputs, each in the memory of the run's backend (device pointers for CUDA); null = not wanted.
 * nq, nk: the plan's block grid (sparge_attn_plan_grid). Without pv_skipped and head_stats the CUDA backend
 * leaves out the P·V-skip vote of heads with λ >= 40, which can then skip only blocks whose probabilities
 * round to zero (O the same to fp32 rounding), and runs heads at top-k 1 dense; with either, the vote runs as
 * SpargeAttn's does, so that the counts say what it skips. */
typedef struct sparge_attn_outputs {
  uint32_t struct_size;
  uint8_t* block_mask;  /* [B][Hq][nq][nk]: 1 = block computed */
  int32_t* lut;         /* [B][Hq][nq][nk]: SpargeAttn's delta-encoded block list per row, zero padded */
  int32_t* lut_count;   /* [B][Hq][nq]: blocks per row */
  uint8_t* pv_skipped;  /* [B][Hq][nq][nk]: 1 = Q·Kᵀ computed, P·V skipped */
  int64_t* head_stats;  /* [B][Hq][SPARGE_ATTN_STATS] */
} sparge_attn_outputs;

typedef struct sparge_attn_plan sparge_attn_plan;

/* Library version, major * 10000 + minor * 100 + patch, and as text ("1.0.0 (cuda)" / "1.0.0 (cpu only)"). */
SPARGE_ATTN_API int32_t sparge_attn_version(void);
SPARGE_ATTN_API const char* sparge_attn_version_string(void);
/* The message of the calling thread's last failed call ("" after success); valid until its next call. */
SPARGE_ATTN_API const char* sparge_attn_last_error(void);
SPARGE_ATTN_API const char* sparge_attn_status_name(sparge_attn_status status);
/* Number of usable CUDA devices (0 in a CPU-only build or without a driver); never fails. */
SPARGE_ATTN_API int32_t sparge_attn_cuda_device_count(void);

/* Validates `problem` and makes a plan: host work only (the CUDA backend reads the device's properties).
 * `*plan` is set on success and must be released with sparge_attn_plan_destroy. A plan is immutable: several
 * threads may run it at once, each with its own workspace. */
SPARGE_ATTN_API sparge_attn_status sparge_attn_plan_create(const sparge_attn_problem* problem,
                                                           sparge_attn_plan** plan);
SPARGE_ATTN_API void sparge_attn_plan_destroy(sparge_attn_plan* plan);
/* Bytes of workspace a run needs (device memory for CUDA, aligned to 256 bytes; 0 for the CPU backend). */
SPARGE_ATTN_API sparge_attn_status sparge_attn_plan_workspace_size(const sparge_attn_plan* plan,
                                                                   size_t* bytes);
/* The block grid and tile geometry the plan resolved (nq = ceil(Nq / block_q), nk = ceil(Nkv / block_k)). */
SPARGE_ATTN_API sparge_attn_status sparge_attn_plan_grid(const sparge_attn_plan* plan, int32_t* nq,
                                                         int32_t* nk, int32_t* block_q, int32_t* block_k);
/* The backend the plan runs on (AUTO resolved). */
SPARGE_ATTN_API sparge_attn_status sparge_attn_plan_backend(const sparge_attn_plan* plan,
                                                            sparge_attn_backend* backend);

/* One whole call: o = SpargeAttn(q, k, v). Shapes and strides as the plan's problem; `outputs` may be null.
 * CUDA: device pointers on the plan's device (16-byte aligned), `stream` a cudaStream_t (null: the legacy
 * default stream); the call only queues work on it. CPU: host pointers; `workspace` and `stream` are
 * ignored, and the call returns when o is written. */
SPARGE_ATTN_API sparge_attn_status sparge_attn_run(const sparge_attn_plan* plan, const void* q, const void* k,
                                                   const void* v, void* o, const sparge_attn_head_params* params,
                                                   const sparge_attn_outputs* outputs, void* workspace,
                                                   size_t workspace_bytes, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* SPARGE_ATTENTION_H */
