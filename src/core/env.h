#pragma once
// The environment variables paratrain reads (PARATRAIN_*, PT_CHAINED_LAUNCH, SLURM_*), each
// through one of these readers: a malformed value is an error naming the variable and the value,
// never ignored and never a bare "stoll". An unset or empty variable is absent.
#include <cstdint>
#include <optional>
#include <string>

namespace pt::env {

std::optional<std::string> text(const char* name);
// The whole value as a decimal integer in [min, max].
std::optional<int64_t> integer(const char* name, int64_t min, int64_t max);
// The whole value as a finite number > 0 (`unit` names what it counts in the error: "seconds").
std::optional<double> positive_number(const char* name, const char* unit);
// One of two words: `yes` gives true, `no` false (e.g. "1"/"0", "on"/"off").
std::optional<bool> choice(const char* name, const char* yes, const char* no);

}  // namespace pt::env
