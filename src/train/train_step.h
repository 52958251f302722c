#pragma once
// One optimisation step of the LM, shared by `paratrain train` and the benchmarks:
// zero_grad → (forward → backward) per micro-batch (gradient sync listening) → sync finish →
// clip → update.
#include <cuda_runtime_api.h>

#include "core/context.h"
#include "core/tensor.h"
#include "model/transformer.h"
#include "optim/optimizer.h"
#include "parallel/grad_sync.h"

namespace pt {

struct StepOutputs {
  Tensor loss;        // (1) fp32 on the device: this rank's mean loss
  Tensor grad_sumsq;  // (1) fp32 on the device: squared global gradient norm before clipping
};

class TrainStep {
 public:
  // max_grad_norm <= 0 disables clipping (the norm is still measured).
  TrainStep(TransformerLM& model, Optimizer& optimizer, parallel::GradSync& sync, float max_grad_norm);
  ~TrainStep();

  // CUDA graphs (--cuda-graph on): run() runs `warmup` steps as usual (GEMM autotuning, lazily
  // made buffers), captures the next one into a graph and from then on replays it: the whole
  // step — forward, backward, clip, optimizer — in one launch. Inputs are copied into the
  // graph's own buffers, the optimizer's learning rate and step count reach it through device
  // memory (Optimizer::stage_step), every buffer of the step comes from the graph's private
  // memory pool, and run() returns the same output tensors each time (read them before the next
  // run). The results are bit for bit those of the uncaptured step. It cannot capture yet, and
  // refuses: data parallelism (collectives, their host-side waits and bounded timeouts), ZeRO-1
  // and the broadcast-sharded optimizer, the CPU, and a kernel timer (bench model --breakdown).
  void enable_cuda_graph(Context& ctx, int warmup = 2);
  bool graph_captured() const { return exec_ != nullptr; }
  // ids, targets (B_local, T) int32 on the model's device. No host synchronisation.
  // micro_batches M > 1 (gradient accumulation, --grad-accum): the rows are M micro-batches of
  // B_local / M, run one after another into the same gradients, each loss gradient scaled by
  // 1/M, so the update is that of one batch of B_local rows; the gradients are final — and
  // synchronised over ranks — only in the last micro-batch's backward (no_sync before). The loss
  // is the mean of the micro-batches' means.
  StepOutputs run(Context& ctx, const Tensor& ids, const Tensor& targets, float lr, int micro_batches = 1);

 private:
  StepOutputs run_uncaptured(Context& ctx, const Tensor& ids, const Tensor& targets, float lr, int micro_batches);
  StepOutputs run_graph(Context& ctx, const Tensor& ids, const Tensor& targets, float lr, int micro_batches);

  TransformerLM& model_;
  Optimizer& optimizer_;
  parallel::GradSync& sync_;
  float max_grad_norm_;
  bool norm_overlap_decided_ = false;  // the first run() asks the optimizer to sum the norm during backward
  // CUDA graph state (enable_cuda_graph).
  bool graph_ = false;
  int graph_warmup_ = 0, graph_runs_ = 0, graph_micro_batches_ = 0;
  int pool_ = 0;                        // TrackingAllocator pool of the graph's buffers
  Tensor static_ids_, static_targets_;  // the graph's inputs
  StepOutputs captured_;                // the graph's outputs
  cudaGraph_t graph_handle_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace pt
