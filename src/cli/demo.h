#pragma once
// `paratrain demo accumulation`: why mixed precision keeps fp32 accumulators. Adds one value
// many times with fp32 and fp16 accumulators and addends, fp16 emulated exactly on the host.
#include <cstdint>
#include <string>
#include <vector>

namespace pt::cli {

struct AccumulationCase {
  std::string name;         // "fp32", "fp16", "fp16 into fp32", "fp16 cast to fp32"
  std::string accumulator;  // type of the running sum
  std::string addend;       // type of the value added
  double sum;               // final sum (exactly representable in the accumulator's type)
};

// The four cases of the experiment for `count` additions of `value` (the course uses 1000
// and 0.01): fp32 += fp32; fp16 += fp16 (rounded to fp16 after every add); fp32 += fp16
// (PyTorch promotes the fp16 operand); fp32 += float(fp16) (the explicit cast).
std::vector<AccumulationCase> accumulation_experiment(int64_t count, float value);

}  // namespace pt::cli
