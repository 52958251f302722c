#include "core/fault_injection.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <sstream>
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

std::vector<Fault> parse(const std::string& spec) {
  std::vector<Fault> faults;
  for (const std::string& entry : split(spec, ';')) {
    if (entry.empty()) continue;
    const std::vector<std::string> f = split(entry, ':');
    const std::string bad = "PARATRAIN_FAULT: cannot read '" + entry +
                            "' (nan-grad:STEP:PARAM, pause-in-checkpoint:SECONDS, pause-in-start-up:SECONDS or "
                            "signal:STEP:SIGTERM|SIGINT|SIGUSR1|SIGHUP)";
    Fault fault;
    fault.kind = f[0];
    try {
      if (f[0] == "nan-grad" && f.size() == 3) {
        fault.step = std::stoll(f[1]);
        fault.param = f[2];
      } else if ((f[0] == "pause-in-checkpoint" || f[0] == "pause-in-start-up") && f.size() == 2) {
        fault.seconds = std::stod(f[1]);
      } else if (f[0] == "signal" && f.size() == 3) {
        fault.step = std::stoll(f[1]);
        for (int sig : {SIGTERM, SIGINT, SIGUSR1, SIGHUP})
          if (f[2] == interrupt::signal_name(sig)) fault.signal = sig;
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

void pause_if_asked(const std::string& kind, const std::string& what) {
  const Fault* f = find(kind);
  if (!f) return;
  const std::string line =
      "paratrain: fault injection: " + kind + " for " + std::to_string(f->seconds) + " s in " + what + "\n";
  if (::write(2, line.data(), line.size()) < 0) return;
  std::this_thread::sleep_for(std::chrono::duration<double>(f->seconds));
}

}  // namespace pt::fault
