#include "core/fault_injection.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/interrupt.h"

namespace pt::fault {

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, sep);) out.push_back(item);
  return out;
}

// The whole word as a number (std::stoll and std::stod stop at the first stray character:
// "2x" would be 2); throws std::invalid_argument otherwise.
int64_t whole_int(const std::string& w) {
  size_t used = 0;
  const long long v = std::stoll(w, &used);
  if (used != w.size()) throw std::invalid_argument(w);
  return v;
}
double whole_number(const std::string& w) {
  size_t used = 0;
  const double v = std::stod(w, &used);
  if (used != w.size()) throw std::invalid_argument(w);
  return v;
}

std::vector<Fault> parse(const std::string& spec) {
  std::vector<Fault> faults;
  for (const std::string& entry : split(spec, ';')) {
    if (entry.empty()) continue;
    if (entry.rfind("disk-full:", 0) == 0 && entry.size() > 10) {  // a path may hold ':'
      Fault fault;
      fault.kind = "disk-full";
      fault.path = entry.substr(10);
      faults.push_back(fault);
      continue;
    }
    const std::vector<std::string> f = split(entry, ':');
    const std::string bad = "PARATRAIN_FAULT: cannot read '" + entry +
                            "' (nan-grad:STEP:PARAM, pause-in-checkpoint:SECONDS, pause-in-start-up:SECONDS, "
                            "pause-before-pointer:SECONDS, "
                            "signal:STEP:SIGTERM|SIGINT|SIGUSR1|SIGHUP|SIGSTOP or disk-full:PATH)";
    Fault fault;
    fault.kind = f[0];
    try {
      if (f[0] == "nan-grad" && f.size() == 3) {
        fault.step = whole_int(f[1]);
        fault.param = f[2];
      } else if ((f[0] == "pause-in-checkpoint" || f[0] == "pause-in-start-up" || f[0] == "pause-before-pointer") &&
                 f.size() == 2) {
        fault.seconds = whole_number(f[1]);
      } else if (f[0] == "signal" && f.size() == 3) {
        fault.step = whole_int(f[1]);
        for (int sig : {SIGTERM, SIGINT, SIGUSR1, SIGHUP})
          if (f[2] == interrupt::signal_name(sig)) fault.signal = sig;
        if (f[2] == "SIGSTOP") fault.signal = SIGSTOP;
        if (fault.signal == 0) PT_FAIL(bad);
      } else {
        PT_FAIL(bad);
      }
    } catch (const std::logic_error&) {
      PT_FAIL(bad);
    }
    faults.push_back(fault);
  }
  return faults;
}

const std::vector<Fault>& faults() {
  static const std::vector<Fault> table = [] {
    const char* spec = std::getenv("PARATRAIN_FAULT");
    return spec ? parse(spec) : std::vector<Fault>{};
  }();
  return table;
}

}  // namespace

const Fault* find(const std::string& kind) {
  for (const Fault& f : faults())
    if (f.kind == kind) return &f;
  return nullptr;
}

bool disk_full(const std::string& file) {
  for (const Fault& f : faults())
    if (f.kind == "disk-full" && (file == f.path || file.rfind(f.path + ".tmp.", 0) == 0)) return true;
  return false;
}

int make_disk_full(int fd) {
  const int full = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  if (full < 0) return errno;
  const int err = ::dup2(full, fd) < 0 ? errno : 0;
  ::close(full);
  return err;
}

void pause_if_asked(const std::string& kind, const std::string& what) {
  const Fault* f = find(kind);
  if (!f) return;
  const std::string line =
      "paratrain: fault injection: " + kind + " for " + std::to_string(f->seconds) + " s in " + what + "\n";
  if (::write(2, line.data(), line.size()) < 0) return;
  std::this_thread::sleep_for(std::chrono::duration<double>(f->seconds));
}

}  // namespace pt::fault
