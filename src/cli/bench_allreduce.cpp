// `paratrain bench allreduce`: the nccl-tests table for the collectives data parallelism and
// ZeRO-1 use — all-reduce, reduce-scatter, all-gather, broadcast (fp32, sum, in place) — over
// every rank: bytes, count, time, algorithm and bus bandwidth, and how many elements came out
// wrong. One entry per collective; the driver is shared.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "cli/bench_sweep.h"
#include "cli/options.h"
#include "cli/subcommands.h"
#include "core/context.h"
#include "core/error.h"
#include "io/run_record.h"
#include "io/table.h"
#include "parallel/communicator.h"
#include "parallel/host_collectives.h"
#include "parallel/runtime.h"

namespace pt::cli {

namespace {

// "1M" = 2^20 bytes (as nccl-tests' -b/-e), "10M", "1G", "64K", "4096"; an optional "B".
int64_t parse_bytes(const std::string& word) {
  std::string s = word;
  if (!s.empty() && (s.back() == 'B' || s.back() == 'b')) s.pop_back();
  int64_t scale = 1;
  if (!s.empty()) {
    switch (s.back()) {
      case 'K':
      case 'k': scale = int64_t{1} << 10; break;
      case 'M':
      case 'm': scale = int64_t{1} << 20; break;
      case 'G':
      case 'g': scale = int64_t{1} << 30; break;
      default: break;
    }
    if (scale != 1) s.pop_back();
  }
  const auto v = parse_number(s, /*integer=*/false);
  PT_CHECK(v.has_value() && *v > 0, "--bytes: '" + word + "' is not a size (examples: 4096, 64K, 1M, 1G)");
  PT_CHECK(*v * static_cast<double>(scale) <= 0x1p62, "--bytes: '" + word + "' is too large (at most 2^62 bytes)");
  const auto bytes = static_cast<int64_t>(*v * static_cast<double>(scale));
  PT_CHECK(bytes >= 4, "--bytes: '" + word + "' is smaller than one fp32 element");
  return bytes;
}

// Rank r's value at element i: (r + 1)·((i mod 13) + 1). Every sum of these is a small integer,
// exact in fp32, so each check is equality.
float pattern(int rank, int64_t i) { return static_cast<float>((rank + 1) * (i % 13 + 1)); }

// One collective of the table: its busbw factor (nccl-tests'), its in-place call on a buffer of
// `count` elements (a multiple of the ranks), and what element i holds afterwards on `rank`
// (nullopt: not defined there, as outside a reduce-scatter's own block).
struct CollectiveBench {
  const char* name;
  double (*bus_factor)(int n);
  void (*run)(parallel::Communicator& comm, Tensor& buf);
  std::optional<float> (*expected)(int rank, int ranks, int64_t count, int64_t i);
};

Tensor own_block(const parallel::Communicator& comm, Tensor& buf) {
  const int64_t c = buf.numel() / comm.world_size();
  return buf.narrow(0, comm.rank() * c, c);
}
float ranks_sum(int n) { return static_cast<float>(n * (n + 1) / 2); }

const std::vector<CollectiveBench>& collectives() {
  static const std::vector<CollectiveBench> table = {
      {"all_reduce", [](int n) { return 2.0 * (n - 1) / n; },
       [](parallel::Communicator& comm, Tensor& buf) { comm.all_reduce(buf, parallel::ReduceOp::Sum); },
       [](int, int n, int64_t, int64_t i) -> std::optional<float> {
         return ranks_sum(n) * static_cast<float>(i % 13 + 1);
       }},
      {"reduce_scatter", [](int n) { return double(n - 1) / n; },
       [](parallel::Communicator& comm, Tensor& buf) {
         Tensor mine = own_block(comm, buf);
         comm.reduce_scatter(buf, mine, parallel::ReduceOp::Sum);
       },
       [](int r, int n, int64_t count, int64_t i) -> std::optional<float> {
         const int64_t c = count / n;
         if (i < r * c || i >= (r + 1) * c) return std::nullopt;
         return ranks_sum(n) * static_cast<float>(i % 13 + 1);
       }},
      {"all_gather", [](int n) { return double(n - 1) / n; },
       [](parallel::Communicator& comm, Tensor& buf) {
         const Tensor mine = own_block(comm, buf);
         comm.all_gather(mine, buf);
       },
       [](int, int n, int64_t count, int64_t i) -> std::optional<float> {
         return pattern(static_cast<int>(i / (count / n)), i);
       }},
      {"broadcast", [](int) { return 1.0; }, [](parallel::Communicator& comm, Tensor& buf) { comm.broadcast(buf, 0); },
       [](int, int, int64_t, int64_t i) -> std::optional<float> { return pattern(0, i); }},
  };
  return table;
}

const CollectiveBench& collective(const std::string& name) {
  std::string known;
  for (const CollectiveBench& c : collectives()) {
    if (name == c.name) return c;
    known += std::string(known.empty() ? "" : ", ") + c.name;
  }
  PT_FAIL("--collective: unknown collective '" + name + "' (expected " + known + ")");
}

// One correctness round: fill, run, compare. Returns the wrong elements on this rank.
int64_t check_round(Context& ctx, parallel::Communicator& comm, const CollectiveBench& c, Tensor& buf) {
  const int64_t n = buf.numel();
  std::vector<float> host(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) host[i] = pattern(comm.rank(), i);
  copy_bytes(ctx, buf.data(), buf.device().kind, host.data(), DeviceKind::CPU, buf.nbytes());
  c.run(comm, buf);
  comm.synchronize();
  copy_bytes(ctx, host.data(), DeviceKind::CPU, buf.data(), buf.device().kind, buf.nbytes());
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) {
    const std::optional<float> want = c.expected(comm.rank(), comm.world_size(), n, i);
    wrong += want && host[i] != *want;
  }
  return wrong;
}

}  // namespace

int run_bench_allreduce(const std::vector<std::string>& args) {
  RunOptions run;
  std::string backend_word = "auto";
  std::vector<std::string> size_words, collective_words, engine_words;
  int iters = 20, warmup = 5;
  LogOptions log_opt;
  po::options_description desc = bench_options("bench allreduce options", run, log_opt);
  // clang-format off
  desc.add_options()
      ("backend", po::value(&backend_word)->default_value(backend_word),
       "nccl (GPU buffers), mpi (host buffers), or auto: nccl when this rank has a GPU")
      ("comm-engine", po::value(&engine_words)->multitoken(), "engines to time (default nccl): nccl, ce or auto")
      ("bytes", po::value(&size_words)->multitoken(),
       "message sizes in bytes, K/M/G = 2^10/2^20/2^30 (default 1M,10M,100M,1G)")
      ("collective", po::value(&collective_words)->multitoken(),
       "all_reduce, reduce_scatter, all_gather, broadcast (default all_reduce); a list times each")
      ("steps", po::value(&iters)->default_value(iters), "timed iterations per size")
      ("warmup", po::value(&warmup)->default_value(warmup), "untimed iterations per size first");
  // clang-format on
  auto vm = parse_or_help(desc, args, "mpirun -np N paratrain bench allreduce [options]   (one rank per GPU)");
  if (!vm) return 0;
  PT_CHECK(iters >= 1, "--steps must be at least 1");
  PT_CHECK(warmup >= 0, "--warmup must be >= 0");
  std::vector<int64_t> sizes;
  for (const auto& w : split_list(size_words.empty() ? std::vector<std::string>{"1M,10M,100M,1G"} : size_words))
    sizes.push_back(parse_bytes(w));
  std::vector<const CollectiveBench*> chosen;
  for (const auto& w : split_list(collective_words.empty() ? std::vector<std::string>{"all_reduce"} : collective_words))
    chosen.push_back(&collective(w));

  auto& rt = parallel::Runtime::get();
  Device device = resolve_device(run);
  const parallel::Backend backend =
      backend_word == "auto" ? parallel::backend_for(device) : parallel::backend_from_name(backend_word);
  if (backend == parallel::Backend::NCCL)
    PT_CHECK(device.is_cuda(), "--backend nccl needs a GPU for every rank (this rank runs on the CPU)");
  else
    device = Device::cpu();  // MPI collectives work on host memory
  std::vector<parallel::CommEngine> engines;
  for (const auto& w : split_list(engine_words.empty() ? std::vector<std::string>{"nccl"} : engine_words))
    engines.push_back(parallel::comm_engine_from_name(w));
  PT_CHECK(backend == parallel::Backend::NCCL || engine_words.empty(),
           "--comm-engine applies to the nccl backend (this run uses mpi)");

  BenchSweep sweep("bench allreduce", run, log_opt,
                   static_cast<int64_t>(engines.size() * chosen.size() * sizes.size()));
  io::RunRecord& record = sweep.record();  // --out checked now, not after the sweep
  Context ctx(device);
  std::unique_ptr<parallel::Communicator> comm;
  record.collect_environment(ctx);
  record.set_options(options_as_strings(*vm));
  record.set_attr("backend", parallel::backend_name(backend));
  record.set_attr("device", device.str());
  sweep.start();

  io::ResultTable table("allreduce", "fp32 collectives over all ranks, in place (nccl-tests' columns)");
  table.add_string("collective", "all_reduce, reduce_scatter, all_gather or broadcast (root 0)")
      .add_string("backend", "nccl or mpi")
      .add_string("engine", "what moved the data: nccl (NCCL's kernels), ce (the copy engines), mpi")
      .add_int("ranks", "number of ranks taking part")
      .add_int("bytes", "buffer size per rank (nccl-tests' size: the whole buffer, all blocks, for reduce-scatter "
                        "and all-gather)")
      .add_int("count", "fp32 elements of that buffer")
      .add_string("type", "element type")
      .add_string("redop", "reduction")
      .add_double("time_us", "time per collective, mean over ranks (microseconds)", 1)
      .add_double("time_us_max", "time per collective, slowest rank (microseconds)", 1)
      .add_double("algbw_GBps", "bytes / time_us (GB/s, 1e9 bytes)", 2)
      .add_double("busbw_GBps",
                  "algbw x the collective's factor: 2(n-1)/n all-reduce, (n-1)/n reduce-scatter and "
                  "all-gather, 1 broadcast: the link bandwidth a ring needs (GB/s)",
                  2)
      .add_int("wrong", "elements differing from the exact sum in the check round, all ranks");

  int64_t wrong_total = 0;
  const int n = rt.world_size();
  for (parallel::CommEngine engine : engines) {
    comm.reset();  // one communicator's resources go before the next one's come
    comm = parallel::make_communicator(backend, ctx, 0, engine);
    for (const CollectiveBench* c : chosen)
      for (int64_t bytes : sizes) {
        const int64_t count = std::max<int64_t>(n, bytes / 4 / n * n);  // whole blocks, one per rank
        Tensor buf = Tensor::empty({count}, DType::F32, device, "collective_buffer", MemCategory::Other);
        const parallel::RegistrationPtr registered = comm->register_buffer(buf);
        const int64_t wrong = parallel::sum_over_ranks(check_round(ctx, *comm, *c, buf));
        wrong_total += wrong;
        fill_zero(ctx, buf.data(), device.kind, buf.nbytes());  // sums of zeros: no overflow while timing
        for (int i = 0; i < warmup; ++i) c->run(*comm, buf);
        comm->synchronize();
        comm->barrier();
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < iters; ++i) c->run(*comm, buf);
        comm->synchronize();
        const double us =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
        const auto t = parallel::spread_over_ranks(us);
        const double algbw = static_cast<double>(count * 4) / (t.mean * 1e-6) / 1e9;
        table.add_row()
            .set("collective", c->name)
            .set("backend", parallel::backend_name(backend))
            .set("engine", comm->engine())
            .set("ranks", n)
            .set("bytes", count * 4)
            .set("count", count)
            .set("type", "float")
            .set("redop", std::string(c->name) == "all_gather" || std::string(c->name) == "broadcast" ? "none" : "sum")
            .set("time_us", t.mean)
            .set("time_us_max", t.max)
            .set("algbw_GBps", algbw)
            .set("busbw_GBps", algbw * c->bus_factor(n))
            .set("wrong", wrong);
        char summary[160];
        std::snprintf(summary, sizeof summary, "%.1f us, busbw %.2f GB/s%s", t.mean, algbw * c->bus_factor(n),
                      wrong ? " (WRONG RESULTS)" : "");
        sweep.done(std::string(c->name) + " " + comm->engine() + " " + std::to_string(count * 4) + " bytes", summary,
                   {{"time_us", t.mean}, {"busbw_GBps", algbw * c->bus_factor(n)}, {"wrong", wrong}}, {&table});
        comm->synchronize();  // nothing in flight on the buffer when its registration goes
      }
  }
  sweep.finish({&table});
  if (wrong_total > 0) {
    if (rt.is_root())
      std::cerr << "paratrain: error: " << wrong_total << " wrong elements in the collectives' checks" << std::endl;
    return 1;
  }
  return 0;
}

}  // namespace pt::cli
