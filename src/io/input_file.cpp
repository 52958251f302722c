#include "io/input_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "io/atomic_file.h"

namespace pt::io {

void require_regular_file(const std::string& path, const std::string& what, const std::string& noun) {
  struct stat st {};
  PT_CHECK(::stat(path.c_str(), &st) == 0, what + ": cannot open: " + std::strerror(errno));
  PT_CHECK(S_ISREG(st.st_mode), what + ": is " + file_kind(st.st_mode) + "; " + noun + " must be a regular file");
}

std::string read_text_file(const std::string& path, const std::string& what) {
  require_regular_file(path, what, "it");
  std::ifstream in(path, std::ios::binary);
  PT_CHECK(in, what + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  PT_CHECK(!in.bad(), what + ": cannot read");
  return ss.str();
}

}  // namespace pt::io
