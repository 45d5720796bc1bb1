// sgemm_kernel.cu: the fp32 GEMM behind the linear layers of the inference server.
//
//   D = alpha * A @ B + beta * C
//
// A is M x K, B is K x N, C and D are M x N; every matrix is row-major, contiguous
// and fp32. The server calls sgemm_launch() (below) through its C ABI.
//
// This version is the straightforward one: one thread per output element, every
// operand read straight from global memory for every multiply-add. It is correct
// and simple, and it leaves almost all of the GPU's arithmetic throughput unused.

#include <cuda_runtime.h>

#include <cstddef>

namespace {

// 32 threads along N so a warp reads 32 neighbouring elements of a row of B and
// writes 32 neighbouring elements of D; 8 rows of D per block.
constexpr int kBlockX = 32;
constexpr int kBlockY = 8;

__global__ void sgemm_naive_kernel(int M, int N, int K, float alpha,
                                   const float* __restrict__ A,
                                   const float* __restrict__ B, float beta,
                                   const float* __restrict__ C,
                                   float* __restrict__ D) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;

  const float* a_row = A + static_cast<size_t>(row) * K;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) {
    acc += a_row[k] * B[static_cast<size_t>(k) * N + col];
  }

  const size_t idx = static_cast<size_t>(row) * N + col;
  float out = alpha * acc;
  // beta == 0 means C is not read at all: it may hold garbage, NaN or Inf.
  if (beta != 0.0f) out += beta * C[idx];
  D[idx] = out;
}

}  // namespace

// Host entry point (C ABI). Enqueues the GEMM on `stream` (a cudaStream_t; null
// is the legacy default stream) and returns without waiting for it. Returns a
// cudaError_t value: cudaSuccess (0), cudaErrorInvalidValue for negative sizes,
// or the launch error.
extern "C" int sgemm_launch(int M, int N, int K, float alpha, const float* A,
                            const float* B, float beta, const float* C, float* D,
                            void* stream) {
  if (M < 0 || N < 0 || K < 0) return static_cast<int>(cudaErrorInvalidValue);
  if (M == 0 || N == 0) return static_cast<int>(cudaSuccess);

  const dim3 block(kBlockX, kBlockY);
  const dim3 grid((N + kBlockX - 1) / kBlockX, (M + kBlockY - 1) / kBlockY);
  sgemm_naive_kernel<<<grid, block, 0, static_cast<cudaStream_t>(stream)>>>(
      M, N, K, alpha, A, B, beta, C, D);
  return static_cast<int>(cudaGetLastError());
}
