// Conversions with explicit rounding, done on exact doubles so no step rounds twice.
#include "convert.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "opbot_cpumodel.h"

namespace opbot {

namespace {

constexpr int HALF_MANTISSA_BITS = 10;
constexpr int HALF_MIN_NORMAL_EXP = -14;
constexpr int HALF_EXP_BIAS = 15;
constexpr uint16_t HALF_INF = 0x7c00;
constexpr uint16_t HALF_QNAN = 0x7e00;
constexpr uint16_t HALF_MAX_FINITE = 0x7bff;
constexpr double HALF_MAX = 65504.0;

// Rounds a non-negative `q` to an integer; `negative` is the sign of the value it scales,
// so floor/ceil round the value, not its magnitude.
double RoundMagnitude(double q, int32_t round, bool negative)
{
    const double down = std::floor(q);
    const double fraction = q - down;
    if (fraction == 0.0) {
        return q;
    }
    switch (round) {
        case RND_AWAY:
            return fraction >= 0.5 ? down + 1.0 : down;
        case RND_FLOOR:
            return negative ? down + 1.0 : down;
        case RND_CEIL:
            return negative ? down : down + 1.0;
        case RND_TRUNC:
            return down;
        case RND_ODD:
            return std::fmod(down, 2.0) == 0.0 ? down + 1.0 : down;
        default:  // to nearest, ties to even
            if (fraction != 0.5) {
                return fraction > 0.5 ? down + 1.0 : down;
            }
            return std::fmod(down, 2.0) == 0.0 ? down : down + 1.0;
    }
}

// Whether rounding a too-large value goes to infinity (away from zero) or saturates.
bool OverflowsToInfinity(int32_t round, bool negative)
{
    switch (round) {
        case RND_TRUNC:
        case RND_ODD:
            return false;
        case RND_FLOOR:
            return negative;
        case RND_CEIL:
            return !negative;
        default:
            return true;
    }
}

uint16_t EncodeHalf(double magnitude)
{
    if (magnitude < std::ldexp(1.0, HALF_MIN_NORMAL_EXP)) {
        // Subnormal: the magnitude in units of 2^-24.
        return static_cast<uint16_t>(std::ldexp(magnitude, -HALF_MIN_NORMAL_EXP + HALF_MANTISSA_BITS));
    }
    int exponent = 0;
    const double fraction = std::frexp(magnitude, &exponent);  // magnitude = fraction * 2^exponent
    const int unbiased = exponent - 1;
    const double mantissa = std::ldexp(fraction, HALF_MANTISSA_BITS + 1) - std::ldexp(1.0, HALF_MANTISSA_BITS);
    return static_cast<uint16_t>(((unbiased + HALF_EXP_BIAS) << HALF_MANTISSA_BITS) | static_cast<int>(mantissa));
}

}  // namespace

float HalfToFloat(uint16_t bits)
{
    const bool negative = (bits & 0x8000) != 0;
    const int exponent = (bits >> HALF_MANTISSA_BITS) & 0x1f;
    const int mantissa = bits & 0x3ff;
    double magnitude = 0.0;
    if (exponent == 0x1f) {
        magnitude = mantissa == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
    } else if (exponent == 0) {
        magnitude = std::ldexp(static_cast<double>(mantissa), HALF_MIN_NORMAL_EXP - HALF_MANTISSA_BITS);
    } else {
        magnitude = std::ldexp(static_cast<double>(mantissa | 0x400), exponent - HALF_EXP_BIAS - HALF_MANTISSA_BITS);
    }
    return static_cast<float>(negative ? -magnitude : magnitude);
}

uint16_t DoubleToHalf(double value, int32_t round)
{
    const bool negative = std::signbit(value);
    const uint16_t sign = negative ? 0x8000 : 0;
    if (std::isnan(value)) {
        return sign | HALF_QNAN;
    }
    const double magnitude = std::fabs(value);
    if (std::isinf(value)) {
        return sign | HALF_INF;
    }
    int exponent = 0;
    std::frexp(magnitude, &exponent);
    // The spacing of halves around `magnitude`: fixed below the normal range.
    const int ulpExponent = (magnitude == 0.0 || exponent - 1 < HALF_MIN_NORMAL_EXP)
                                ? HALF_MIN_NORMAL_EXP - HALF_MANTISSA_BITS
                                : exponent - 1 - HALF_MANTISSA_BITS;
    const double units = RoundMagnitude(std::ldexp(magnitude, -ulpExponent), round, negative);
    const double rounded = std::ldexp(units, ulpExponent);
    if (rounded > HALF_MAX) {
        return sign | (OverflowsToInfinity(round, negative) ? HALF_INF : HALF_MAX_FINITE);
    }
    return sign | EncodeHalf(rounded);
}

float DoubleToFloat(double value, int32_t round)
{
    const float nearest = static_cast<float>(value);  // to nearest even
    if (std::isnan(value) || static_cast<double>(nearest) == value || round == RND_DEFAULT || round == RND_RINT) {
        return nearest;
    }
    const bool negative = value < 0;
    const float below = static_cast<double>(nearest) < value ? nearest
                                                             : std::nextafter(nearest, -std::numeric_limits<float>::infinity());
    const float above = static_cast<double>(nearest) > value ? nearest
                                                             : std::nextafter(nearest, std::numeric_limits<float>::infinity());
    switch (round) {
        case RND_FLOOR:
            return below;
        case RND_CEIL:
            return above;
        case RND_TRUNC:
            return negative ? above : below;
        case RND_AWAY: {
            const double toBelow = value - static_cast<double>(below);
            const double toAbove = static_cast<double>(above) - value;
            if (toBelow == toAbove) {
                return negative ? below : above;
            }
            return toBelow < toAbove ? below : above;
        }
        case RND_ODD: {
            uint32_t bits = 0;
            std::memcpy(&bits, &below, sizeof(bits));
            return (bits & 1U) != 0 ? below : above;
        }
        default:
            return nearest;
    }
}

double RoundIntegral(double value, int32_t round)
{
    if (std::isnan(value) || std::isinf(value)) {
        return value;
    }
    const bool negative = std::signbit(value);
    const double magnitude = RoundMagnitude(std::fabs(value), round, negative);
    return negative ? -magnitude : magnitude;
}

int64_t DoubleToInt(double value, int32_t round, int64_t low, int64_t high)
{
    if (std::isnan(value)) {
        return 0;
    }
    const double rounded = RoundIntegral(value, round);
    if (rounded <= static_cast<double>(low)) {
        return low;
    }
    if (rounded >= static_cast<double>(high)) {
        return high;
    }
    return static_cast<int64_t>(rounded);
}

}  // namespace opbot
