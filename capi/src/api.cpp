// The exported C functions: each runs its body inside one guard that turns every C++ exception into a status
// and the calling thread's last-error message, so that nothing but a status crosses the C boundary.
#include <cstddef>
#include <new>
#include <string>

#include "call.h"
#include "sparge/core/error.h"

struct sparge_attn_plan {
  sparge::capi::Resolved resolved;
  std::unique_ptr<sparge::capi::DevicePlan> device;  // CUDA backend
};

namespace sparge::capi {
namespace {

thread_local std::string tLastError;

template <class F>
sparge_attn_status guarded(const char* function, F&& body) {
  try {
    body();
    tLastError.clear();
    return SPARGE_ATTN_OK;
  } catch (const Failure& e) {
    tLastError = std::string(function) + ": " + e.what();
    return e.status();
  } catch (const Error& e) {  // from the engines and the CUDA helpers: the problem is named in the text
    tLastError = std::string(function) + ": " + e.what();
    return SPARGE_ATTN_ERROR_INTERNAL;
  } catch (const std::bad_alloc&) {
    tLastError = std::string(function) + ": out of host memory";
    return SPARGE_ATTN_ERROR_INTERNAL;
  } catch (const std::exception& e) {
    tLastError = std::string(function) + ": " + e.what();
    return SPARGE_ATTN_ERROR_INTERNAL;
  } catch (...) {
    tLastError = std::string(function) + ": unknown failure";
    return SPARGE_ATTN_ERROR_INTERNAL;
  }
}

void requireArg(const void* p, const char* what) {
  if (!p) throw Failure(SPARGE_ATTN_ERROR_INVALID_ARGUMENT, std::string(what) + " is null");
}

sparge_attn_outputs readOutputs(const sparge_attn_outputs* given) {
  sparge_attn_outputs out{};
  if (given)
    readStruct(given, given->struct_size, sizeof(sparge_attn_outputs), &out, sizeof(out),
               "sparge_attn_outputs");
  return out;
}

}  // namespace
}  // namespace sparge::capi

using sparge::capi::Failure;
using sparge::capi::guarded;
using sparge::capi::requireArg;

extern "C" {

int32_t sparge_attn_version(void) {
  return SPARGE_ATTN_VERSION;
}

const char* sparge_attn_version_string(void) {
#ifdef SPARGE_ATTN_WITH_CUDA
  return "1.0.0 (cuda)";
#else
  return "1.0.0 (cpu only)";
#endif
}

const char* sparge_attn_last_error(void) {
  return sparge::capi::tLastError.c_str();
}

const char* sparge_attn_status_name(sparge_attn_status status) {
  switch (status) {
    case SPARGE_ATTN_OK:
      return "SPARGE_ATTN_OK";
    case SPARGE_ATTN_ERROR_INVALID_ARGUMENT:
      return "SPARGE_ATTN_ERROR_INVALID_ARGUMENT";
    case SPARGE_ATTN_ERROR_UNSUPPORTED:
      return "SPARGE_ATTN_ERROR_UNSUPPORTED";
    case SPARGE_ATTN_ERROR_WORKSPACE:
      return "SPARGE_ATTN_ERROR_WORKSPACE";
    case SPARGE_ATTN_ERROR_NO_DEVICE:
      return "SPARGE_ATTN_ERROR_NO_DEVICE";
    case SPARGE_ATTN_ERROR_CUDA:
      return "SPARGE_ATTN_ERROR_CUDA";
    case SPARGE_ATTN_ERROR_VERSION:
      return "SPARGE_ATTN_ERROR_VERSION";
    case SPARGE_ATTN_ERROR_INTERNAL:
      return "SPARGE_ATTN_ERROR_INTERNAL";
  }
  return "unknown status";
}

int32_t sparge_attn_cuda_device_count(void) {
  try {
    return sparge::capi::cudaDeviceCount();
  } catch (...) {
    return 0;
  }
}

sparge_attn_status sparge_attn_problem_init(sparge_attn_problem* p) {
  return guarded("sparge_attn_problem_init", [&] {
    requireArg(p, "problem");
    *p = sparge_attn_problem{};
    p->struct_size = sizeof(sparge_attn_problem);
    p->batch = p->heads_q = p->heads_kv = 1;
    p->dtype = SPARGE_ATTN_FLOAT16;
    p->numerics = SPARGE_ATTN_NUMERICS_INT8_FP8;
    p->backend = SPARGE_ATTN_BACKEND_AUTO;
    p->device = -1;
    p->window_left = p->window_right = -1;
    p->smooth_k = 1;
    p->layout = SPARGE_ATTN_LAYOUT_HND;
  });
}

sparge_attn_status sparge_attn_plan_create(const sparge_attn_problem* problem, sparge_attn_plan** plan) {
  return guarded("sparge_attn_plan_create", [&] {
    requireArg(plan, "plan (the address the new plan is written to)");
    *plan = nullptr;
    requireArg(problem, "problem");
    sparge_attn_problem p;
    sparge_attn_problem_init(&p);  // fields an older, smaller struct lacks keep their defaults
    sparge::capi::readStruct(problem, problem->struct_size,
                             offsetof(sparge_attn_problem, o_strides) + sizeof(sparge_attn_strides), &p,
                             sizeof(p), "sparge_attn_problem");
    auto made = std::make_unique<sparge_attn_plan>();
    made->resolved = sparge::capi::resolveProblem(p);
    if (made->resolved.backend == SPARGE_ATTN_BACKEND_CUDA)
      made->device = sparge::capi::makeDevicePlan(made->resolved);
    *plan = made.release();
  });
}

void sparge_attn_plan_destroy(sparge_attn_plan* plan) {
  delete plan;
}

sparge_attn_status sparge_attn_plan_workspace_size(const sparge_attn_plan* plan, size_t* bytes) {
  return guarded("sparge_attn_plan_workspace_size", [&] {
    requireArg(plan, "plan");
    requireArg(bytes, "bytes");
    *bytes = plan->device ? plan->device->workspaceBytes() : 0;
  });
}

sparge_attn_status sparge_attn_plan_grid(const sparge_attn_plan* plan, int32_t* nq, int32_t* nk,
                                         int32_t* block_q, int32_t* block_k) {
  return guarded("sparge_attn_plan_grid", [&] {
    requireArg(plan, "plan");
    const sparge::capi::Resolved& r = plan->resolved;
    if (nq) *nq = r.nq;
    if (nk) *nk = r.nk;
    if (block_q) *block_q = r.geometry.blockQ;
    if (block_k) *block_k = r.geometry.blockK;
  });
}

sparge_attn_status sparge_attn_plan_backend(const sparge_attn_plan* plan, sparge_attn_backend* backend) {
  return guarded("sparge_attn_plan_backend", [&] {
    requireArg(plan, "plan");
    requireArg(backend, "backend");
    *backend = plan->resolved.backend;
  });
}

sparge_attn_status sparge_attn_run(const sparge_attn_plan* plan, const void* q, const void* k, const void* v,
                                   void* o, const sparge_attn_head_params* params,
                                   const sparge_attn_outputs* outputs, void* workspace,
                                   size_t workspace_bytes, void* stream) {
  return guarded("sparge_attn_run", [&] {
    requireArg(plan, "plan");
    requireArg(q, "q");
    requireArg(k, "k");
    requireArg(v, "v");
    requireArg(o, "o");
    const sparge::capi::RunHeads heads = sparge::capi::resolveHeads(plan->resolved, params);
    sparge::capi::RunArgs args;
    args.q = q;
    args.k = k;
    args.v = v;
    args.o = o;
    args.heads = &heads;
    args.outputs = sparge::capi::readOutputs(outputs);
    args.workspace = workspace;
    args.workspaceBytes = workspace_bytes;
    args.stream = stream;
    if (plan->device)
      plan->device->run(args);
    else
      sparge::capi::runOnCpu(plan->resolved, args);
  });
}

}  // extern "C"
