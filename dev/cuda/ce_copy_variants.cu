// Peer-to-peer copies on the copy engines, every GPU at once, as a copy-engine collective moves
// them (src/parallel/comm_ce.cpp): each GPU exchanges S bytes with each of its peers over NVLink.
// The variants differ in direction and in how the copies are issued:
//   v0 pull, one stream per peer, cudaMemcpyAsync each   (the production pattern)
//   v1 pull, all peers in one cudaMemcpyBatchAsync on one stream
//   v2 push, one stream per peer, cudaMemcpyAsync each
//   v3 push, all peers in one cudaMemcpyBatchAsync on one stream
//   v4 v3 with cudaMemcpyFlagPreferOverlapWithCompute
//   v5 v1 with cudaMemcpyFlagPreferOverlapWithCompute
// Printed per variant and size: the inbound rate of a GPU (bytes it receives a second, mean over
// GPUs; a copy-engine all-reduce needs 2(n-1)/n of a bucket inbound), and the host's time to
// issue one GPU's copies of one round (µs), each GPU issued by its own host thread.
// With --busy, every GPU also runs a kernel streaming 1 GiB through HBM meanwhile (backward's
// pressure on memory), and the rates are those under load.
//
//   dev/cuda/build.sh ce_copy_variants        (here; then on a machine with 2 or more GPUs:)
//   .devbundle/ce_copy_variants [--busy]      (all visible GPUs; each needs peer access to every other)
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "dev_check.h"

namespace {

constexpr int kVariants = 6;
const char* kNames[kVariants] = {"pull, stream a peer", "pull, one batch",          "push, stream a peer",
                                 "push, one batch",     "push, one batch, overlap", "pull, one batch, overlap"};
constexpr int kRounds = 20;

// Streams HBM until *stop is set: reads and writes 1 GiB in passes (backward's memory pressure).
__global__ void busy_kernel(float4* a, size_t n, volatile int* stop) {
  for (int pass = 0; pass < 1000 && !*stop; ++pass)
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
      float4 v = a[i];
      v.x += 1.0f;
      a[i] = v;
    }
}

struct Gpu {
  char* buf = nullptr;  // [peer slot][S]: what a peer pulls from here, or where a push lands
  char* in = nullptr;   // [peer slot][S]: where pulls land
  std::vector<cudaStream_t> streams;
  float4* busy = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
  const bool busy = argc > 1 && std::strcmp(argv[1], "--busy") == 0;
  int n = 0;
  DEV_CHECK_CUDA(cudaGetDeviceCount(&n));
  if (n < 2) {
    std::fprintf(stderr, "ce_copy_variants: needs 2 or more GPUs, found %d\n", n);
    return 1;
  }
  const std::vector<size_t> sizes = {size_t(2) << 20, size_t(25) << 18, size_t(16) << 20, size_t(64) << 20};
  const size_t max_s = sizes.back();
  std::vector<Gpu> gpus(n);
  int* stop = nullptr;  // host-mapped: the busy kernels' end
  DEV_CHECK_CUDA(cudaHostAlloc(&stop, sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
  for (int g = 0; g < n; ++g) {
    DEV_CHECK_CUDA(cudaSetDevice(g));
    for (int p = 0; p < n; ++p) {
      if (p == g) continue;
      int ok = 0;
      DEV_CHECK_CUDA(cudaDeviceCanAccessPeer(&ok, g, p));
      if (!ok) {
        std::fprintf(stderr, "ce_copy_variants: GPU %d cannot access GPU %d\n", g, p);
        return 1;
      }
      DEV_CHECK_CUDA(cudaDeviceEnablePeerAccess(p, 0));
    }
    DEV_CHECK_CUDA(cudaMalloc(&gpus[g].buf, max_s * n));
    DEV_CHECK_CUDA(cudaMalloc(&gpus[g].in, max_s * n));
    DEV_CHECK_CUDA(cudaMemset(gpus[g].buf, g, max_s * n));
    gpus[g].streams.resize(n);
    for (auto& s : gpus[g].streams) DEV_CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    if (busy) DEV_CHECK_CUDA(cudaMalloc(&gpus[g].busy, size_t(1) << 30));
  }
  std::printf("%d GPUs%s; inbound GB/s per GPU, host µs to issue a GPU's round\n", n,
              busy ? ", each streaming HBM meanwhile" : "");
  std::printf("%-26s", "variant \\ bytes a peer");
  for (size_t s : sizes) std::printf(" %20zu", s);
  std::printf("\n");
  for (int v = 0; v < kVariants; ++v) {
    std::printf("v%d %-23s", v, kNames[v]);
    for (size_t s : sizes) {
      const bool pull = v == 0 || v == 1 || v == 5, batch = v == 1 || v == 3 || v == 4 || v == 5;
      const bool overlap = v == 4 || v == 5;
      std::atomic<int> arrived{0};
      std::vector<double> wall(n), issue(n);
      auto work = [&](int g) {
        DEV_CHECK_CUDA(cudaSetDevice(g));
        Gpu& me = gpus[g];
        if (busy) {
          *stop = 0;
          busy_kernel<<<264, 512, 0, me.streams[g]>>>(me.busy, (size_t(1) << 30) / sizeof(float4), stop);
          DEV_CHECK_CUDA(cudaGetLastError());
        }
        std::vector<void*> dsts, srcs;
        std::vector<size_t> lens;
        std::vector<int> peers;
        for (int p = 0; p < n; ++p) {
          if (p == g) continue;
          peers.push_back(p);
          // Pull: p's slot for me into my slot for p. Push: my slot for p into p's slot for me.
          dsts.push_back(pull ? me.in + size_t(p) * max_s : gpus[p].buf + size_t(g) * max_s);
          srcs.push_back(pull ? gpus[p].buf + size_t(g) * max_s : me.buf + size_t(p) * max_s);
          lens.push_back(s);
        }
        cudaMemcpyAttributes attr{};
        attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
        attr.flags = overlap ? cudaMemcpyFlagPreferOverlapWithCompute : cudaMemcpyFlagDefault;
        size_t attr_idx = 0;
        auto round = [&] {
          if (batch) {
            DEV_CHECK_CUDA(cudaMemcpyBatchAsync(dsts.data(), srcs.data(), lens.data(), dsts.size(), &attr, &attr_idx, 1,
                                                me.streams[peers[0]]));
          } else {
            for (size_t i = 0; i < peers.size(); ++i)
              DEV_CHECK_CUDA(
                  cudaMemcpyAsync(dsts[i], srcs[i], lens[i], cudaMemcpyDeviceToDevice, me.streams[peers[i]]));
          }
        };
        round();  // warm-up
        for (auto st : me.streams)
          if (st != me.streams[g]) DEV_CHECK_CUDA(cudaStreamSynchronize(st));
        ++arrived;
        while (arrived.load() < n) {
        }
        const auto t0 = std::chrono::steady_clock::now();
        double issuing = 0;
        for (int r = 0; r < kRounds; ++r) {
          const auto i0 = std::chrono::steady_clock::now();
          round();
          issuing += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - i0).count();
        }
        for (auto st : me.streams)
          if (st != me.streams[g]) DEV_CHECK_CUDA(cudaStreamSynchronize(st));
        wall[g] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        issue[g] = issuing / kRounds;
      };
      std::vector<std::thread> threads;
      for (int g = 0; g < n; ++g) threads.emplace_back(work, g);
      for (auto& t : threads) t.join();
      if (busy) {
        *stop = 1;
        for (int g = 0; g < n; ++g) {
          DEV_CHECK_CUDA(cudaSetDevice(g));
          DEV_CHECK_CUDA(cudaDeviceSynchronize());
        }
      }
      double rate = 0, host = 0;
      for (int g = 0; g < n; ++g) {
        rate += double(n - 1) * double(s) * kRounds / wall[g] / 1e9 / n;
        host += issue[g] / n;
      }
      std::printf(" %11.1f (%5.1f us)", rate, host);
      std::fflush(stdout);
    }
    std::printf("\n");
  }
  return 0;
}
