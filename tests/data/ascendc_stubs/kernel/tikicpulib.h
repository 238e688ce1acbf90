// Legacy CPU-debug entry points (tikicpulib) over the kernel_operator.h CPU model.
#ifndef OPBOT_STUB_TIKICPULIB_H
#define OPBOT_STUB_TIKICPULIB_H

#include <cstdlib>
#include <cstring>

#include "kernel_operator.h"

enum class KernelMode { MIX_MODE, AIV_MODE, AIC_MODE };

namespace AscendC {

inline void* GmAlloc(size_t size)
{
    void* data = std::aligned_alloc(64, (size + 63) / 64 * 64);
    opbot_stub::Check(data != nullptr, "GmAlloc failed");
    std::memset(data, 0xFF, (size + 63) / 64 * 64);
    return data;
}

inline void GmFree(void* data) { std::free(data); }

inline void SetKernelMode(KernelMode mode) { (void)mode; }

}  // namespace AscendC

// Runs every block of the kernel, one after another.
#define ICPU_RUN_KF(func, blockDim, ...) \
    opbot_stub::RunBlocks(static_cast<uint32_t>(blockDim), [&]() { func(__VA_ARGS__); })

#endif  // OPBOT_STUB_TIKICPULIB_H
