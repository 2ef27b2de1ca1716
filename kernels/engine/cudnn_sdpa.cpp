// cuDNN fused attention for the dense baseline: libcudnn.so.9 opened with dlopen and handed to the
// cudnn-frontend's dynamic-loading shim, one graph and plan per entry shape.
#include "engine/cudnn_sdpa.h"

#include <mutex>

#include "common/cuda_util.h"
#include "sparge/core/dl_library.h"
#include "sparge/core/error.h"

#ifdef SPARGE_HAVE_CUDNN_FRONTEND
#define NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING
#define CUDNN_FRONTEND_SKIP_JSON_LIB
#include <cudnn_frontend.h>

namespace cudnn_frontend {
// The frontend resolves every cuDNN function through this handle (its dynamic-loading mode).
void* cudnn_dlhandle = nullptr;
}  // namespace cudnn_frontend
#endif

namespace sparge::cuda {

namespace {
constexpr const char* kWhere = "cuDNN baseline";
}

std::string CudnnAvailability::label() const {
  return "cuDNN " + std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
         std::to_string(version % 100);
}

#ifndef SPARGE_HAVE_CUDNN_FRONTEND

const CudnnAvailability& cudnnAvailability() {
  static const CudnnAvailability a{false, 0, "", SPARGE_CUDNN_MISSING};
  return a;
}

struct CudnnSdpa::Impl {};
CudnnSdpa::CudnnSdpa(const SdpaShape&) {
  throw Error(kWhere, cudnnAvailability().reason);
}
CudnnSdpa::~CudnnSdpa() = default;
void CudnnSdpa::run(const void*, const void*, const void*, void*, cudaStream_t) {}

#else

namespace fe = cudnn_frontend;

namespace {

struct CudnnApi {
  size_t (*getVersion)() = nullptr;
};

CudnnAvailability load() {
  std::vector<std::string> defaults{"libcudnn.so.9"};
  if (std::string(SPARGE_CUDNN_BUILD_PATH).size()) defaults.emplace_back(SPARGE_CUDNN_BUILD_PATH);
  const auto paths = core::dl::candidates("SPARGE_CUDNN_LIBRARY", defaults);
  auto r = core::dl::openFirst<CudnnApi>(
      paths, "libcudnn.so.9", "SPARGE_CUDNN_LIBRARY", [](void* h, CudnnApi& api) -> std::string {
        std::string missing;
        if (!core::dl::resolve(h, "cudnnGetVersion", api.getVersion, missing))
          return "missing symbols: " + missing;
        const size_t v = api.getVersion();
        if (v < 90000 || v >= 100000) return "cuDNN " + std::to_string(v) + " is not cuDNN 9";
        return {};
      });
  CudnnAvailability a;
  if (!r.ok) {
    a.reason = r.error;
    return a;
  }
  fe::cudnn_dlhandle = r.handle;
  a.ok = true;
  a.version = (int)r.api.getVersion();
  a.path = r.path;
  return a;
}

fe::DataType_t dataType(ElemType t) {
  return t == ElemType::F16 ? fe::DataType_t::HALF : fe::DataType_t::BFLOAT16;
}

void checkFe(fe::error_t e, const char* what) {
  if (e.is_bad()) throw Error(kWhere, std::string(what) + ": " + e.get_message());
}

}  // namespace

const CudnnAvailability& cudnnAvailability() {
  static std::once_flag once;
  static CudnnAvailability a;
  std::call_once(once, [] {
    try {
      a = load();
    } catch (const std::exception& e) {
      a = CudnnAvailability{};
      a.reason = std::string("libcudnn not usable: ") + e.what();
    }
  });
  return a;
}

struct CudnnSdpa::Impl {
  cudnnHandle_t handle = nullptr;
  std::shared_ptr<fe::graph::Graph> graph;
  std::shared_ptr<fe::graph::Tensor_attributes> q, k, v, o;
  void* workspace = nullptr;
  ~Impl() {
    if (workspace) cudaFree(workspace);
    if (handle) fe::detail::destroy_handle(handle);
  }
};

namespace {

std::shared_ptr<fe::graph::Tensor_attributes> tensor(fe::graph::Graph& g, const char* name, int64_t b,
                                                     int64_t h, int64_t n, int64_t d) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_dim({b, h, n, d})
                      .set_stride({h * n * d, n * d, d, 1}));
}

// cuDNN's band mask in FlashAttention's window convention (core::visibleKeys): the right bound is the same
// (causal = 0); cuDNN's left bound counts the diagonal, so it is our left + 1.
fe::graph::SDPA_attributes attributes(const SdpaShape& s) {
  auto a =
      fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(false).set_attn_scale((float)s.scale);
  const int64_t right = s.causal ? 0 : s.window.right;
  if (right >= 0 || s.window.left >= 0) a.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT);
  if (right >= 0) a.set_diagonal_band_right_bound((int)std::min<int64_t>(right, s.Nkv));
  if (s.window.left >= 0)
    a.set_diagonal_band_left_bound((int)std::min<int64_t>(s.window.left + 1, s.Nkv + 1));
  return a;
}

}  // namespace

CudnnSdpa::CudnnSdpa(const SdpaShape& s) : impl_(std::make_unique<Impl>()) {
  const CudnnAvailability& lib = cudnnAvailability();
  if (!lib.ok) throw Error(kWhere, lib.reason);
  label_ = lib.label() + " fused SDPA (" + (s.et == ElemType::F16 ? "float16" : "bfloat16") + ")";
  Impl& m = *impl_;
  if (fe::detail::create_handle(&m.handle) != CUDNN_STATUS_SUCCESS) {
    m.handle = nullptr;
    throw Error(kWhere, "cudnnCreate failed (no usable GPU for cuDNN?)");
  }
  m.graph = std::make_shared<fe::graph::Graph>();
  m.graph->set_io_data_type(dataType(s.et))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  m.q = tensor(*m.graph, "Q", s.B, s.Hq, s.Nq, s.D);
  m.k = tensor(*m.graph, "K", s.B, s.Hkv, s.Nkv, s.D);
  m.v = tensor(*m.graph, "V", s.B, s.Hkv, s.Nkv, s.D);
  auto outputs = m.graph->sdpa(m.q, m.k, m.v, attributes(s));
  m.o = outputs[0];
  m.o->set_output(true)
      .set_dim({s.B, s.Hq, s.Nq, s.D})
      .set_stride({(int64_t)s.Hq * s.Nq * s.D, (int64_t)s.Nq * s.D, s.D, 1});
  try {
    checkFe(m.graph->build(m.handle, {fe::HeurMode_t::A}), "no cuDNN engine for this shape and mask");
  } catch (const std::runtime_error& e) {  // the shim throws when a symbol or libcudart is missing
    throw Error(kWhere, std::string("building the cuDNN plan failed: ") + e.what());
  }
  int64_t bytes = 0;
  checkFe(m.graph->get_workspace_size(bytes), "workspace size");
  if (bytes > 0) check(cudaMalloc(&m.workspace, (size_t)bytes), "cuDNN workspace");
}

CudnnSdpa::~CudnnSdpa() = default;

void CudnnSdpa::run(const void* q, const void* k, const void* v, void* o, cudaStream_t s) {
  Impl& m = *impl_;
  if (fe::detail::set_stream(m.handle, s) != CUDNN_STATUS_SUCCESS)
    throw Error(kWhere, "cudnnSetStream failed");
  std::unordered_map<std::shared_ptr<fe::graph::Tensor_attributes>, void*> pack{
      {m.q, const_cast<void*>(q)}, {m.k, const_cast<void*>(k)}, {m.v, const_cast<void*>(v)}, {m.o, o}};
  checkFe(m.graph->execute(m.handle, pack, m.workspace), "cuDNN attention");
}

#endif

}  // namespace sparge::cuda
