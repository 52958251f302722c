#include "io/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>

#include "core/env.h"
#include "core/error.h"
#include "core/interrupt.h"

namespace pt::io {

namespace {
std::string parent_dir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}
std::string errno_text() { return std::strerror(errno); }

std::string this_host() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}
}  // namespace

const char* file_kind(unsigned mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

namespace {
// Refuses a path that exists and is not a regular file (a symbolic link is judged by what it
// points to, so a link to a regular file is fine).
void refuse_non_regular(const std::string& path, const std::string& w) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0)
    PT_CHECK(S_ISREG(st.st_mode), w + " is " + file_kind(st.st_mode) + "; only a regular file is ever replaced");
}
}  // namespace

std::string temp_path_for(const std::string& path) {
  return path + ".tmp." + this_host() + "." + std::to_string(static_cast<long>(::getpid()));
}

int remove_stale_temp_files(const std::string& path) {
  const std::string dir = parent_dir(path);
  const size_t slash = path.find_last_of('/');
  const std::string prefix = (slash == std::string::npos ? path : path.substr(slash + 1)) + ".tmp.";
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  const std::string host = this_host();
  int removed = 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    // "<host>.<pid>", or "<pid>" as earlier builds named them (same host assumed).
    const std::string rest = name.substr(prefix.size());
    const size_t dot = rest.find_last_of('.');
    const std::string pid_text = dot == std::string::npos ? rest : rest.substr(dot + 1);
    const std::string its_host = dot == std::string::npos ? host : rest.substr(0, dot);
    if (!all_digits(pid_text) || its_host != host) continue;  // another node's: its own runs clean it
    const long pid = std::stol(pid_text);
    if (pid == static_cast<long>(::getpid())) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // still running
    const std::string full = dir + "/" + name;
    struct stat st {};
    if (::lstat(full.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (::unlink(full.c_str()) == 0) {
      ++removed;
      const std::string line =
          "paratrain: removed '" + full + "', a temporary file left by a run that was killed (pid " + pid_text + ")\n";
      if (::write(2, line.data(), line.size()) < 0) break;
    }
  }
  ::closedir(d);
  return removed;
}

std::string broken_link(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode) || ::stat(path.c_str(), &st) == 0) return "";
  if (errno == ELOOP) return "a symbolic link that never reaches a file (a loop)";
  std::string target(4096, '\0');
  const ssize_t n = ::readlink(path.c_str(), target.data(), target.size());
  target.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return "a symbolic link to '" + target + "', which does not exist";
}

void check_output_path(const std::string& path, bool overwrite, const std::string& what) {
  PT_CHECK(!path.empty(), what + ": empty file name");
  const std::string w = what + " '" + path + "'";
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    refuse_non_regular(path, w);
    PT_CHECK(overwrite, w + " already exists (pass --overwrite to replace it)");
  }
  // A link that names nothing is still a file this run did not make: writing would replace it.
  const std::string link = broken_link(path);
  PT_CHECK(link.empty() || overwrite, w + " is " + link + "; not replaced (pass --overwrite to replace the link)");
  const std::string dir = parent_dir(path);
  PT_CHECK(::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode), w + ": directory '" + dir + "' does not exist");
  // Probe with a real file: permission bits alone lie (root, read-only mounts, quotas).
  const std::string probe = temp_path_for(path);
  const interrupt::TempFile guard(probe);
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  PT_CHECK(fd >= 0, w + ": cannot create files in '" + dir + "': " + errno_text());
  ::close(fd);
  ::unlink(probe.c_str());
  remove_stale_temp_files(path);
}

void write_atomically(const std::string& path, bool replace, const std::string& what,
                      const std::function<void(const std::string& tmp)>& write) {
  const std::string tmp = temp_path_for(path);
  remove_stale_temp_files(path);
  const interrupt::TempFile guard(tmp);  // removed if a signal ends the process mid-write
  try {
    write(tmp);
    refuse_non_regular(path, what + " '" + path + "'");  // it may have changed since the start
    if (replace) {
      PT_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0,
               what + " '" + path + "': cannot move the finished file into place: " + errno_text());
    } else if (::link(tmp.c_str(), path.c_str()) == 0) {
      ::unlink(tmp.c_str());
    } else {
      PT_CHECK(errno != EEXIST, what + " '" + path + "' appeared while this run was writing it; " +
                                    "not replaced (pass --overwrite to replace it)");
      // File systems without hard links: check, then rename (a small race, reported above
      // on the ones that have them).
      struct stat st {};
      PT_CHECK(::stat(path.c_str(), &st) != 0, what + " '" + path + "' already exists; not replaced");
      PT_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0,
               what + " '" + path + "': cannot move the finished file into place: " + errno_text());
    }
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
}

namespace {

std::string env_or_empty(const char* name) { return env::text(name).value_or(""); }

// Who holds a lock: "key=value" lines the holder wrote into the lock file.
std::map<std::string, std::string> read_holder(int fd) {
  std::map<std::string, std::string> holder;
  char buf[1024] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string text(buf, n > 0 ? static_cast<size_t>(n) : 0);
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find('\n', at), text.size()), eq = text.find('=', at);
    if (eq < end) holder[text.substr(at, eq - at)] = text.substr(eq + 1, end - eq - 1);
    at = end + 1;
  }
  return holder;
}

// A lock held for an earlier run of this Slurm job: the job was requeued (its restart count
// differs), so that run has ended, wherever its lock still lingers.
bool earlier_run_of_this_job(std::map<std::string, std::string>& holder) {
  const std::string job = env_or_empty("SLURM_JOB_ID");
  return !job.empty() && holder["slurm_job_id"] == job &&
         holder["slurm_restart_count"] != env_or_empty("SLURM_RESTART_COUNT");
}

}  // namespace

OutputLock::OutputLock(const std::string& path, const std::string& what) : lock_path_(path + ".lock") {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return;
    struct flock whole {};
    whole.l_type = F_WRLCK;
    whole.l_whence = SEEK_SET;
    int rc = ::fcntl(fd, F_OFD_SETLK, &whole);
    if (rc != 0 && errno == EINVAL) rc = ::fcntl(fd, F_SETLK, &whole);  // a kernel before OFD locks
    const int err = rc == 0 ? 0 : errno;
    if (err != 0 && err != EAGAIN && err != EACCES) {  // this file system has no locks
      ::close(fd);
      ::unlink(lock_path_.c_str());
      return;
    }
    if (err != 0) {
      std::map<std::string, std::string> holder = read_holder(fd);
      ::close(fd);
      PT_CHECK(earlier_run_of_this_job(holder), what + " '" + path + "' is being written by another run (pid " +
                                                    holder["pid"] + " on " + holder["host"] + "; lock file '" +
                                                    lock_path_ +
                                                    "'): give this run another file, or wait for that run to end");
      return;  // that run is over: go on without the lock
    }
    // Locked, but the file may no longer be the one at lock_path_: its last holder removes it.
    struct stat ours {
    }, named{};
    if (::fstat(fd, &ours) != 0 || ::stat(lock_path_.c_str(), &named) != 0 || ours.st_ino != named.st_ino ||
        ours.st_dev != named.st_dev) {
      ::close(fd);
      continue;
    }
    const std::string holder = "pid=" + std::to_string(static_cast<long>(::getpid())) + "\nhost=" + this_host() +
                               "\nslurm_job_id=" + env_or_empty("SLURM_JOB_ID") +
                               "\nslurm_restart_count=" + env_or_empty("SLURM_RESTART_COUNT") + "\n";
    // For the error of a run that finds the file locked; the lock holds without it too.
    const bool described = ::ftruncate(fd, 0) == 0 && ::pwrite(fd, holder.data(), holder.size(), 0) > 0;
    (void)described;
    fd_ = fd;
    removed_on_signal_ = std::make_unique<interrupt::TempFile>(lock_path_);
    return;
  }
}

OutputLock::~OutputLock() {
  if (fd_ < 0) return;
  ::unlink(lock_path_.c_str());  // before the lock goes: a run waiting on this file tries again
  ::close(fd_);
}

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  PT_CHECK(out.good(), "cannot write '" + path + "': " + std::strerror(errno));
}

}  // namespace pt::io
