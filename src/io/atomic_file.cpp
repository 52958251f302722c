#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace pt::io {

namespace {
std::string parent_dir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}
std::string errno_text() { return std::strerror(errno); }
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
  return path + ".tmp." + std::to_string(static_cast<long>(::getpid()));
}

void check_output_path(const std::string& path, bool overwrite, const std::string& what) {
  PT_CHECK(!path.empty(), what + ": empty file name");
  const std::string w = what + " '" + path + "'";
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    refuse_non_regular(path, w);
    PT_CHECK(overwrite, w + " already exists (pass --overwrite to replace it)");
  }
  const std::string dir = parent_dir(path);
  PT_CHECK(::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode),
           w + ": directory '" + dir + "' does not exist");
  // Probe with a real file: permission bits alone lie (root, read-only mounts, quotas).
  const std::string probe = temp_path_for(path);
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  PT_CHECK(fd >= 0, w + ": cannot create files in '" + dir + "': " + errno_text());
  ::close(fd);
  ::unlink(probe.c_str());
}

void write_atomically(const std::string& path, bool replace, const std::string& what,
                      const std::function<void(const std::string& tmp)>& write) {
  const std::string tmp = temp_path_for(path);
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

}  // namespace pt::io
