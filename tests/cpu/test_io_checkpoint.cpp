// Checkpoints: save → load round trip (weights, optimizer state, step, sampler state), the
// on-disk layout read with the plain C API, a file in h5py's state_dict layout, and errors.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>

#include "common/test_util.h"
#include "core/error.h"
#include "cpu/test_io_h5.h"
#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "optim/optimizer.h"

namespace pt::io {
namespace {

namespace fs = std::filesystem;
using namespace pt::test::h5read;

// A small store with PyTorch-style names (dots, matrices and vectors).
struct TinyModel {
  ParamStore store;
  explicit TinyModel(Context& ctx) {
    store.add("token_embeddings.weight", {10, 4});
    store.add("layers.0.ln1.weight", {4});
    store.add("layers.0.attn.q_proj.weight", {6, 4});
    store.add("lm_head.weight", {10, 4});
    store.finalize(ctx, false);
  }
  void fill(Context& ctx, uint64_t seed) {
    const auto v = test::randn(store.numel(), seed);
    store.params_from_host(ctx, std::vector<float>(v.begin(), v.end()));
  }
};

// Two fp32 state tensors over the gradient buffer, as AdamW has: enough to test checkpoints
// without the optimizer implementation.
class FakeAdam : public Optimizer {
 public:
  FakeAdam(Context& ctx, int64_t n) : Optimizer(OptimizerConfig{}, ctx) {
    m_ = Tensor::zeros({n}, DType::F32, ctx, "exp_avg");
    v_ = Tensor::zeros({n}, DType::F32, ctx, "exp_avg_sq");
  }
  void step(Context&, float) override {}
  void add_ranges(const std::vector<FlatRange>&) override {}
  std::vector<std::pair<std::string, Tensor>> state() override { return {{"exp_avg", m_}, {"exp_avg_sq", v_}}; }
  int64_t state_bytes() const override { return static_cast<int64_t>(m_.nbytes() + v_.nbytes()); }
  Tensor m_, v_;
};

// Random values; squared when `squares` (a second moment is never negative, and a load checks it).
void set_values(Tensor& t, uint64_t seed, bool squares = false) {
  const auto v = test::randn(t.numel(), seed);
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = static_cast<float>(squares ? v[i] * v[i] : v[i]);
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<float> values(const Tensor& t) {
  return std::vector<float>(t.data_as<float>(), t.data_as<float>() + t.numel());
}

using test::error_of;

TEST(IoCheckpoint, SaveThenLoadRestoresEverything) {
  Context ctx(Device::cpu());
  const std::string dir = test::scratch_dir("ckpt_roundtrip");
  const std::string path = dir + "/ckpt.h5";
  TinyModel a(ctx);
  a.fill(ctx, 1);
  FakeAdam opt_a(ctx, a.store.grad_numel());
  set_values(opt_a.m_, 2);
  set_values(opt_a.v_, 3, /*squares=*/true);
  opt_a.set_steps_taken(17);
  CheckpointInfo info;
  info.step = 17;
  info.text["model.size"] = "tiny";
  info.ints["model.d_model"] = 4;
  info.reals["model.rope_theta"] = 10000.0;
  SamplerConfig sc;
  sc.sampling = Sampling::Sequential;
  sc.seed = 0xfedcba9876543210ull;  // above 2^63: stored as its bit pattern
  sc.global_batch = 8;
  sc.context_length = 32;
  add_sampler_state(info, sc);
  save_checkpoint(path, a.store, ctx, &opt_a, info);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1) << "temporary file left";

  TinyModel b(ctx);
  FakeAdam opt_b(ctx, b.store.grad_numel());
  load_weights(path, b.store, ctx);
  EXPECT_EQ(b.store.params_to_host(ctx), a.store.params_to_host(ctx));  // bitwise
  load_optimizer_state(path, opt_b, ctx, b.store.grad_numel());
  EXPECT_EQ(values(opt_b.m_), values(opt_a.m_));
  EXPECT_EQ(values(opt_b.v_), values(opt_a.v_));
  EXPECT_EQ(opt_b.steps_taken(), 17);

  const CheckpointInfo back = read_checkpoint_info(path);
  EXPECT_EQ(back.step, 17);
  EXPECT_EQ(back.text.at("model.size"), "tiny");
  EXPECT_EQ(back.ints.at("model.d_model"), 4);
  EXPECT_EQ(back.reals.at("model.rope_theta"), 10000.0);
  EXPECT_EQ(back.text.at("format"), "paratrain-checkpoint");
  SamplerConfig restored;
  restore_sampler_state(back, restored);
  EXPECT_EQ(restored.sampling, Sampling::Sequential);
  EXPECT_EQ(restored.seed, sc.seed);
  EXPECT_EQ(back.ints.at("data.global_batch"), 8);
  EXPECT_EQ(back.ints.at("data.context_length"), 32);

  // Saving again replaces the file (periodic --save-every), atomically.
  a.fill(ctx, 9);
  info.step = 18;
  save_checkpoint(path, a.store, ctx, nullptr, info);
  load_weights(path, b.store, ctx);
  EXPECT_EQ(b.store.params_to_host(ctx), a.store.params_to_host(ctx));
  EXPECT_EQ(read_checkpoint_info(path).step, 18);
  EXPECT_NE(error_of([&] { load_optimizer_state(path, opt_b, ctx, b.store.grad_numel()); }).find("weights only"),
            std::string::npos);
}

// Format 1 stored the optimizer state per range ("exp_avg.0"); with one range that is the whole
// tensor, and it still loads.
TEST(IoCheckpoint, FormatOneOptimizerStateLoads) {
  Context ctx(Device::cpu());
  const std::string path = test::scratch_dir("ckpt_v1") + "/ckpt.h5";
  TinyModel a(ctx);
  FakeAdam opt(ctx, a.store.grad_numel());
  set_values(opt.m_, 12);
  set_values(opt.v_, 13, /*squares=*/true);
  save_checkpoint(path, a.store, ctx, &opt, CheckpointInfo{});
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  for (const char* kind : {"exp_avg", "exp_avg_sq"})
    ASSERT_GE(H5Lmove(f, (std::string("optimizer/") + kind).c_str(), f,
                      (std::string("optimizer/") + kind + ".0").c_str(), H5P_DEFAULT, H5P_DEFAULT),
              0);
  H5Fclose(f);
  FakeAdam back(ctx, a.store.grad_numel());
  load_optimizer_state(path, back, ctx, a.store.grad_numel());
  EXPECT_EQ(values(back.m_), values(opt.m_));
  EXPECT_EQ(values(back.v_), values(opt.v_));
}

TEST(IoCheckpoint, LayoutIsOneFp32DatasetPerParameterAtTheRoot) {
  Context ctx(Device::cpu());
  const std::string path = test::scratch_dir("ckpt_layout") + "/ckpt.h5";
  TinyModel a(ctx);
  a.fill(ctx, 4);
  FakeAdam opt(ctx, a.store.grad_numel());
  save_checkpoint(path, a.store, ctx, &opt, CheckpointInfo{});

  Handle f = open_file(path);
  ASSERT_GE(f.id, 0);
  for (const auto& up : a.store.params()) {
    const Parameter& p = *up;
    Handle d = open_dataset(f, p.name);  // a root link whose name contains dots
    ASSERT_GE(d.id, 0) << p.name;
    Handle type{H5Dget_type(d), H5Tclose};
    EXPECT_EQ(H5Tget_class(type), H5T_FLOAT);
    EXPECT_EQ(H5Tget_size(type), 4u);
    const auto dims = shape_of(d);
    EXPECT_EQ(Shape(dims.begin(), dims.end()), p.shape) << p.name;
    std::vector<float> v(static_cast<size_t>(p.numel));
    ASSERT_GE(H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0);
    EXPECT_EQ(v, values(p.data())) << p.name << ": row-major, PyTorch's shape";
  }
  Handle g{H5Gopen2(f, "optimizer", H5P_DEFAULT), H5Gclose};
  ASSERT_GE(g.id, 0);
  Handle m = open_dataset(g, "exp_avg");
  EXPECT_EQ(shape_of(m), std::vector<hsize_t>{static_cast<hsize_t>(a.store.grad_numel())});
  EXPECT_EQ(string_attr(g, "kind"), "adamw");
  EXPECT_EQ(string_list_attr(f, "parameter_names"),
            (std::vector<std::string>{"token_embeddings.weight", "layers.0.ln1.weight", "layers.0.attn.q_proj.weight",
                                      "lm_head.weight"}));
}

// What `for k, v in sd.items(): f[k] = v.numpy()` produces: default file properties, one
// dataset per tensor at the root, float32 (or float64), plus whatever else the dict held.
void write_state_dict_like_h5py(const std::string& path, const TinyModel& m, const std::vector<float>& src,
                                bool fp64_embeddings) {
  Handle f{H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose};
  ASSERT_GE(f.id, 0);
  for (const auto& up : m.store.params()) {
    const Parameter& p = *up;
    std::vector<hsize_t> dims(p.shape.begin(), p.shape.end());
    Handle space{H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose};
    const bool f64 = fp64_embeddings && p.name == "token_embeddings.weight";
    Handle d{H5Dcreate2(f, p.name.c_str(), f64 ? H5T_IEEE_F64LE : H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT,
                        H5P_DEFAULT),
             H5Dclose};
    ASSERT_GE(d.id, 0);
    if (f64) {
      std::vector<double> v(src.begin() + p.offset, src.begin() + p.offset + p.numel);
      ASSERT_GE(H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0);
    } else {
      ASSERT_GE(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, src.data() + p.offset), 0);
    }
  }
  // An extra buffer the model does not have (e.g. a RoPE cache): ignored on load.
  hsize_t n = 3;
  Handle space{H5Screate_simple(1, &n, nullptr), H5Sclose};
  Handle extra{H5Dcreate2(f, "rope.cos_cached", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose};
  ASSERT_GE(extra.id, 0);
}

TEST(IoCheckpoint, LoadsAStateDictWrittenInH5pyLayout) {
  Context ctx(Device::cpu());
  const std::string path = test::scratch_dir("ckpt_h5py_layout") + "/sd.h5";
  TinyModel src(ctx);
  src.fill(ctx, 5);
  const std::vector<float> expected = src.store.params_to_host(ctx);
  write_state_dict_like_h5py(path, src, expected, /*fp64_embeddings=*/true);
  TinyModel dst(ctx);
  load_weights(path, dst.store, ctx);
  EXPECT_EQ(dst.store.params_to_host(ctx), expected);  // fp32 → fp64 → fp32 is exact
  EXPECT_NE(error_of([&] { read_checkpoint_info(path); }).find("no 'step'"), std::string::npos);
}

TEST(IoCheckpoint, MissingOrMisshapedTensorsAreNamedAndNothingChanges) {
  Context ctx(Device::cpu());
  const std::string dir = test::scratch_dir("ckpt_mismatch");
  TinyModel src(ctx);
  src.fill(ctx, 6);
  save_checkpoint(dir + "/ok.h5", src.store, ctx, nullptr, CheckpointInfo{});

  // A model whose q_proj is (8, 4) and which has a tensor the file lacks.
  ParamStore other;
  other.add("token_embeddings.weight", {10, 4});
  other.add("layers.0.ln1.weight", {4});
  other.add("layers.0.attn.q_proj.weight", {8, 4});
  other.add("lm_head.weight", {10, 4});
  other.add("ln_final.weight", {4});
  other.finalize(ctx, false);
  const auto before = other.params_to_host(ctx);
  const std::string msg = error_of([&] { load_weights(dir + "/ok.h5", other, ctx); });
  EXPECT_NE(msg.find("ok.h5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'layers.0.attn.q_proj.weight' has shape (6, 4), expected (8, 4)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'ln_final.weight' is missing (expected shape (4,))"), std::string::npos) << msg;
  EXPECT_EQ(other.params_to_host(ctx), before) << "a failed load must not change parameters";

  // A tensor stored as integers is refused.
  {
    Handle f{H5Fcreate((dir + "/int.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose};
    hsize_t n = 4;
    Handle space{H5Screate_simple(1, &n, nullptr), H5Sclose};
    Handle d{H5Dcreate2(f, "layers.0.ln1.weight", H5T_STD_I32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
             H5Dclose};
  }
  ParamStore one;
  one.add("layers.0.ln1.weight", {4});
  one.finalize(ctx, false);
  EXPECT_NE(error_of([&] { load_weights(dir + "/int.h5", one, ctx); }).find("not floating point"), std::string::npos);
}

TEST(IoCheckpoint, BadFilesAndOptimizerMismatch) {
  Context ctx(Device::cpu());
  const std::string dir = test::scratch_dir("ckpt_bad");
  TinyModel m(ctx);
  std::string msg = error_of([&] { load_weights(dir + "/none.h5", m.store, ctx); });
  EXPECT_NE(msg.find("none.h5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cannot open"), std::string::npos) << msg;
  { std::ofstream(dir + "/text.h5") << "not hdf5"; }
  msg = error_of([&] { load_weights(dir + "/text.h5", m.store, ctx); });
  EXPECT_NE(msg.find("not an HDF5 file"), std::string::npos) << msg;

  FakeAdam opt(ctx, m.store.grad_numel());
  save_checkpoint(dir + "/ck.h5", m.store, ctx, &opt, CheckpointInfo{});
  FakeAdam bigger(ctx, m.store.grad_numel() + 1);
  msg = error_of([&] { load_optimizer_state(dir + "/ck.h5", bigger, ctx, m.store.grad_numel() + 1); });
  EXPECT_NE(msg.find("'exp_avg' has shape"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'exp_avg_sq'"), std::string::npos) << msg;
}

// Attribute `name` of the object at `obj_path` in an existing file, replaced by an int64 or a
// string (or removed when both are absent): how a hostile or damaged file is made.
void set_attr(const std::string& file, const std::string& obj_path, const std::string& name,
              std::optional<int64_t> number, std::optional<std::string> text = std::nullopt) {
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  hid_t obj = H5Oopen(f, obj_path.c_str(), H5P_DEFAULT);
  ASSERT_GE(obj, 0);
  if (H5Aexists(obj, name.c_str()) > 0) ASSERT_GE(H5Adelete(obj, name.c_str()), 0);
  hid_t space = H5Screate(H5S_SCALAR);
  if (number) {
    hid_t a = H5Acreate2(obj, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    EXPECT_GE(H5Awrite(a, H5T_NATIVE_INT64, &*number), 0);
    H5Aclose(a);
  } else if (text) {
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, text->size());
    hid_t a = H5Acreate2(obj, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT);
    EXPECT_GE(H5Awrite(a, type, text->data()), 0);
    H5Aclose(a);
    H5Tclose(type);
  }
  H5Sclose(space);
  H5Oclose(obj);
  H5Fclose(f);
}

// A file that says it is something else, or a newer format, or whose optimizer has no step count,
// is refused with one error naming the file; an integer-typed moment is named by its dtype, not a
// shape that matches.
TEST(IoCheckpoint, ForeignNewerOrInconsistentFilesAreRefusedNamingTheFile) {
  Context ctx(Device::cpu());
  const std::string dir = test::scratch_dir("ckpt_hostile");
  TinyModel m(ctx);
  FakeAdam opt(ctx, m.store.grad_numel());
  const std::string good = dir + "/good.h5";
  save_checkpoint(good, m.store, ctx, &opt, CheckpointInfo{});
  auto copy = [&](const std::string& name) {
    const std::string p = dir + "/" + name;
    fs::copy_file(good, p, fs::copy_options::overwrite_existing);
    return p;
  };
  auto expect_refused = [&](const std::string& p, std::initializer_list<const char*> words) {
    for (const std::string& msg :
         {error_of([&] { load_weights(p, m.store, ctx); }), error_of([&] { read_checkpoint_info(p); }),
          error_of([&] { load_optimizer_state(p, opt, ctx, m.store.grad_numel()); })})
      for (const char* w : words) EXPECT_NE(msg.find(w), std::string::npos) << "'" << w << "' not in: " << msg;
  };
  const std::string v99 = copy("v99.h5");
  set_attr(v99, "/", "format_version", 99);
  expect_refused(v99, {"v99.h5", "format_version 99"});
  const std::string v0 = copy("v0.h5");
  set_attr(v0, "/", "format_version", 0);
  expect_refused(v0, {"v0.h5", "format_version 0"});
  const std::string foreign = copy("foreign.h5");
  set_attr(foreign, "/", "format", std::nullopt, std::string("keras-weights"));
  expect_refused(foreign, {"foreign.h5", "'keras-weights'"});
  const std::string unversioned = copy("unversioned.h5");
  set_attr(unversioned, "/", "format_version", std::nullopt);
  expect_refused(unversioned, {"unversioned.h5", "format_version"});

  const std::string no_step = copy("no_step.h5");
  set_attr(no_step, "/optimizer", "step", std::nullopt);
  std::string msg = error_of([&] { load_optimizer_state(no_step, opt, ctx, m.store.grad_numel()); });
  EXPECT_NE(msg.find("no_step.h5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'step' is missing"), std::string::npos) << msg;

  // exp_avg rewritten as int64 of the right length.
  const std::string ints = copy("ints.h5");
  {
    hid_t f = H5Fopen(ints.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    ASSERT_GE(H5Ldelete(f, "optimizer/exp_avg", H5P_DEFAULT), 0);
    const hsize_t n = static_cast<hsize_t>(m.store.grad_numel());
    std::vector<int64_t> zeros(n, 0);
    hid_t space = H5Screate_simple(1, &n, nullptr);
    hid_t d = H5Dcreate2(f, "optimizer/exp_avg", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    EXPECT_GE(H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, zeros.data()), 0);
    H5Dclose(d);
    H5Sclose(space);
    H5Fclose(f);
  }
  msg = error_of([&] { load_optimizer_state(ints, opt, ctx, m.store.grad_numel()); });
  EXPECT_NE(msg.find("ints.h5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'exp_avg' has dtype int64"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("has shape"), std::string::npos) << msg;
  EXPECT_NO_THROW(load_optimizer_state(good, opt, ctx, m.store.grad_numel()));
}

// A diverged state is never written: the save fails naming the tensor and the checkpoint
// already there stays byte for byte. What a load reads is checked the same way: a
// non-finite weight or moment, or a negative second moment, is refused naming the tensor.
TEST(IoCheckpoint, NonFiniteValuesAreNeverWrittenAndNeverLoaded) {
  Context ctx(Device::cpu());
  const std::string dir = test::scratch_dir("ckpt_nonfinite");
  TinyModel m(ctx);
  FakeAdam opt(ctx, m.store.grad_numel());
  set_values(opt.v_, 3, /*squares=*/true);
  const std::string path = dir + "/ck.h5";
  save_checkpoint(path, m.store, ctx, &opt, CheckpointInfo{});
  const std::string good = file_bytes(path);

  std::vector<float> w = m.store.params_to_host(ctx);
  const Parameter& second = *m.store.params().at(1);
  w[size_t(second.offset + 1)] = std::numeric_limits<float>::quiet_NaN();
  m.store.params_from_host(ctx, w);
  std::string msg = error_of([&] { save_checkpoint(path, m.store, ctx, &opt, CheckpointInfo{}); });
  EXPECT_NE(msg.find("not written"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'" + second.name + "'"), std::string::npos) << msg;
  EXPECT_EQ(file_bytes(path), good) << "the previous checkpoint changed";
  EXPECT_FALSE(std::filesystem::exists(temp_path_for(path))) << "a temporary file was left";

  w[size_t(second.offset + 1)] = 0.5f;
  m.store.params_from_host(ctx, w);
  opt.v_.data_as<float>()[2] = std::numeric_limits<float>::infinity();
  msg = error_of([&] { save_checkpoint(path, m.store, ctx, &opt, CheckpointInfo{}); });
  EXPECT_NE(msg.find("optimizer state 'exp_avg_sq'"), std::string::npos) << msg;
  EXPECT_EQ(file_bytes(path), good);

  // Loads: write the bad values with the HDF5 API behind the checkpoint's back.
  for (const char* which : {"weight", "moment", "negative"}) {
    SCOPED_TRACE(which);
    const std::string bad = dir + "/bad_" + which + ".h5";
    std::filesystem::copy_file(path, bad, std::filesystem::copy_options::overwrite_existing);
    hid_t f = H5Fopen(bad.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    const std::string dset = std::string(which) == "weight" ? second.name : "optimizer/exp_avg_sq";
    hid_t d = H5Dopen2(f, dset.c_str(), H5P_DEFAULT);
    ASSERT_GE(d, 0) << dset;
    hid_t space = H5Dget_space(d);
    const hssize_t n = H5Sget_simple_extent_npoints(space);
    std::vector<float> v(size_t(n), 1.0f);
    v[0] = std::string(which) == "negative" ? -1.0f : std::numeric_limits<float>::quiet_NaN();
    ASSERT_GE(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0);
    H5Sclose(space);
    H5Dclose(d);
    H5Fclose(f);
    TinyModel fresh(ctx);
    FakeAdam fresh_opt(ctx, fresh.store.grad_numel());
    if (std::string(which) == "weight") {
      msg = error_of([&] { load_weights(bad, fresh.store, ctx); });
      EXPECT_NE(msg.find("non-finite weights"), std::string::npos) << msg;
      EXPECT_NE(msg.find("'" + second.name + "'"), std::string::npos) << msg;
    } else {
      msg = error_of([&] { load_optimizer_state(bad, fresh_opt, ctx, fresh.store.grad_numel()); });
      EXPECT_NE(msg.find("'exp_avg_sq'"), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::string(which) == "negative" ? "never negative" : "nan"), std::string::npos) << msg;
    }
    EXPECT_NE(msg.find(bad), std::string::npos) << msg;
  }
}

// With h5py on the machine (scripts/setup.sh puts it in the project's .venv, so CI has it): a
// file written from a state_dict-like dict by h5py loads unchanged, and h5py reads our
// checkpoint by the dotted names.
TEST(IoCheckpoint, RoundTripThroughH5py) {
  std::string python;
  for (const std::string& candidate :
       {test::source_path(".venv/bin/python"), std::string("/usr/bin/python3"), std::string("python3")})
    if (std::system((candidate + " -c 'import h5py, numpy' >/dev/null 2>&1").c_str()) == 0) {
      python = candidate;
      break;
    }
  if (python.empty()) GTEST_SKIP() << "no python3 with h5py and numpy";
  Context ctx(Device::cpu());
  const std::string dir = test::scratch_dir("ckpt_h5py");
  TinyModel m(ctx);
  m.fill(ctx, 8);
  save_checkpoint(dir + "/ours.h5", m.store, ctx, nullptr, CheckpointInfo{});
  const std::string script = dir + "/check.py";
  std::ofstream(script) << R"(
import sys, h5py, numpy as np
d = sys.argv[1]
with h5py.File(d + "/ours.h5", "r") as f:
    q = f["layers.0.attn.q_proj.weight"]
    assert q.shape == (6, 4) and q.dtype == np.float32, (q.shape, q.dtype)
    sd = {k: f[k][()] for k in f.attrs["parameter_names"]}
# Same tensors, written the way a user saves a PyTorch state_dict: negated, so a load is visible.
with h5py.File(d + "/theirs.h5", "w") as f:
    for k, v in sd.items():
        f[k] = -v
)";
  ASSERT_EQ(std::system((python + " " + script + " " + dir).c_str()), 0);
  TinyModel back(ctx);
  load_weights(dir + "/theirs.h5", back.store, ctx);
  auto expected = m.store.params_to_host(ctx);
  for (float& x : expected) x = -x;
  EXPECT_EQ(back.store.params_to_host(ctx), expected);
}

}  // namespace
}  // namespace pt::io
