// Number conversions of the modelled vector unit, bit-exact IEEE with each vconv rounding.
#ifndef OPBOT_CPUMODEL_CONVERT_H
#define OPBOT_CPUMODEL_CONVERT_H

#include <cstdint>

namespace opbot {

float HalfToFloat(uint16_t bits);
// Rounds `value` (exact in a double: any float, int32 or int16) to half with `round`
// (an opbot::Round; the default rounds to nearest even).
uint16_t DoubleToHalf(double value, int32_t round);
// Rounds an exact double to float with `round`.
float DoubleToFloat(double value, int32_t round);
// Rounds to an integral value with `round`.
double RoundIntegral(double value, int32_t round);
// Rounds to an integer and saturates to [low, high]; NaN gives 0.
int64_t DoubleToInt(double value, int32_t round, int64_t low, int64_t high);

}  // namespace opbot

#endif  // OPBOT_CPUMODEL_CONVERT_H
