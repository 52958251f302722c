#pragma once
// ZeRO stage 1's optimizer: each rank keeps optimizer state for and updates only its chunks of
// the trainable parameters (parallel::Zero1Layout), then every bucket's chunks are all-gathered —
// left in flight for the next forward to wait on (prefetch), or waited for at the end of step().
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "optim/rank_sharded_optimizer.h"
#include "parallel/communicator.h"
#include "parallel/zero1.h"

namespace pt {

// The gradient side is parallel::Zero1Sync on the same layout: it leaves this rank's chunks
// averaged; step() updates the matching parameters (the wrapped AdamW/SGD over those ranges),
// then one all-gather per bucket (and a broadcast of the tail) gives every rank all parameters.
// Gathers run in place when the trainable parameters are one contiguous run of the parameter
// buffer (any model without frozen parameters in between); otherwise through a packed copy,
// waited for at the end of step().
// Prefetch (in place only): step() leaves the gathers in flight, ascending through the buffer,
// which is the order the next forward reads parameters in; as the store's ParamReadListener this
// optimizer waits for a bucket's gather (stream-ordered on the GPU: no host block) and refreshes
// its bf16 mirror when a module first announces one of its parameters, or for all of them when
// the whole buffer is read. The next step() waits for any left (parameters the forward never
// read). Between steps only the compute stream may be synchronised with: waiting for the
// communicator too would move the gathers' cost out of the step that pays it.
// With a bf16 mirror (in place only) the gathers move the mirror, 2 bytes a parameter instead of
// 4: the update writes the mirror of this rank's chunks, and nothing re-casts after a gather.
// The fp32 master outside this rank's chunks is then stale. What reads it is served apart: the parameters some
// module reads in fp32 (ParamRead::Master: the norm weights, a few thousand elements a layer)
// get one small all-reduce per step before the gathers, and a whole-buffer read (a checkpoint,
// a host copy) first all-gathers the fp32 master once.
class Zero1Optimizer : public RankShardedOptimizer, public ParamReadListener {
 public:
  Zero1Optimizer(const OptimizerConfig& cfg, Context& ctx, parallel::Communicator& comm, ParamStore& store,
                 std::shared_ptr<const parallel::Zero1Layout> layout, bool prefetch = true);
  ~Zero1Optimizer() override;
  void step(Context& ctx, float lr) override;
  // The layout already covers every trainable parameter: adding ranges is an error.
  void add_ranges(const std::vector<FlatRange>& ranges) override;
  // Every trainable parameter once per step: 2 bytes each when the mirror is gathered, else 4.
  int64_t parameter_bytes_communicated() const override;
  const parallel::Zero1Layout& layout() const { return *layout_; }
  // Whether step() leaves its gathers for the next forward (prefetch, in place).
  bool prefetches() const { return prefetch_; }
  // Whether step() gathers the bf16 mirror (2 bytes a parameter) rather than the fp32 master.
  bool gathers_mirror() const { return gather_mirror_; }
  // Parameter gathers started by step() and not yet waited for.
  bool parameters_in_flight() const override { return next_ < gathers_.size(); }

  void before_read(const Parameter& p) override;
  void before_read_all() override;

 private:
  // One collective returning trainable elements [lo, hi) (gradient order) to every rank.
  struct Gather {
    parallel::WorkPtr work;
    int64_t lo, hi;
  };
  void start_gathers_in_place();
  void gather_packed(Context& ctx);
  // Waits, in order, for every gather in flight that starts below `end`, refreshing the bf16
  // mirror of what each delivered.
  void wait_gathers_below(int64_t end);
  // This rank's chunks of `buf` (numel elements in gradient order) to everyone.
  std::vector<Gather> all_gather_chunks(Tensor& buf);
  // bf16-mirror gathers: the fp32 parameters read as Master to every rank; the whole fp32
  // master (before a whole-buffer read).
  void share_master_read_params(Context& ctx);
  void gather_master(Context& ctx);

  ParamStore& store_;
  std::shared_ptr<const parallel::Zero1Layout> layout_;
  int64_t param_shift_ = -1;  // offset − grad_offset when equal for all trainable params, else −1
  bool prefetch_ = false;
  std::vector<Gather> gathers_;             // this step's, ascending
  size_t next_ = 0;                         // gathers_[next_ …] are still in flight
  Tensor packed_;                           // (numel) fp32 staging for the packed gather
  parallel::RegistrationPtr registration_;  // the parameter buffer's (in-place gathers only)
  // bf16-mirror gathers (in place with a mirror). master_read_: ranges (gradient order) of the
  // parameters read as Master, packed into master_packed_ (fp32) for their all-reduce.
  bool gather_mirror_ = false;
  bool master_stale_ = false;  // fp32 outside this rank's chunks is older than the mirror
  std::vector<std::pair<int64_t, int64_t>> master_read_;
  Tensor master_packed_;
  parallel::RegistrationPtr lowp_registration_;
};

}  // namespace pt
