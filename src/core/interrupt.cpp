#include "core/interrupt.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace pt::interrupt {

namespace {

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGUSR1, SIGHUP};
constexpr size_t kPathMax = 4096;

std::atomic<int> g_requested{0};
std::atomic<int> g_graceful{0};  // live GracefulScopes
bool g_announce = false;         // rank 0 says what it does with a signal

// Temporary files, readable from the handler: a slot is 0 free, 1 being filled, 2 registered.
std::atomic<int> g_slot_state[kMaxTempFiles];
char g_slot_path[kMaxTempFiles][kPathMax];

const char* name_of(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    case SIGHUP: return "SIGHUP";
    default: return "a signal";
  }
}

// Async-signal-safe: builds one line in a local buffer and writes it in one call.
void say(int sig, const char* what) {
  if (!g_announce) return;
  char line[256];
  size_t n = 0;
  for (const char* part : {"paratrain: ", name_of(sig), what, "\n"})
    for (const char* c = part; *c && n < sizeof line; ++c) line[n++] = *c;
  ssize_t ignored = ::write(2, line, n);
  (void)ignored;
}

void on_signal(int sig) {
  int none = 0;
  if (g_graceful.load() > 0 && g_requested.compare_exchange_strong(none, sig)) {
    say(sig, ": stopping at the end of this step (send it again to stop at once)");
    return;
  }
  for (int i = 0; i < kMaxTempFiles; ++i)
    if (g_slot_state[i].load() == 2) ::unlink(g_slot_path[i]);
  say(sig, ": stopped at once");
  ::_exit(128 + sig);
}

}  // namespace

void install(bool announce) {
  g_announce = announce;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // file writes in progress go on; the loop polls requested()
  for (int sig : kStopSignals) {
    // A SIGHUP ignored when the process started (nohup) stays ignored: closing the terminal is
    // then meant not to stop the run.
    struct sigaction old {};
    if (sig == SIGHUP && ::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    ::sigaction(sig, &sa, nullptr);
  }
  ::signal(SIGPIPE, SIG_IGN);
}

int requested() { return g_requested.load(); }

std::string signal_name(int sig) {
  for (int s : kStopSignals)
    if (s == sig) return name_of(sig);
  return "signal " + std::to_string(sig);
}

void reset_for_test() { g_requested.store(0); }

GracefulScope::GracefulScope() { g_graceful.fetch_add(1); }
GracefulScope::~GracefulScope() { g_graceful.fetch_sub(1); }

TempFile::TempFile(const std::string& path) {
  if (path.size() >= kPathMax) return;
  for (int i = 0; i < kMaxTempFiles; ++i) {
    int free_slot = 0;
    if (!g_slot_state[i].compare_exchange_strong(free_slot, 1)) continue;
    std::memcpy(g_slot_path[i], path.c_str(), path.size() + 1);
    g_slot_state[i].store(2);
    slot_ = i;
    return;
  }
}

TempFile::~TempFile() {
  if (slot_ >= 0) g_slot_state[slot_].store(0);
}

}  // namespace pt::interrupt
