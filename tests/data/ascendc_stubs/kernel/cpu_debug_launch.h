// ASC CPU-debug mode (cpu_debug_launch.h) over the kernel_operator.h CPU model.
// The test rewrites `kernel<<<numBlocks, dynUBufSize, stream>>>(args)` into
// `opbot_stub::Launch(numBlocks, dynUBufSize, stream, kernel, args)` before compiling.
#ifndef OPBOT_STUB_CPU_DEBUG_LAUNCH_H
#define OPBOT_STUB_CPU_DEBUG_LAUNCH_H

#include "opbot_launch.h"

#endif  // OPBOT_STUB_CPU_DEBUG_LAUNCH_H
