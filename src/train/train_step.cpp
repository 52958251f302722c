#include "train/train_step.h"

#include "core/allocator.h"
#include "core/error.h"
#include "core/profiler.h"
#include "ops/elementwise.h"
#include "optim/deferred_update.h"

namespace pt {

TrainStep::TrainStep(TransformerLM& model, Optimizer& optimizer, parallel::GradSync& sync, float max_grad_norm)
    : model_(model), optimizer_(optimizer), sync_(sync), max_grad_norm_(max_grad_norm) {
  model_.store().add_listener(&sync_);  // a sync with collectives has already added itself
}

TrainStep::~TrainStep() {
  model_.store().remove_listener(&sync_);
  // Destructors must not throw: free what there is, report nothing.
  if (exec_) cudaGraphExecDestroy(exec_);
  if (graph_handle_) cudaGraphDestroy(graph_handle_);
}

void TrainStep::enable_cuda_graph(Context& ctx, int warmup) {
  PT_CHECK(ctx.is_cuda(), "--cuda-graph on needs a GPU");
  PT_CHECK(warmup >= 1, "a CUDA graph needs at least one uncaptured step first (GEMM autotuning)");
  PT_CHECK(std::string(sync_.name()) == "none",
           "--cuda-graph on cannot capture data parallelism yet (collectives with host-side waits and timeouts): "
           "run one process, or --cuda-graph off");
  PT_CHECK(dynamic_cast<DeferredUpdateOptimizer*>(&optimizer_) == nullptr,
           "--cuda-graph on cannot capture an update deferred to the next step (--update-overlap): use "
           "--update-overlap off");
  optimizer_.use_device_scalars(ctx);
  graph_ = true;
  graph_warmup_ = warmup;
  pool_ = TrackingAllocator::instance().new_pool();
}

StepOutputs TrainStep::run(Context& ctx, const Tensor& ids, const Tensor& targets, float lr, int micro_batches) {
  if (graph_) return run_graph(ctx, ids, targets, lr, micro_batches);
  return run_uncaptured(ctx, ids, targets, lr, micro_batches);
}

StepOutputs TrainStep::run_graph(Context& ctx, const Tensor& ids, const Tensor& targets, float lr, int micro_batches) {
  PT_CHECK(ctx.timer() == nullptr, "--cuda-graph on cannot be timed per kernel (a kernel timer is attached)");
  // Every buffer of the step from the graph's pool, the warm-up steps' too: the capture then
  // finds them cached and the graph keeps them.
  const TrackingAllocator::PoolScope pool(pool_);
  if (graph_runs_ < graph_warmup_) {
    ++graph_runs_;
    return run_uncaptured(ctx, ids, targets, lr, micro_batches);
  }
  if (!exec_) {
    graph_micro_batches_ = micro_batches;
    static_ids_ = Tensor::empty(ids.shape(), ids.dtype(), ids.device(), "graph_ids");
    static_targets_ = Tensor::empty(targets.shape(), targets.dtype(), targets.device(), "graph_targets");
  }
  PT_CHECK(micro_batches == graph_micro_batches_ && ids.shape() == static_ids_.shape() &&
               targets.shape() == static_targets_.shape(),
           "a captured step replays fixed shapes: the batch and --grad-accum cannot change");
  static_ids_.copy_from(ids, ctx);
  static_targets_.copy_from(targets, ctx);
  optimizer_.stage_step(ctx, lr);  // this step's learning rate and bias corrections, uncaptured
  if (!exec_) {
    // Relaxed: the step may make calls that are not stream work (kernel attributes, a
    // cudaMalloc for a size the warm-up did not see); its stream work is what is captured.
    PT_CUDA_CHECK(cudaStreamBeginCapture(ctx.stream(), cudaStreamCaptureModeRelaxed));
    try {
      captured_ = run_uncaptured(ctx, static_ids_, static_targets_, lr, micro_batches);
    } catch (...) {
      cudaGraph_t broken = nullptr;
      cudaStreamEndCapture(ctx.stream(), &broken);
      if (broken) cudaGraphDestroy(broken);
      throw;
    }
    PT_CUDA_CHECK(cudaStreamEndCapture(ctx.stream(), &graph_handle_));
    PT_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_handle_, 0));
    // The capture counted the step on the host (Optimizer::step); the launch runs it.
    PT_CUDA_CHECK(cudaGraphLaunch(exec_, ctx.stream()));
    return captured_;
  }
  PT_CUDA_CHECK(cudaGraphLaunch(exec_, ctx.stream()));
  optimizer_.finish_replayed_step();
  return captured_;
}

StepOutputs TrainStep::run_uncaptured(Context& ctx, const Tensor& ids, const Tensor& targets, float lr,
                                      int micro_batches) {
  const int64_t rows = ids.size(0);
  PT_CHECK(micro_batches >= 1 && rows % micro_batches == 0, "TrainStep: " + std::to_string(rows) +
                                                                " rows do not split into " +
                                                                std::to_string(micro_batches) + " micro-batches");
  StepOutputs out;
  if (!norm_overlap_decided_) {
    if (!sync_.changes_gradients()) optimizer_.overlap_norm_with_backward(ctx, model_.store());
    norm_overlap_decided_ = true;
  }
  model_.store().zero_grad(ctx, micro_batches);
  sync_.begin_step(ctx);
  const int64_t micro_rows = rows / micro_batches;
  for (int i = 0; i < micro_batches; ++i) {
    NvtxRange r(micro_batches > 1 ? "micro-batch" : "batch");
    const Tensor mi = ids.narrow(0, i * micro_rows, micro_rows), mt = targets.narrow(0, i * micro_rows, micro_rows);
    Tensor loss = model_.forward(ctx, mi, mt, /*save_for_backward=*/true, 1.0f / static_cast<float>(micro_batches));
    model_.backward(ctx);
    if (i == 0)
      out.loss = loss;
    else
      ops::add_inplace(ctx, out.loss, loss, 1.0f);
  }
  if (micro_batches > 1) ops::scale_inplace(ctx, out.loss, 1.0f / static_cast<float>(micro_batches));
  {
    NvtxRange r("gradient sync");
    sync_.finish(ctx);
  }
  NvtxRange r("optimizer step");
  out.grad_sumsq = optimizer_.clip_grad_norm(ctx, max_grad_norm_);
  optimizer_.step(ctx, lr);
  return out;
}

}  // namespace pt
