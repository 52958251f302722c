#include "ops/embedding.h"

#include <algorithm>

#include "core/profiler.h"
#include "cuda/embedding.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/op_common.h"

namespace pt::ops {

using detail::ArgCheck;

namespace {
void check_ids(const ArgCheck& chk, const Context& ctx, const Tensor& ids, int64_t vocab) {
  chk.dtype_is(ids, "ids", {DType::I32});
  chk.rank_is(ids, "ids", 1);
  chk.contiguous(ids, "ids");
  if (ctx.is_cuda()) return;  // the GPU cannot check without a host sync (see the header)
  const int32_t* id = ids.data_as<const int32_t>();
  for (int64_t i = 0; i < ids.numel(); ++i)
    chk.require(id[i] >= 0 && id[i] < vocab, "token id " + std::to_string(id[i]) + " at position " + std::to_string(i) +
                                                 " is outside [0, " + std::to_string(vocab) + ")");
}
}  // namespace

void embedding_forward(Context& ctx, Tensor& out, const Tensor& ids, const Tensor& weight) {
  ArgCheck chk(ctx, "embedding_forward");
  chk.float_storage(weight, "weight");
  chk.matrix(weight, "weight");
  chk.float_storage(out, "out");
  chk.contiguous(out, "out");
  chk.same_dtype(out, "out", weight, "weight");
  chk.rank_is(ids, "ids", 1);
  chk.shape_is(out, "out", {ids.size(0), weight.size(1)});
  check_ids(chk, ctx, ids, weight.size(0));
  // Read the ids and one weight row per id (the gathered rows), write out.
  OpCost cost;
  cost.read(ids).write(out);
  cost.bytes += static_cast<double>(ids.numel() * weight.size(1)) * static_cast<double>(dtype_size(weight.dtype()));
  OpScope scope(ctx, "embedding_forward", OpFamily::Elementwise, cost);
  PT_OP_DISPATCH(ctx, embedding_forward, out, ids, weight);
}

void embedding_backward(Context& ctx, Tensor& dweight, const Tensor& dout, const Tensor& ids) {
  ArgCheck chk(ctx, "embedding_backward");
  if (ctx.is_cuda())
    chk.dtype_is(dweight, "dweight", {DType::F32, DType::BF16});  // each id's rows are summed in fp32
  else
    chk.float_storage(dweight, "dweight");
  chk.matrix(dweight, "dweight");
  chk.float_storage(dout, "dout");
  chk.contiguous(dout, "dout");
  if (!ctx.is_cuda()) chk.same_dtype(dout, "dout", dweight, "dweight");
  chk.rank_is(ids, "ids", 1);
  chk.shape_is(dout, "dout", {ids.size(0), dweight.size(1)});
  check_ids(chk, ctx, ids, dweight.size(0));
  // Read dout and the ids; the kernels scatter-add each row of dout into its token's row of
  // dweight (on the GPU after sorting the rows by id) and touch no other row, so the rows
  // updated — read and written — are the distinct ids. Counting those needs the ids on the host
  // (a synchronisation on the GPU), so every token's row counts, at most V of them: min(N, V)
  // rows, an upper bound of the minimum that equals it when no id repeats. The GPU's sort moves
  // a few int32 words per row, small beside a row of dout, and is not counted.
  OpCost cost;
  cost.read(dout).read(ids);
  cost.bytes += 2.0 * static_cast<double>(std::min(ids.numel(), dweight.size(0)) * dweight.size(1)) *
                static_cast<double>(dtype_size(dweight.dtype()));
  OpScope scope(ctx, "embedding_backward", OpFamily::Elementwise, cost);
  PT_OP_DISPATCH(ctx, embedding_backward, dweight, dout, ids);
}

}  // namespace pt::ops
