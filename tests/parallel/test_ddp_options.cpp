// `--ddp`, `--grad-comm` and `--comm-sms` resolution (cli/ddp_options): auto choices and refusals.
#include <gtest/gtest.h>

#include "cli/ddp_options.h"
#include "common/test_util.h"
#include "core/error.h"

namespace pt::test {
namespace {

TEST(DdpOptions, ResolveAutoAndRejectContradictions) {
  cli::DdpOptions o;
  EXPECT_EQ(cli::resolve_ddp_options(o, 2).ddp, "bucketed");
  EXPECT_EQ(cli::resolve_ddp_options(o, 1).ddp, "none");
  o.shard = "zero1";
  EXPECT_EQ(cli::resolve_ddp_options(o, 1).shard, "none") << "one rank has nothing to shard";
  EXPECT_EQ(cli::resolve_ddp_options(o, 4).shard, "zero1");
  o.ddp = "none";
  EXPECT_THROW(cli::resolve_ddp_options(o, 2), Error);
  o = cli::DdpOptions();
  o.ddp = "ring";
  EXPECT_THROW(cli::resolve_ddp_options(o, 2), Error);
  o = cli::DdpOptions();
  o.bucket_mb = -1;
  EXPECT_THROW(cli::resolve_ddp_options(o, 2), Error);
  o = cli::DdpOptions();
  o.shard = "zero3";
  EXPECT_THROW(cli::resolve_ddp_options(o, 2), Error);
  for (const char* bad : {"-1", "16x", "", "many", "1e3"}) {
    o = cli::DdpOptions();
    o.comm_sms = bad;
    EXPECT_THROW(cli::resolve_ddp_options(o, 2), Error) << "--comm-sms '" << bad << "'";
  }
}

TEST(DdpOptions, GradCommIsFp32OrBf16AndFp32WhenNothingIsCommunicated) {
  cli::DdpOptions o;
  EXPECT_EQ(o.grad_comm, "fp32");
  o.grad_comm = "bf16";
  EXPECT_EQ(cli::resolve_ddp_options(o, 2).grad_comm, "bf16");
  EXPECT_EQ(cli::resolve_ddp_options(o, 1).grad_comm, "fp32") << "one rank: accepted, no effect";
  o.ddp = "none";
  EXPECT_EQ(cli::resolve_ddp_options(o, 2).grad_comm, "fp32") << "--ddp none: accepted, no effect";
  for (const char* bad : {"fp16", "BF16", "", "bfloat16"}) {
    o = cli::DdpOptions();
    o.grad_comm = bad;
    const std::string msg = error_of([&] { cli::resolve_ddp_options(o, 2); });
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
