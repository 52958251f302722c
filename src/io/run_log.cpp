#include "io/run_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <iostream>

#include "core/error.h"
#include "core/fault_injection.h"
#include "io/atomic_file.h"

namespace pt::io {

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::string utc_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf, static_cast<int>(ms));
  return out;
}

void append_json_string(std::string& out, const std::string& s) {
  out += '"';
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

}  // namespace

std::string json_line(const std::string& event, const LogFields& fields) {
  std::string out = "{\"event\": ";
  append_json_string(out, event);
  for (const auto& [key, value] : fields) {
    out += ", ";
    append_json_string(out, key);
    out += ": ";
    if (const auto* i = std::get_if<int64_t>(&value)) {
      out += std::to_string(*i);
    } else if (const auto* d = std::get_if<double>(&value)) {
      if (std::isfinite(*d)) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.17g", *d);
        out += buf;
      } else {
        out += "null";
      }
    } else if (const auto* b = std::get_if<bool>(&value)) {
      out += *b ? "true" : "false";
    } else {
      append_json_string(out, std::get<std::string>(value));
    }
  }
  return out + "}";
}

std::string hms(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--";
  const auto s = static_cast<long long>(std::llround(seconds));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, (s / 60) % 60, s % 60);
  return buf;
}

RunLog::RunLog(const LogOptions& o, bool root) : root_(root), jsonl_(o.format == "jsonl"), t0_(now_s()) {
  PT_CHECK(o.format == "text" || o.format == "jsonl", "--log-format must be text or jsonl, not '" + o.format + "'");
  if (!root_ || o.file.empty()) return;
  // Checked now, created (or appended to) only by the first event: a run refused at start-up
  // leaves no log behind.
  path_ = o.file;
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0) {
    PT_CHECK(S_ISREG(st.st_mode),
             "--log-file '" + path_ + "' is " + io::file_kind(st.st_mode) + "; the log must be a regular file");
    const int fd = ::open(path_.c_str(), O_RDWR | O_APPEND | O_CLOEXEC);
    PT_CHECK(fd >= 0, "--log-file '" + path_ + "': cannot open it for appending: " + std::strerror(errno));
    // Only a log is appended to: an HDF5 file, a token file or any other file is left alone.
    char first = '{';
    const ssize_t n = ::pread(fd, &first, 1, 0);
    ::close(fd);
    PT_CHECK(n <= 0 || first == '{', "--log-file '" + path_ +
                                         "' exists and is not a progress log (its JSON lines start with '{'): give "
                                         "a new file, or the log of an earlier run to continue");
  } else {
    const std::string link = io::broken_link(path_);
    PT_CHECK(link.empty(), "--log-file '" + path_ + "' is " + link + "; give the file itself");
    io::check_output_path(path_, false, "--log-file");
  }
}

int RunLog::file() {
  if (fd_ < 0 && !path_.empty()) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    PT_CHECK(fd_ >= 0, "--log-file '" + path_ + "': cannot open it for appending: " + std::strerror(errno));
    if (fault::disk_full(path_)) {  // PARATRAIN_FAULT=disk-full:PATH only
      const int err = fault::make_disk_full(fd_);
      PT_CHECK(err == 0, std::string("PARATRAIN_FAULT disk-full: ") + std::strerror(err));
    }
  }
  return fd_;
}

RunLog::~RunLog() {
  if (fd_ >= 0) ::close(fd_);
}

double RunLog::elapsed_s() const { return now_s() - t0_; }

void RunLog::event(const std::string& event, LogFields fields, const std::string& text) {
  if (!root_) return;
  fields.insert(fields.begin(), {{"time", utc_now()}, {"elapsed_s", elapsed_s()}});
  const std::string line = json_line(event, fields);
  if (jsonl_)
    std::cout << line << std::endl;
  else if (!text.empty())
    std::cout << text << std::endl;
  if (!std::cout && stdout_errno_ == 0) stdout_errno_ = errno ? errno : EIO;  // the write's own errno
  if (file() >= 0) {
    // A log that cannot be written (a full disk) ends the run with an error, once: the events
    // after it (the run's end) go to stdout only.
    const std::string text_line = line + "\n";
    for (size_t done = 0; done < text_line.size();) {
      const ssize_t n = ::write(fd_, text_line.data() + done, text_line.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const std::string why = n < 0 ? std::strerror(errno) : "nothing written";
        ::close(fd_);
        fd_ = -1;
        const std::string path = path_;
        path_.clear();
        PT_FAIL("--log-file '" + path + "': cannot write: " + why);
      }
      done += static_cast<size_t>(n);
    }
  }
}

std::string RunLog::stdout_failure() {
  if (root_ && stdout_errno_ == 0) {
    errno = 0;
    const bool flushed = std::fflush(stdout) == 0;
    if (!flushed || std::ferror(stdout) || !std::cout) stdout_errno_ = errno ? errno : EIO;
  }
  return stdout_errno_ ? std::strerror(stdout_errno_) : "";
}

Eta::Eta(int64_t first, int64_t total) : first_(first), total_(total) {}

double Eta::eta_s(double elapsed_s) const {
  if (done_ == 0) return NAN;
  return elapsed_s / static_cast<double>(done_) * static_cast<double>(remaining());
}

std::string Eta::text(double elapsed_s) const { return "elapsed " + hms(elapsed_s) + ", eta " + hms(eta_s(elapsed_s)); }

}  // namespace pt::io
