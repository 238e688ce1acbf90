// Mask and control registers of the modelled vector unit, and the queries the open API
// checkers make of them (model/model_factory_mask.h).
#include "model_state.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>

namespace opbot {

// The counter-mode bit of the CTRL register (SetMaskCount/SetMaskNorm flip it).
constexpr uint64_t CTRL_COUNTER_BIT = 1ULL << 56;

VectorState& State()
{
    static VectorState state;
    return state;
}

void ResetVectorState() { State() = VectorState(); }

void Fail(const char* format, ...)
{
    std::va_list args;
    va_start(args, format);
    std::fputs("[ERROR] opbot cpumodel: ", stdout);
    std::vprintf(format, args);
    std::fputs("\n", stdout);
    va_end(args);
    std::fflush(stdout);
    std::abort();
}

}  // namespace opbot

void set_vector_mask(uint64_t high, uint64_t low)
{
    opbot::State().maskHigh = high;
    opbot::State().maskLow = low;
}

void set_mask_count()
{
    opbot::State().counterMode = true;
    opbot::State().ctrl |= opbot::CTRL_COUNTER_BIT;
}

void set_mask_norm()
{
    opbot::State().counterMode = false;
    opbot::State().ctrl &= ~opbot::CTRL_COUNTER_BIT;
}

void set_mov_pad_val(uint64_t value) { opbot::State().padValue = value; }

int64_t get_ctrl() { return static_cast<int64_t>(opbot::State().ctrl); }

void set_ctrl(uint64_t value)
{
    opbot::State().ctrl = value;
    opbot::State().counterMode = (value & opbot::CTRL_COUNTER_BIT) != 0;
}

uint64_t ModelFactoryGetMaskHigh() { return opbot::State().maskHigh; }

uint64_t ModelFactoryGetMaskLow() { return opbot::State().maskLow; }

int32_t ModelFactoryGetMaskMode() { return opbot::State().counterMode ? 1 : 0; }
