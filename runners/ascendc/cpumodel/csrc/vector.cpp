// The vector unit: elementwise instructions over repeats of 256 bytes, each repeat eight
// 32-byte blocks, with block and repeat strides per operand (in 32-byte blocks) and the
// mask register selecting elements (normal mode: a bit per element of a repeat; counter
// mode: the first N elements of the whole instruction, the repeat count ignored).
#include <cmath>
#include <cstring>
#include <functional>

#include "convert.h"
#include "model_state.h"
#include "opbot_cpumodel.h"

namespace opbot {
namespace {

constexpr uint64_t REPEAT_BYTES = 256;
constexpr uint64_t BLOCK_BYTES = 32;

int ElementBytes(int32_t dtype)
{
    switch (dtype) {
        case DT_F32:
        case DT_S32:
        case DT_U32:
            return 4;
        case DT_S8:
        case DT_U8:
            return 1;
        case DT_NONE:
            return 0;
        default:
            return 2;
    }
}

// Where element `index` of repeat `repeat` of one operand lives.
struct Operand {
    uint8_t* base;
    int bytes;
    uint64_t blockStride;
    uint64_t repeatStride;

    uint8_t* At(uint64_t repeat, uint64_t index) const
    {
        const uint64_t offset = index * bytes;
        return base + repeat * repeatStride * BLOCK_BYTES + (offset / BLOCK_BYTES) * blockStride * BLOCK_BYTES +
               offset % BLOCK_BYTES;
    }
};

bool MaskBit(uint64_t index)
{
    const VectorState& state = State();
    return index < 64 ? ((state.maskLow >> index) & 1ULL) != 0 : ((state.maskHigh >> (index - 64)) & 1ULL) != 0;
}

// Calls `visit(repeat, index)` for every element the instruction touches. Each repeat's
// results are buffered by the callers, so in-place operands read before they are written.
void ForEachRepeat(uint64_t perRepeat, uint64_t repeats,
                   const std::function<void(uint64_t, uint64_t, uint64_t)>& visitRepeat)
{
    const VectorState& state = State();
    if (state.counterMode) {
        const uint64_t count = state.maskLow;
        for (uint64_t start = 0, repeat = 0; start < count; start += perRepeat, ++repeat) {
            visitRepeat(repeat, 0, count - start < perRepeat ? count - start : perRepeat);
        }
        return;
    }
    for (uint64_t repeat = 0; repeat < repeats; ++repeat) {
        visitRepeat(repeat, 0, perRepeat);
    }
}

bool Active(uint64_t index)
{
    return State().counterMode || MaskBit(index);
}

// Element values as doubles (exact for every modelled type) and back.
double Load(const uint8_t* at, int32_t dtype)
{
    switch (dtype) {
        case DT_F16: {
            uint16_t bits = 0;
            std::memcpy(&bits, at, 2);
            return HalfToFloat(bits);
        }
        case DT_F32: {
            float value = 0;
            std::memcpy(&value, at, 4);
            return value;
        }
        case DT_S16: {
            int16_t value = 0;
            std::memcpy(&value, at, 2);
            return value;
        }
        case DT_U16: {
            uint16_t value = 0;
            std::memcpy(&value, at, 2);
            return value;
        }
        case DT_S32: {
            int32_t value = 0;
            std::memcpy(&value, at, 4);
            return value;
        }
        case DT_U32: {
            uint32_t value = 0;
            std::memcpy(&value, at, 4);
            return value;
        }
        case DT_S8:
            return static_cast<int8_t>(*at);
        case DT_U8:
            return *at;
        default:
            Fail("unsupported element type %d", dtype);
    }
}

void Store(uint8_t* at, int32_t dtype, double value, int32_t round)
{
    switch (dtype) {
        case DT_F16: {
            const uint16_t bits = DoubleToHalf(value, round);
            std::memcpy(at, &bits, 2);
            return;
        }
        case DT_F32: {
            const float narrow = DoubleToFloat(value, round);
            std::memcpy(at, &narrow, 4);
            return;
        }
        case DT_S16: {
            const auto narrow = static_cast<int16_t>(DoubleToInt(value, round, INT16_MIN, INT16_MAX));
            std::memcpy(at, &narrow, 2);
            return;
        }
        case DT_U16: {
            const auto narrow = static_cast<uint16_t>(DoubleToInt(value, round, 0, UINT16_MAX));
            std::memcpy(at, &narrow, 2);
            return;
        }
        case DT_S32: {
            const auto narrow = static_cast<int32_t>(DoubleToInt(value, round, INT32_MIN, INT32_MAX));
            std::memcpy(at, &narrow, 4);
            return;
        }
        case DT_U32: {
            const auto narrow = static_cast<uint32_t>(DoubleToInt(value, round, 0, UINT32_MAX));
            std::memcpy(at, &narrow, 4);
            return;
        }
        case DT_S8:
            *at = static_cast<uint8_t>(static_cast<int8_t>(DoubleToInt(value, round, INT8_MIN, INT8_MAX)));
            return;
        case DT_U8:
            *at = static_cast<uint8_t>(DoubleToInt(value, round, 0, UINT8_MAX));
            return;
        default:
            Fail("unsupported element type %d", dtype);
    }
}

bool IsFloat(int32_t dtype) { return dtype == DT_F16 || dtype == DT_F32; }

// Rounds a result to the precision of `dtype` before it is stored: float arithmetic is done
// in the element's own precision (a float op rounds once, to float).
double InPrecision(double value, int32_t dtype)
{
    return dtype == DT_F32 ? static_cast<double>(static_cast<float>(value)) : value;
}

double Unary(int32_t op, int32_t dtype, double x)
{
    const bool isFloat = IsFloat(dtype);
    const float xf = static_cast<float>(x);
    switch (op) {
        case OP_ABS:
            return std::fabs(x);
        // Transcendentals in double, rounded once at the store: the correctly rounded
        // value, which the hardware's approximation is within a unit or so of.
        case OP_EXP:
            return std::exp(x);
        case OP_LN:
            return std::log(x);
        case OP_SQRT:
            return isFloat ? static_cast<double>(std::sqrt(xf)) : std::sqrt(x);
        case OP_RSQRT:
            return 1.0F / std::sqrt(xf);
        case OP_REC:
            return 1.0F / xf;
        case OP_RELU:
            return x > 0 ? x : 0.0;
        case OP_COPY:
            return x;
        case OP_NOT:
            return static_cast<double>(static_cast<uint16_t>(~static_cast<uint16_t>(static_cast<int64_t>(x))));
        default:
            Fail("unsupported unary op %d", op);
    }
}

// float32 arithmetic rounds once, in float (a double sum then a narrowing could round twice);
// half operands are exact in a double and their sums and products too, so one rounding at
// the store is the hardware's.
double FloatBinary(int32_t op, float a, float b)
{
    switch (op) {
        case OP_ADD:
        case OP_ADDS:
            return a + b;
        case OP_SUB:
            return a - b;
        case OP_MUL:
        case OP_MULS:
            return a * b;
        default:
            return a / b;
    }
}

double Binary(int32_t op, int32_t dtype, double a, double b)
{
    if (dtype == DT_F32 && (op == OP_ADD || op == OP_ADDS || op == OP_SUB || op == OP_MUL || op == OP_MULS ||
                            op == OP_DIV)) {
        return FloatBinary(op, static_cast<float>(a), static_cast<float>(b));
    }
    switch (op) {
        case OP_ADD:
            return a + b;
        case OP_SUB:
            return a - b;
        case OP_MUL:
            return a * b;
        case OP_DIV:
            if (!IsFloat(dtype)) {
                return b == 0 ? 0 : std::trunc(a / b);
            }
            return static_cast<float>(a) / static_cast<float>(b);
        case OP_MAX:
            return std::isnan(a) ? a : (std::isnan(b) ? b : (a > b ? a : b));
        case OP_MIN:
            return std::isnan(a) ? a : (std::isnan(b) ? b : (a < b ? a : b));
        case OP_AND:
            return static_cast<double>(static_cast<int64_t>(a) & static_cast<int64_t>(b));
        case OP_OR:
            return static_cast<double>(static_cast<int64_t>(a) | static_cast<int64_t>(b));
        case OP_ADDS:
            return a + b;
        case OP_MULS:
            return a * b;
        case OP_MAXS:
            return Binary(OP_MAX, dtype, a, b);
        case OP_MINS:
            return Binary(OP_MIN, dtype, a, b);
        case OP_LRELU:
            return a >= 0 ? a : (dtype == DT_F32 ? FloatBinary(OP_MUL, static_cast<float>(a), static_cast<float>(b)) : a * b);
        default:
            Fail("unsupported binary op %d", op);
    }
}

// Integer results wrap like the hardware's two's-complement adders.
void StoreResult(uint8_t* at, int32_t dtype, double value)
{
    if (dtype == DT_S32 || dtype == DT_U32) {
        const auto wrapped = static_cast<uint32_t>(static_cast<int64_t>(value));
        std::memcpy(at, &wrapped, 4);
        return;
    }
    if (dtype == DT_S16 || dtype == DT_U16) {
        const auto wrapped = static_cast<uint16_t>(static_cast<int64_t>(value));
        std::memcpy(at, &wrapped, 2);
        return;
    }
    Store(at, dtype, InPrecision(value, dtype), RND_DEFAULT);
}

void NeedFields(const char* what, int32_t count, int32_t need)
{
    if (count < need) {
        Fail("unsupported: %s with %d instruction fields (the model knows the %d-field form)", what, count, need);
    }
}

struct Result {
    uint8_t* at;
    double value;
};

// Runs one instruction: `compute(repeat, index)` gives each active element's value and
// destination; a repeat's results are written after all its operands are read.
void Execute(uint64_t perRepeat, uint64_t repeats, int32_t dtype, int32_t round,
             const std::function<Result(uint64_t, uint64_t)>& compute)
{
    Result results[REPEAT_BYTES];
    ForEachRepeat(perRepeat, repeats, [&](uint64_t repeat, uint64_t first, uint64_t end) {
        uint64_t produced = 0;
        for (uint64_t index = first; index < end; ++index) {
            if (Active(index)) {
                results[produced++] = compute(repeat, index);
            }
        }
        for (uint64_t item = 0; item < produced; ++item) {
            if (round < 0) {
                StoreResult(results[item].at, dtype, results[item].value);
            } else {
                Store(results[item].at, dtype, results[item].value, round);
            }
        }
    });
}

}  // namespace
}  // namespace opbot

using opbot::Operand;

extern "C" int64_t opbot_vec_unary(int32_t op, int32_t dtype, void* dst, const void* src, const uint64_t* fields,
                                   int32_t count)
{
    // (repeat, dstBlockStride, srcBlockStride, dstRepeatStride, srcRepeatStride)
    opbot::NeedFields("unary vector op", count, 5);
    const int bytes = opbot::ElementBytes(dtype);
    const Operand out{static_cast<uint8_t*>(dst), bytes, fields[1], fields[3]};
    const Operand in{static_cast<uint8_t*>(const_cast<void*>(src)), bytes, fields[2], fields[4]};
    opbot::Execute(opbot::REPEAT_BYTES / bytes, fields[0], dtype, -1, [&](uint64_t repeat, uint64_t index) {
        return opbot::Result{out.At(repeat, index), opbot::Unary(op, dtype, opbot::Load(in.At(repeat, index), dtype))};
    });
    return 0;
}

extern "C" int64_t opbot_vec_binary(int32_t op, int32_t dtype, void* dst, const void* src0, const void* src1,
                                    const uint64_t* fields, int32_t count)
{
    // (repeat, dst/src0/src1 block strides, dst/src0/src1 repeat strides)
    opbot::NeedFields("binary vector op", count, 7);
    const int bytes = opbot::ElementBytes(dtype);
    const Operand out{static_cast<uint8_t*>(dst), bytes, fields[1], fields[4]};
    const Operand in0{static_cast<uint8_t*>(const_cast<void*>(src0)), bytes, fields[2], fields[5]};
    const Operand in1{static_cast<uint8_t*>(const_cast<void*>(src1)), bytes, fields[3], fields[6]};
    opbot::Execute(opbot::REPEAT_BYTES / bytes, fields[0], dtype, -1, [&](uint64_t repeat, uint64_t index) {
        const double a = opbot::Load(in0.At(repeat, index), dtype);
        const double b = opbot::Load(in1.At(repeat, index), dtype);
        return opbot::Result{out.At(repeat, index), opbot::Binary(op, dtype, a, b)};
    });
    return 0;
}

extern "C" int64_t opbot_vec_scalar(int32_t op, int32_t dtype, void* dst, const void* src, uint64_t scalar,
                                    const uint64_t* fields, int32_t count)
{
    // (repeat, dstBlockStride, srcBlockStride, dstRepeatStride, srcRepeatStride)
    opbot::NeedFields("vector-scalar op", count, 5);
    const int bytes = opbot::ElementBytes(dtype);
    const double value = opbot::Load(reinterpret_cast<const uint8_t*>(&scalar), dtype);
    const Operand out{static_cast<uint8_t*>(dst), bytes, fields[1], fields[3]};
    const Operand in{static_cast<uint8_t*>(const_cast<void*>(src)), bytes, fields[2], fields[4]};
    opbot::Execute(opbot::REPEAT_BYTES / bytes, fields[0], dtype, -1, [&](uint64_t repeat, uint64_t index) {
        const double a = opbot::Load(in.At(repeat, index), dtype);
        return opbot::Result{out.At(repeat, index), opbot::Binary(op, dtype, a, value)};
    });
    return 0;
}

extern "C" int64_t opbot_vec_dup(int32_t dtype, void* dst, uint64_t scalar, const uint64_t* fields, int32_t count)
{
    // (repeat, dstBlockStride, srcBlockStride, dstRepeatStride, srcRepeatStride)
    opbot::NeedFields("vector_dup", count, 4);
    const int bytes = opbot::ElementBytes(dtype);
    const Operand out{static_cast<uint8_t*>(dst), bytes, fields[1], fields[3]};
    opbot::ForEachRepeat(opbot::REPEAT_BYTES / bytes, fields[0], [&](uint64_t repeat, uint64_t first, uint64_t end) {
        for (uint64_t index = first; index < end; ++index) {
            if (opbot::Active(index)) {
                std::memcpy(out.At(repeat, index), &scalar, bytes);
            }
        }
    });
    return 0;
}

extern "C" int64_t opbot_vec_conv(int32_t dstType, int32_t srcType, int32_t round, void* dst, const void* src,
                                  const uint64_t* fields, int32_t count)
{
    // (repeat, dstBlockStride, srcBlockStride, dstRepeatStride, srcRepeatStride); a repeat
    // holds as many elements as 256 bytes of the wider type.
    opbot::NeedFields("vconv", count, 5);
    const int dstBytes = opbot::ElementBytes(dstType);
    const int srcBytes = opbot::ElementBytes(srcType);
    const Operand out{static_cast<uint8_t*>(dst), dstBytes, fields[1], fields[3]};
    const Operand in{static_cast<uint8_t*>(const_cast<void*>(src)), srcBytes, fields[2], fields[4]};
    const int wider = dstBytes > srcBytes ? dstBytes : srcBytes;
    // float -> float of the same width with a rounding mode rounds to an integral value.
    const bool integral = dstType == srcType && opbot::IsFloat(dstType);
    opbot::Execute(opbot::REPEAT_BYTES / wider, fields[0], dstType, round, [&](uint64_t repeat, uint64_t index) {
        double value = opbot::Load(in.At(repeat, index), srcType);
        if (integral) {
            value = opbot::RoundIntegral(value, round);
        }
        return opbot::Result{out.At(repeat, index), value};
    });
    return 0;
}
