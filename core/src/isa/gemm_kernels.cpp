// One instruction-set variant of gemm::multiply. This file is compiled three times (see core/CMakeLists.txt)
// with -march=x86-64-v4, x86-64-v3 and the baseline, and SPARGE_GEMM_VARIANT naming the function. Eigen's
// namespace is renamed per variant so that its template instantiations, which differ per instruction set,
// never merge across the variants at link time.
#define Eigen SPARGE_EIGEN_NAMESPACE
#include <Eigen/Core>

namespace sparge::core::gemm {

void SPARGE_GEMM_VARIANT(int m, int n, int k, const float* a, int lda, const float* b, int ldb,
                         bool bTransposed, float* c, int ldc, bool accumulate) {
  using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Stride = Eigen::OuterStride<>;
  const Eigen::Map<const Matrix, 0, Stride> A(a, m, k, Stride(lda));
  Eigen::Map<Matrix, 0, Stride> C(c, m, n, Stride(ldc));
  if (bTransposed) {
    const Eigen::Map<const Matrix, 0, Stride> B(b, n, k, Stride(ldb));
    if (accumulate)
      C.noalias() += A * B.transpose();
    else
      C.noalias() = A * B.transpose();
  } else {
    const Eigen::Map<const Matrix, 0, Stride> B(b, k, n, Stride(ldb));
    if (accumulate)
      C.noalias() += A * B;
    else
      C.noalias() = A * B;
  }
}

}  // namespace sparge::core::gemm
