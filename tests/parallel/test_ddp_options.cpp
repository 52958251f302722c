// The data-parallel options (cli/ddp_options): parsed into the library's types, auto resolved,
// contradictions refused.
#include <gtest/gtest.h>

#include <boost/program_options.hpp>

#include <string>
#include <vector>

#include "cli/ddp_options.h"
#include "common/test_util.h"
#include "core/error.h"
#include "parallel/strategies.h"

namespace pt::test {
namespace {

// The options as add_ddp_options parses them from `args`.
cli::DdpOptions parsed(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  cli::DdpOptions o;
  po::options_description desc;
  cli::add_ddp_options(desc, o);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(desc).run(), vm);
  po::notify(vm);
  return o;
}

std::string ddp_of(const cli::DdpOptions& o) { return o.ddp ? o.ddp->name : "auto"; }

TEST(DdpOptions, ParseIntoTheTableEntryAndTheLibraryTypes) {
  const cli::DdpOptions o = parsed({"--ddp", "flat", "--shard-optimizer", "zero1", "--comm-sms", "24", "--comm-engine",
                                    "ce", "--grad-comm", "bf16", "--zero1-prefetch", "off"});
  EXPECT_EQ(o.ddp, &parallel::strategy("flat")) << "the table's own entry, not a copy";
  EXPECT_EQ(o.sharding, plan::Sharding::Zero1);
  EXPECT_EQ(o.comm_sms, 24);
  EXPECT_EQ(o.comm_engine, parallel::CommEngine::CE);
  EXPECT_EQ(o.grad_comm, parallel::GradComm::BF16);
  EXPECT_FALSE(o.zero1_prefetch);
  const cli::DdpOptions d = parsed({});
  EXPECT_EQ(d.ddp, nullptr) << "auto until resolved";
  EXPECT_EQ(d.comm_sms, parallel::kCommSmsAuto);
  EXPECT_TRUE(d.zero1_prefetch);
  const std::string msg = error_of([] { parsed({"--ddp", "ring"}); });
  EXPECT_NE(msg.find("--ddp must be auto, " + parallel::strategy_names_text()), std::string::npos) << msg;
  for (const char* bad : {"-1", "16x", "many", "1e3"})
    EXPECT_THROW(parsed({"--comm-sms", bad}), Error) << "--comm-sms '" << bad << "'";
  EXPECT_THROW(parsed({"--comm-engine", "rdma"}), Error);
  EXPECT_THROW(parsed({"--zero1-prefetch", "maybe"}), Error);
}

TEST(DdpOptions, ResolveAutoAndRejectContradictions) {
  cli::DdpOptions o;
  EXPECT_EQ(ddp_of(cli::resolve_ddp_options(o, 2)), "bucketed");
  EXPECT_EQ(ddp_of(cli::resolve_ddp_options(o, 1)), "none");
  o = parsed({"--shard-optimizer", "zero1"});
  EXPECT_EQ(cli::resolve_ddp_options(o, 1).shard, ShardMode::None) << "one rank has nothing to shard";
  EXPECT_EQ(cli::resolve_ddp_options(o, 4).shard, ShardMode::Zero1);
  o = parsed({"--shard-optimizer", "zero1", "--ddp", "none"});
  EXPECT_THROW(cli::resolve_ddp_options(o, 2), Error);
  o = parsed({"--bucket-mb", "-1"});
  EXPECT_THROW(cli::resolve_ddp_options(o, 2), Error);
  o = parsed({"--shard-optimizer", "zero3"});  // plan sizes it; a run refuses it
  const std::string msg = error_of([&] { cli::resolve_ddp_options(o, 2); });
  EXPECT_NE(msg.find("--shard-optimizer must be none, broadcast or zero1 (got 'zero3')"), std::string::npos) << msg;
  EXPECT_EQ(cli::data_parallel_config(cli::resolve_ddp_options(parsed({"--ddp", "overlap"}), 2)).ddp,
            &parallel::strategy("overlap"));
}

TEST(DdpOptions, GradCommIsFp32OrBf16AndFp32WhenNothingIsCommunicated) {
  cli::DdpOptions o;
  EXPECT_EQ(o.grad_comm, parallel::GradComm::FP32);
  o = parsed({"--grad-comm", "bf16"});
  EXPECT_EQ(cli::resolve_ddp_options(o, 2).grad_comm, parallel::GradComm::BF16);
  EXPECT_EQ(cli::resolve_ddp_options(o, 1).grad_comm, parallel::GradComm::FP32) << "one rank: accepted, no effect";
  o = parsed({"--grad-comm", "bf16", "--ddp", "none"});
  EXPECT_EQ(cli::resolve_ddp_options(o, 2).grad_comm, parallel::GradComm::FP32) << "--ddp none: accepted, no effect";
  for (const char* bad : {"fp16", "BF16", "bfloat16"}) {
    const std::string msg = error_of([&] { parsed({"--grad-comm", bad}); });
    EXPECT_NE(msg.find("--grad-comm"), std::string::npos) << "'" << bad << "': " << msg;
    EXPECT_NE(msg.find("fp32 or bf16"), std::string::npos) << msg;
  }
  EXPECT_EQ(parallel::grad_comm_from_name("bf16"), parallel::GradComm::BF16);
  EXPECT_STREQ(parallel::grad_comm_name(parallel::GradComm::FP32), "fp32");
}

TEST(DdpOptions, CommSmsAutoIsTheMeasuredCountForTheGpuAndNothingOnTheCpu) {
  EXPECT_EQ(cli::parse_comm_sms("auto"), parallel::kCommSmsAuto);
  EXPECT_EQ(cli::parse_comm_sms("0"), 0);
  EXPECT_EQ(cli::parse_comm_sms("24"), 24);
  Context cpu(Device::cpu());
  EXPECT_EQ(parallel::auto_comm_sms(cpu), 0);
  EXPECT_EQ(cpu.sm_count(), 0);
  cpu.reserve_sms(8);  // nothing to reserve on the CPU
  EXPECT_EQ(cpu.reserved_sms(), 0);
  if (cuda_device_count() > 0) {
    Context gpu(Device::cuda(0));
    EXPECT_EQ(parallel::auto_comm_sms(gpu), parallel::auto_comm_sms_for(gpu.target().name, gpu.sm_count()));
  }
  // The table: an H100 SXM and an H200 32, every other GPU 16, never more than a quarter of the SMs.
  EXPECT_EQ(parallel::auto_comm_sms_for("NVIDIA H100 80GB HBM3", 132), 32);
  EXPECT_EQ(parallel::auto_comm_sms_for("NVIDIA H200", 132), 32);
  EXPECT_EQ(parallel::auto_comm_sms_for("NVIDIA H100 PCIe", 114), 16);
  EXPECT_EQ(parallel::auto_comm_sms_for("NVIDIA A100-SXM4-80GB", 108), 16);
  EXPECT_EQ(parallel::auto_comm_sms_for("NVIDIA H100 80GB HBM3", 100), 25);
  EXPECT_EQ(parallel::auto_comm_sms_for("a small GPU", 40), 10);
}

}  // namespace
}  // namespace pt::test
