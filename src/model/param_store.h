#pragma once
// ParamStore: one flat buffer of parameters, one of gradients (trainable parameters only),
// and an optional bf16 mirror (whose bytes hold the FP8 casts of FP8 weights instead, where it
// keeps them); each Parameter is a named view in registration order, and the store tells a
// listener the moment a parameter's gradient is final.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/context.h"
#include "core/optim_params.h"
#include "core/tensor.h"
#include "ops/fp8_gemm.h"

namespace pt {

class ParamStore;

// How a module's backward puts its gradient contribution into the flat gradient buffer.
enum class GradWrite : uint8_t {
  Add,        // only adds into it (a scatter-add, an accumulating kernel): zero_grad zeroes it
  Overwrite,  // writes or adds, as ParamStore::grad_beta says (a GEMM with beta 0 or 1)
};

// Which copy of a parameter a module reads under mixed precision.
enum class ParamRead : uint8_t {
  Operand,  // the copy in the operand dtype: the bf16 mirror when there is one (GEMMs, lookups)
  Master,   // the fp32 values even in bf16 runs (RMSNorm's weight)
};

struct Parameter {
  std::string name;  // PyTorch state_dict name, e.g. "layers.0.attn.q_proj.weight"
  Shape shape;       // PyTorch's shape, row-major
  int64_t numel = 0;
  int64_t offset = 0;        // element offset in the flat parameter buffer
  int64_t grad_offset = -1;  // element offset in the flat gradient buffer; -1 when frozen
  bool trainable = true;
  int index = 0;              // registration order
  int uses = 0;               // how many module call sites read it per forward (tied: 2)
  int adding_uses = 0;        // of those, how many can only add into the gradient (GradWrite::Add)
  bool reads_master = false;  // some use reads the fp32 values even when a bf16 mirror exists
  int fp8_run = -1;           // the FP8 weight run it belongs to (ParamStore::add_fp8_weight), or -1

  Tensor data() const;  // view into the flat parameter buffer (fp32; fp64 in CPU tests)
  Tensor grad() const;  // view into the flat gradient buffer (undefined if frozen): fp32|bf16|fp64
  // bf16 view into the mirror (undefined unless the mirror exists); an error for an FP8 weight
  // whose mirror bytes hold its casts (ParamStore::fp8_weight)
  Tensor data_lowp() const;
  ParamStore& store() const { return *store_; }

 private:
  friend class ParamStore;
  ParamStore* store_ = nullptr;
  int contributions_ = 0;  // gradient contributions seen since zero_grad (all micro-batches)
};

// Told when a parameter's gradient is final for this backward pass: the C++ form of
// PyTorch's post-accumulate-grad hook. Data-parallel strategies implement it.
class GradReadyListener {
 public:
  virtual ~GradReadyListener() = default;
  virtual void on_grad_ready(Parameter& p) = 0;
};

// Told before parameter values are read: by a module's forward, for each parameter it is about
// to read, and by the store before anything reads or writes the whole buffer (host copies,
// checkpoints, loads, the bf16 refresh). The mirror image of GradReadyListener, for schemes that
// deliver updated parameters asynchronously — ZeRO-1 with its all-gathers overlapped with the
// next forward, and the deferred update running under it (optim/deferred_update.h). Waiting in
// it is stream-ordered on the GPU (no host block).
class ParamReadListener {
 public:
  virtual ~ParamReadListener() = default;
  virtual void before_read(const Parameter& p) = 0;
  virtual void before_read_all() = 0;
  // Before zero_grad overwrites p's gradient: a scheme still reading the last step's gradients
  // (the deferred update) waits until it has read them.
  virtual void before_grad_write(const Parameter& p) {}
};

class ParamStore {
 public:
  ParamStore() = default;
  ParamStore(const ParamStore&) = delete;
  ParamStore& operator=(const ParamStore&) = delete;

  // Registration (before finalize). Returns a stable reference.
  Parameter& add(const std::string& name, const Shape& shape, bool trainable = true);
  // A module that reads `p` in its forward calls this once at construction; a tied weight
  // is read by two modules and so has uses == 2 (its gradient is final after the second).
  // `write` says whether that module's backward can write its contribution instead of adding
  // it: a parameter all of whose uses can is not zeroed by zero_grad (see grad_beta).
  // `read` says which copy it reads: a scheme that refreshes only the mirror (ZeRO-1's bf16
  // gather) must still deliver fp32 values of the parameters some module reads as Master.
  void add_use(Parameter& p, GradWrite write = GradWrite::Add, ParamRead read = ParamRead::Operand) {
    ++p.uses;
    if (write == GradWrite::Add) ++p.adding_uses;
    if (read == ParamRead::Master) p.reads_master = true;
  }

  // Allocates the flat buffers on ctx's device (parameters and gradients zeroed). With
  // lowp_mirror a bf16 copy of every parameter is kept for mixed-precision GEMMs. dtype is
  // fp32 for training; fp64 (CPU only) lets tests check whole-model gradients by finite
  // differences. Gradients are fp32 parameters' ctx.grad_dtype() (fp32 or bf16), else dtype.
  void finalize(Context& ctx, bool lowp_mirror, DType dtype = DType::F32);
  DType dtype() const { return dtype_; }
  bool finalized() const { return finalized_; }
  Device device() const { return device_; }

  const std::vector<std::unique_ptr<Parameter>>& params() const { return params_; }
  Parameter& operator[](size_t i) const { return *params_.at(i); }
  size_t size() const { return params_.size(); }
  Parameter* find(const std::string& name) const;  // nullptr if absent; constant time

  int64_t numel() const { return numel_; }             // all parameters
  int64_t grad_numel() const { return grad_numel_; }   // trainable parameters
  Tensor flat_params() const { return flat_params_; }  // (numel) dtype()
  Tensor flat_grads() const { return flat_grads_; }    // (grad_numel) dtype(), or bf16 (Context::grad_dtype)
  Tensor flat_lowp() const { return flat_lowp_; }      // (numel) bf16 or undefined
  bool has_lowp() const { return flat_lowp_.defined(); }

  // Start of a step: zero the gradients and reset readiness counts. With gradient accumulation
  // the step runs `micro_batches` forward/backward passes that add into the same gradients, and a
  // parameter's gradient is final (its listeners are told) only in the last of them — PyTorch
  // DDP's no_sync, for every listener at once.
  // Only the gradients that some use adds into are zeroed (one fill per run of adjacent ones);
  // the others are written by their step's first contribution (grad_beta), so the weight-gradient
  // GEMMs do not read C (docs/reports/2026-11-25_grad-first-write_h100.md).
  void zero_grad(Context& ctx, int micro_batches = 1);
  // The beta for p's next gradient contribution, grad = beta·grad + contribution: 0 when it is
  // the step's first and zero_grad left p's gradient as it was (every use GradWrite::Overwrite),
  // else 1. Call before the contribution (grad_contributed counts it).
  float grad_beta(const Parameter& p) const;
  // The same for one GEMM that writes several parameters' gradients at once (stacked or batched
  // weights): theirs, which must agree (a clear error if one was also used elsewhere first).
  float grad_beta(const std::vector<Parameter*>& ps) const;
  // Whether zero_grad zeroes p's gradient (a trainable parameter some use adds into, or none reads).
  static bool zeroed_by_zero_grad(const Parameter& p) { return p.trainable && (p.adding_uses > 0 || p.uses == 0); }
  // Whether p's values stay as they are until its gradient is final: from zero_grad until the
  // step's last contribution to it (the update comes after that). Copies derived from the values
  // (the FP8 casts of a weight) may be kept that long. zero_grad calls so far: steps().
  bool values_fixed(const Parameter& p) const {
    return steps_ > 0 && p.trainable && p.contributions_ < p.uses * micro_batches_;
  }
  uint64_t steps() const { return steps_; }
  // Refresh the bf16 mirror from the fp32 parameters (after the optimizer or a load), and the
  // kept FP8 weights' casts.
  void refresh_lowp(Context& ctx);

  // FP8 weights. A Linear whose GEMMs run in FP8 registers the weight run they read (one
  // parameter, or stacked ones, adjacent; before finalize). Under --precision fp8 with
  // Context::fp8_reuse, with the mirror, finalize keeps each run's E4M3 casts in the mirror's
  // bytes of the run instead of its bf16 copy — the layout as stored in the first half, the
  // transposed one (dX's) in the second: made from the fp32 values whenever they change
  // (refresh_lowp, and the optimizer's update: cast_fp8_weights), read as they are by every
  // micro-batch of the step, and two bytes a weight, which the bf16 copy took. A run whose bytes
  // are not 16-byte aligned (FP8 GEMM operands must be) keeps its bf16 copy, and its layer casts
  // at each use as without keeping.
  void add_fp8_weight(const std::vector<Parameter*>& run);
  // The kept casts of the run `first` begins, or null (not kept: cast from the mirror at use).
  const ops::Fp8Operand* fp8_weight(const Parameter& first) const;
  bool keeps_fp8_weights() const { return keeps_fp8_; }
  bool keeps_fp8_run(int run) const;
  // Gives every run its bf16 copy back (a sharded optimizer refreshes the mirror itself, from
  // gathered values).
  void drop_fp8_weights(Context& ctx);
  // The kept runs an update of parameter elements [begin, end) meets, for a fused update to
  // measure their amax instead of writing their bf16 copies (Fp8WeightRuns; count 0 when none).
  Fp8WeightRuns fp8_update_runs(int64_t begin, int64_t end) const;
  // After an update of parameter elements [begin, end) that wrote their bf16 copies: remakes the
  // casts of the kept runs that end in that range, from their fp32 values (ops::fp8_cast_weight),
  // on `stream`. The copy just written into a run's bytes is only overwritten: a run's readers
  // wait for the range that ends it (the deferred update's chunks), and an update of ranges in
  // order finishes every run. amax_measured: the update measured each run's amax (it took
  // fp8_update_runs of every range), so no amax pass. const: it rewrites the casts' bytes only.
  void cast_fp8_weights(Context& ctx, int64_t begin, int64_t end, cudaStream_t stream = nullptr,
                        bool amax_measured = false) const;

  // Gradient-ready listeners (a data-parallel sync, the benchmarks' timeline, tests): every one
  // is told once per parameter per backward, the last added first (a timeline added around a
  // sync stamps the moment before the sync starts its collective). Adding one twice, or
  // removing one that is not there, has no effect.
  void add_listener(GradReadyListener* l);
  void remove_listener(GradReadyListener* l);
  const std::vector<GradReadyListener*>& listeners() const { return listeners_; }
  void set_read_listener(ParamReadListener* l) { read_listener_ = l; }
  ParamReadListener* read_listener() const { return read_listener_; }
  // A module's forward calls this for each parameter before it reads its values (fp32 or bf16).
  void about_to_read(const Parameter& p) const {
    if (read_listener_) read_listener_->before_read(p);
  }
  // Before the whole buffer is read or written outside a forward; the store's own host copies,
  // loads and refresh_lowp call it.
  void about_to_read_all() const {
    if (read_listener_) read_listener_->before_read_all();
  }
  // A module calls this after it has added its contribution to p.grad(); the listener
  // fires when all `uses` contributions of a trainable parameter are in.
  void grad_contributed(Parameter& p);
  int micro_batches() const { return micro_batches_; }

  // Host copies of the whole parameter vector (checkpoints, tests, broadcast checks),
  // converted from/to the store's dtype.
  std::vector<float> params_to_host(Context& ctx) const;
  void params_from_host(Context& ctx, const std::vector<float>& values);
  std::vector<double> params_to_host_f64(Context& ctx) const;
  // The first parameter (registration order) whose gradient (grads = true) or value holds a
  // NaN or an infinity, with the first such element's value; nullptr when all are finite.
  // Copies the buffer to the host: for error reports, not the hot path.
  struct NonFinite {
    const Parameter* param = nullptr;
    double value = 0;
  };
  NonFinite first_nonfinite(Context& ctx, bool grads) const;
  void params_from_host_f64(Context& ctx, const std::vector<double>& values);

 private:
  int micro_batches_ = 1;  // of the current step (zero_grad)
  uint64_t steps_ = 0;     // zero_grad calls
  std::vector<std::unique_ptr<Parameter>> params_;
  std::unordered_map<std::string, Parameter*> by_name_;  // building a model of L layers is O(L)
  bool finalized_ = false;
  Device device_;
  DType dtype_ = DType::F32;
  int64_t numel_ = 0;
  int64_t grad_numel_ = 0;
  Tensor flat_params_, flat_grads_, flat_lowp_;
  struct Fp8Run {
    int64_t offset = 0, rows = 0, cols = 0;  // the run's elements [offset, offset + rows·cols), (rows, cols)
    ops::Fp8Operand casts;                   // stored and transposed in the mirror's bytes; undefined: not kept
  };
  std::vector<Fp8Run> fp8_runs_;
  // fp32, one scalar every ops::kFp8ScalarStride: the runs' amax in run order (a range's in one
  // fill), then their scale_inv.
  Tensor fp8_scalars_;
  Tensor fp8_run_bounds_;  // int64 (2 · runs) on the device: Fp8WeightRuns::bounds, empty for a run not kept
  bool keeps_fp8_ = false;
  bool keep_fp8_run(size_t i);  // finalize: whether run i can be kept, and its views if so
  // The runs that end in (begin, end], by index: [first, second) (runs are in offset order).
  std::pair<size_t, size_t> fp8_runs_ending_in(int64_t begin, int64_t end) const;
  std::vector<GradReadyListener*> listeners_;
  ParamReadListener* read_listener_ = nullptr;
};

}  // namespace pt
