// c10_npu::getCurrentNPUStream(), as torch_npu declares it.
#ifndef OPBOT_STUB_NPU_STREAM_H
#define OPBOT_STUB_NPU_STREAM_H

#include <cstdint>

#include "acl/acl.h"

namespace c10_npu {

// Whether the last stream() call emptied torch_npu's task queue first (need_empty): a
// launch on a stream taken with need_empty=false can overtake queued ops.
inline bool& opbot_stream_emptied_queue()
{
    static bool emptied = false;
    return emptied;
}

class NPUStream {
public:
    aclrtStream stream(const bool need_empty = true) const
    {
        opbot_stream_emptied_queue() = need_empty;
        return nullptr;
    }
};

inline NPUStream getCurrentNPUStream(int8_t device_index = -1)
{
    (void)device_index;
    return NPUStream();
}

}  // namespace c10_npu

#endif  // OPBOT_STUB_NPU_STREAM_H
