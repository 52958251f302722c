#pragma once
// CPU reference implementations behind the public ops (arguments already validated by the
// public function): plain loops templated on float and double, accumulating in the storage
// type; GEMM through CBLAS. Only ops/*.cpp include this.
#include "core/gemm_desc.h"
#include "core/tensor.h"
#include "ops/loss.h"
#include "ops/optim_kernels.h"

namespace pt::ops::cpu {

void matmul(const GemmDesc& g);

void cast(Tensor& dst, const Tensor& src, float scale);
void add(Tensor& out, const Tensor& a, const Tensor& b);
void add_inplace(Tensor& x, const Tensor& y, float alpha);
void scale_inplace(Tensor& x, float alpha);
void add_bias(Tensor& y, const Tensor& bias);
void bias_backward(Tensor& dbias, const Tensor& dy);
void relu_forward(Tensor& y, const Tensor& x);
void relu_backward(Tensor& dx, const Tensor& dy, const Tensor& y);
// amax (optional, host fp32): max |output| as stored, one per output (g; dh1 then dh3).
void swiglu_forward(Tensor& g, const Tensor& h1, const Tensor& h3, float* g_amax);
void swiglu_backward(Tensor& dh1, Tensor& dh3, const Tensor& dg, const Tensor& h1, const Tensor& h3, Tensor* g,
                     float* dh_amax);

void embedding_forward(Tensor& out, const Tensor& ids, const Tensor& weight);
void embedding_backward(Tensor& dweight, const Tensor& dout, const Tensor& ids);

// amax (host, optional): max |y| (rmsnorm_backward: |dx|) as stored, NaN skipped.
void rmsnorm_forward(Tensor& y, Tensor& rstd, const Tensor& x, const Tensor& w, float eps, float* amax);
void rmsnorm_apply(Tensor& y, const Tensor& x, const Tensor& w, const Tensor& rstd);
void rmsnorm_backward(Tensor& dx, Tensor& dw, const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd,
                      bool accumulate, bool dw_accumulate, float* amax);

void rope(Tensor& out, const Tensor& in, double theta, bool inverse);
void rope_table(Tensor& table, double theta);  // (positions, D/2, 2) fp32: (cos, sin), fp64 angles

void softmax_forward(Tensor& probs, const Tensor& scores, double scale, bool causal);
void softmax_backward(Tensor& dscores, const Tensor& dprobs, const Tensor& probs, double scale);

void cross_entropy(Tensor& loss, Tensor* dlogits, const Tensor& logits, const Tensor& targets, float grad_scale = 1.0f);
void mse_loss(Tensor& loss, Tensor* dpred, const Tensor& pred, const Tensor& target, Reduction reduction);

void adamw_step(Tensor& p, const Tensor& g, Tensor& m, Tensor& v, const AdamWHyper& h, Tensor* p_lowp,
                const GradClip& clip);
void sgd_step(Tensor& p, const Tensor& g, float lr, float weight_decay, Tensor* p_lowp, const GradClip& clip);
void squared_norm_accumulate(Tensor& sumsq, const Tensor& x);
void clip_by_norm(Tensor& x, const Tensor& sumsq, float max_norm);

}  // namespace pt::ops::cpu
