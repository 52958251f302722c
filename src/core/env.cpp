#include "core/env.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "core/error.h"

namespace pt::env {

namespace {
[[noreturn]] void malformed(const char* name, const std::string& value, const std::string& want) {
  PT_FAIL(std::string("the environment variable ") + name + "='" + value + "' is malformed: it must be " + want +
          " (or unset)");
}
}  // namespace

std::optional<std::string> text(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

std::optional<int64_t> integer(const char* name, int64_t min, int64_t max) {
  const auto v = text(name);
  if (!v) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(v->c_str(), &end, 10);
  if (end == v->c_str() || *end != '\0' || errno == ERANGE || n < min || n > max)
    malformed(name, *v, "an integer from " + std::to_string(min) + " to " + std::to_string(max));
  return static_cast<int64_t>(n);
}

std::optional<double> positive_number(const char* name, const char* unit) {
  const auto v = text(name);
  if (!v) return std::nullopt;
  char* end = nullptr;
  const double x = std::strtod(v->c_str(), &end);
  if (end == v->c_str() || *end != '\0' || !std::isfinite(x) || !(x > 0))
    malformed(name, *v, std::string("a positive number of ") + unit);
  return x;
}

std::optional<bool> choice(const char* name, const char* yes, const char* no) {
  const auto v = text(name);
  if (!v) return std::nullopt;
  if (*v == yes) return true;
  if (*v == no) return false;
  malformed(name, *v, std::string(yes) + " or " + no);
}

}  // namespace pt::env
