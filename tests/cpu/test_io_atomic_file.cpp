// Atomic outputs and their temporary files: stale ones of dead processes on this host are
// removed (and only those), and a temporary file registered with core/interrupt is what a
// signal that ends the process would remove.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/test_util.h"
#include "io/atomic_file.h"

namespace pt::io {
namespace {

namespace fs = std::filesystem;

void touch(const std::string& path) { std::ofstream(path) << "partial"; }

std::string host() {
  char buf[256] = {};
  EXPECT_EQ(::gethostname(buf, sizeof buf - 1), 0);
  return buf;
}

TEST(IoAtomicFile, TemporaryNamesCarryHostAndPid) {
  const std::string tmp = temp_path_for("/x/ck.h5");
  EXPECT_EQ(tmp, "/x/ck.h5.tmp." + host() + "." + std::to_string(::getpid()));
}

TEST(IoAtomicFile, StaleTemporaryFilesOfDeadProcessesOnThisHostAreRemoved) {
  const std::string dir = test::scratch_dir("atomic_stale");
  const std::string path = dir + "/ck.h5";
  // A pid above any pid_max (2^22) belongs to no process.
  const std::string dead = path + ".tmp." + host() + ".2147483000";
  const std::string dead_old_style = path + ".tmp.2147483001";
  const std::string alive = path + ".tmp." + host() + "." + std::to_string(::getppid());
  const std::string other_host = path + ".tmp.some-other-node.2147483000";
  const std::string other_file = dir + "/other.h5.tmp." + host() + ".2147483000";
  for (const auto& f : {dead, dead_old_style, alive, other_host, other_file}) touch(f);

  EXPECT_EQ(remove_stale_temp_files(path), 2);
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_FALSE(fs::exists(dead_old_style));
  EXPECT_TRUE(fs::exists(alive)) << "a live process's temporary file was removed";
  EXPECT_TRUE(fs::exists(other_host)) << "another node's temporary file was removed";
  EXPECT_TRUE(fs::exists(other_file)) << "another output's temporary file was removed";

  // check_output_path (start-up) and write_atomically clean up the same way.
  touch(dead);
  check_output_path(path, false, "checkpoint");
  EXPECT_FALSE(fs::exists(dead));
  touch(dead);
  write_atomically(path, false, "checkpoint", [](const std::string& tmp) { touch(tmp); });
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(path));
  EXPECT_FALSE(fs::exists(temp_path_for(path)));
}

// A link that reaches no file is a file the run did not make: refused unless --overwrite (which
// replaces the link, never a file it might come to name).
TEST(IoAtomicFile, SymbolicLinksToNothingAreRefusedAsOutputs) {
  const std::string dir = test::scratch_dir("atomic_links");
  const std::string dangling = dir + "/r.h5", loop = dir + "/a.h5", target = dir + "/t.h5";
  fs::create_symlink("missing.h5", dangling);
  fs::create_symlink("b.h5", loop);
  fs::create_symlink("a.h5", dir + "/b.h5");
  fs::create_symlink("t.h5", dir + "/ok.h5");
  touch(target);
  EXPECT_EQ(broken_link(dangling), "a symbolic link to 'missing.h5', which does not exist");
  EXPECT_NE(broken_link(loop).find("loop"), std::string::npos);
  EXPECT_EQ(broken_link(dir + "/ok.h5"), "");
  EXPECT_EQ(broken_link(target), "");
  EXPECT_EQ(broken_link(dir + "/none.h5"), "");
  for (const auto& path : {dangling, loop}) {
    const std::string msg = test::error_of([&] { check_output_path(path, false, "results file"); });
    EXPECT_NE(msg.find("symbolic link"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--overwrite"), std::string::npos) << msg;
    check_output_path(path, true, "results file");
  }
  write_atomically(dangling, true, "results file", [](const std::string& tmp) { touch(tmp); });
  EXPECT_FALSE(fs::is_symlink(dangling));
  EXPECT_FALSE(fs::exists(dir + "/missing.h5"));
}

}  // namespace
}  // namespace pt::io
