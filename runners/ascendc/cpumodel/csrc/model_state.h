// The per-block state of the modelled vector unit: mask registers, mask mode, pad value.
// Each block is its own process, so plain globals are per block.
#ifndef OPBOT_CPUMODEL_MODEL_STATE_H
#define OPBOT_CPUMODEL_MODEL_STATE_H

#include <cstdint>

namespace opbot {

struct VectorState {
    uint64_t maskHigh = ~0ULL;
    uint64_t maskLow = ~0ULL;
    bool counterMode = false;
    uint64_t padValue = 0;
    uint64_t ctrl = 0;
};

VectorState& State();
void ResetVectorState();

// Stop the block with a message the run's log parser reports (an [ERROR] line, then abort:
// the parent then sees a block without its [SUCCESS] line).
[[noreturn]] void Fail(const char* format, ...);

}  // namespace opbot

#endif  // OPBOT_CPUMODEL_MODEL_STATE_H
