#include "core/build_info.h"

#include <unistd.h>

#include <sys/stat.h>
#include <climits>

#include "paratrain/build_config.h"  // generated at configure time (CMakeLists.txt)
#include "paratrain/git_revision.h"  // generated at build time (cmake/git_revision.cmake)

namespace pt {

namespace {
std::string g_invocation;

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The directory of the running executable, from /proc/self/exe ("" if unreadable).
std::string executable_dir() {
  char buf[PATH_MAX + 1] = {0};
  const ssize_t n = ::readlink("/proc/self/exe", buf, PATH_MAX);
  if (n <= 0) return "";
  std::string path(buf, static_cast<size_t>(n));
  return path.substr(0, path.find_last_of('/'));
}
}  // namespace

const char* program_version() { return PARATRAIN_VERSION; }
const char* git_revision() { return PARATRAIN_GIT_REV; }

std::string sample_data_path() {
  std::string installed = executable_dir() + "/../share/paratrain/data/sample_tokens.npy";  // returned by move
  if (is_file(installed)) return installed;
  return std::string(PARATRAIN_SOURCE_DIR) + "/data/sample_tokens.npy";
}

const std::string& invocation() { return g_invocation; }

void set_invocation(int argc, char** argv) {
  g_invocation.clear();
  for (int i = 0; i < argc; ++i) {
    if (i) g_invocation += ' ';
    g_invocation += argv[i];
  }
}

}  // namespace pt
