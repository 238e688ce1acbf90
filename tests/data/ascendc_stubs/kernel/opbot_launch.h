// What `<<<numBlocks, X, stream>>>` becomes in the stub checks (the test rewrites it).
// X is `l2ctrl` (nullptr) on the legacy toolchain and `dynUBufSize` (0) on ASC: the
// OPBOT_STUB_ASC macro says which one the code must pass.
#ifndef OPBOT_STUB_LAUNCH_H
#define OPBOT_STUB_LAUNCH_H

#include <cstdint>
#include <type_traits>

#include "kernel_operator.h"

namespace opbot_stub {

template <typename Second, typename Kernel, typename... Args>
void Launch(uint32_t numBlocks, Second second, void* stream, Kernel kernel, Args... args)
{
#ifdef OPBOT_STUB_ASC
    static_assert(std::is_integral<Second>::value, "ASC launches pass dynUBufSize (0) second");
#else
    static_assert(std::is_null_pointer<Second>::value || std::is_pointer<Second>::value,
                  "legacy launches pass l2ctrl (nullptr) second");
#endif
    (void)second;
    (void)stream;
    RunBlocks(numBlocks, [&]() { kernel(args...); });
}

}  // namespace opbot_stub

#endif  // OPBOT_STUB_LAUNCH_H
