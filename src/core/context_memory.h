#pragma once
// The device memory a Context holds for its whole life (core/context.cpp), in one place for the
// context and for `paratrain plan`, which counts it as workspace.
#include <cstddef>

namespace pt {

// cuBLASLt's workspace: NVIDIA's recommendation for Hopper, 32 MiB.
constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;

}  // namespace pt
