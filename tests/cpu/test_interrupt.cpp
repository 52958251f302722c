// The signals every command shares (core/interrupt.h, issue 47): SIGHUP is a stop signal, and
// SIGPIPE no longer kills the process: a write to a pipe whose reader has gone fails with EPIPE.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include "core/interrupt.h"

namespace pt {
namespace {

TEST(Interrupt, SighupIsAStopSignalAndAClosedPipeIsAnErrorNotADeath) {
  EXPECT_EQ(interrupt::signal_name(SIGHUP), "SIGHUP");
  interrupt::install(false);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ::close(fds[0]);  // the reader has gone
  errno = 0;
  EXPECT_EQ(::write(fds[1], "x", 1), -1);  // with SIGPIPE at its default, the process would die here
  EXPECT_EQ(errno, EPIPE);
  ::close(fds[1]);
}

}  // namespace
}  // namespace pt
