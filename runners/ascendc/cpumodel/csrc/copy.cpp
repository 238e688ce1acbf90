// Data movement between GM and UB: bursts of contiguous bytes with gaps between them on
// either side. The *_align_* forms (DataCopyPad) count burst lengths and GM gaps in bytes
// and UB gaps in 32-byte blocks, and round each UB row up to 32 bytes, optionally padded;
// the plain forms (DataCopy) count everything in 32-byte blocks.
#include <cstring>

#include "model_state.h"
#include "opbot_cpumodel.h"

namespace {

constexpr uint64_t BLOCK_BYTES = 32;

uint64_t RoundUp(uint64_t bytes) { return (bytes + BLOCK_BYTES - 1) / BLOCK_BYTES * BLOCK_BYTES; }

// Writes `count` pad elements of `elementBytes` from the pad register at `at`.
void Pad(uint8_t* at, uint64_t count, int32_t elementBytes)
{
    const uint64_t value = opbot::State().padValue;
    for (uint64_t index = 0; index < count; ++index) {
        std::memcpy(at + index * elementBytes, &value, elementBytes);
    }
}

}  // namespace

extern "C" int64_t opbot_copy_pad(int32_t toGm, int32_t elementBytes, void* dst, const void* src,
                                  const uint64_t* fields, int32_t count)
{
    // (sid, nBurst, lenBurst bytes, leftPad elements, rightPad elements, srcGap, dstGap)
    if (count < 7) {
        opbot::Fail("unsupported: %s with %d fields", toGm ? "copy_ubuf_to_gm_align" : "copy_gm_to_ubuf_align", count);
    }
    const uint64_t bursts = fields[1];
    const uint64_t length = fields[2];
    const uint64_t left = fields[3];
    const uint64_t right = fields[4];
    const uint64_t srcGap = fields[5];
    const uint64_t dstGap = fields[6];
    auto* out = static_cast<uint8_t*>(dst);
    const auto* in = static_cast<const uint8_t*>(src);
    for (uint64_t burst = 0; burst < bursts; ++burst) {
        if (toGm) {
            // UB rows are 32-byte aligned; GM rows are packed with byte gaps.
            std::memmove(out, in, length);
            in += RoundUp(length) + srcGap * BLOCK_BYTES;
            out += length + dstGap;
        } else {
            const uint64_t leftBytes = left * elementBytes;
            const uint64_t rightBytes = right * elementBytes;
            if (left > 0) {
                Pad(out, left, elementBytes);
            }
            std::memmove(out + leftBytes, in, length);
            if (right > 0) {
                Pad(out + leftBytes + length, right, elementBytes);
            }
            in += length + srcGap;
            out += RoundUp(leftBytes + length + rightBytes) + dstGap * BLOCK_BYTES;
        }
    }
    return 0;
}

extern "C" int64_t opbot_copy_blocks(void* dst, const void* src, const uint64_t* fields, int32_t count)
{
    // (sid, nBurst, lenBurst, srcStride, dstStride), all in 32-byte blocks.
    if (count < 5) {
        opbot::Fail("unsupported: block copy with %d fields", count);
    }
    const uint64_t bursts = fields[1];
    const uint64_t length = fields[2] * BLOCK_BYTES;
    auto* out = static_cast<uint8_t*>(dst);
    const auto* in = static_cast<const uint8_t*>(src);
    for (uint64_t burst = 0; burst < bursts; ++burst) {
        std::memmove(out, in, length);
        in += length + fields[3] * BLOCK_BYTES;
        out += length + fields[4] * BLOCK_BYTES;
    }
    return 0;
}
