// A test driver for the CPU model's intrinsics: each stdin line is one instruction applied
// to a byte image (standing in for UB and GM at once, operands at byte offsets), and the
// image after it is printed. The tests compare it with a NumPy model of the instruction.
//
// Line: <name> <dtype> <counter 0|1> <maskHigh> <maskLow> <padValue> <scalarBits>
//       <offsets: n o1..on> <fields: n f1..fn> <image hex>
// Output line: the image hex after the instruction.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "tikicpulib.h"

namespace {

std::vector<uint8_t> FromHex(const std::string& text)
{
    std::vector<uint8_t> bytes(text.size() / 2);
    for (size_t index = 0; index < bytes.size(); ++index) {
        bytes[index] = static_cast<uint8_t>(std::stoul(text.substr(2 * index, 2), nullptr, 16));
    }
    return bytes;
}

std::string ToHex(const std::vector<uint8_t>& bytes)
{
    static const char* digits = "0123456789abcdef";
    std::string text;
    text.reserve(bytes.size() * 2);
    for (uint8_t byte : bytes) {
        text.push_back(digits[byte >> 4]);
        text.push_back(digits[byte & 15]);
    }
    return text;
}

template <typename F>
bool WithType(const std::string& dtype, F&& call)
{
    if (dtype == "f32") {
        call(float{});
    } else if (dtype == "f16") {
        call(half{});
    } else if (dtype == "s32") {
        call(int32_t{});
    } else if (dtype == "s16") {
        call(int16_t{});
    } else if (dtype == "u16") {
        call(uint16_t{});
    } else if (dtype == "u32") {
        call(uint32_t{});
    } else {
        return false;
    }
    return true;
}

template <typename T>
T FromBits(uint64_t bits)
{
    T value{};
    std::memcpy(&value, &bits, sizeof(T));
    return value;
}

struct Case {
    std::string name;
    std::string dtype;
    std::vector<uint64_t> offsets;
    std::vector<uint64_t> fields;
    uint64_t scalar = 0;
};

#define F5 c.fields[0], c.fields[1], c.fields[2], c.fields[3], c.fields[4]
#define F7 c.fields[0], c.fields[1], c.fields[2], c.fields[3], c.fields[4], c.fields[5], c.fields[6]

#define UNARY(op)                                                                         \
    if (c.name == #op) {                                                                  \
        return WithType(c.dtype, [&](auto tag) {                                          \
            using T = decltype(tag);                                                      \
            op(reinterpret_cast<T*>(ub + c.offsets[0]), reinterpret_cast<T*>(ub + c.offsets[1]), F5); \
        });                                                                               \
    }
#define BINARY(op)                                                                        \
    if (c.name == #op) {                                                                  \
        return WithType(c.dtype, [&](auto tag) {                                          \
            using T = decltype(tag);                                                      \
            op(reinterpret_cast<T*>(ub + c.offsets[0]), reinterpret_cast<T*>(ub + c.offsets[1]), \
               reinterpret_cast<T*>(ub + c.offsets[2]), F7);                              \
        });                                                                               \
    }
#define SCALAR(op)                                                                        \
    if (c.name == #op) {                                                                  \
        return WithType(c.dtype, [&](auto tag) {                                          \
            using T = decltype(tag);                                                      \
            op(reinterpret_cast<T*>(ub + c.offsets[0]), reinterpret_cast<T*>(ub + c.offsets[1]), \
               FromBits<T>(c.scalar), F5);                                                \
        });                                                                               \
    }
#define CONV(op, D, S)                                                                    \
    if (c.name == #op) {                                                                  \
        op(reinterpret_cast<D*>(ub + c.offsets[0]), reinterpret_cast<S*>(ub + c.offsets[1]), F5); \
        return true;                                                                      \
    }
#define COPY_PAD(op)                                                                      \
    if (c.name == #op) {                                                                  \
        op(ub + c.offsets[0], ub + c.offsets[1], F7);                                     \
        return true;                                                                      \
    }
#define COPY_BLOCKS(op)                                                                   \
    if (c.name == #op) {                                                                  \
        op(ub + c.offsets[0], ub + c.offsets[1], F5);                                     \
        return true;                                                                      \
    }
#define CONV_ROUNDINGS(pair, D, S)                                                        \
    CONV(vconv_##pair, D, S) CONV(vconv_##pair##r, D, S) CONV(vconv_##pair##a, D, S)      \
    CONV(vconv_##pair##f, D, S) CONV(vconv_##pair##c, D, S) CONV(vconv_##pair##z, D, S)

bool Execute(const Case& c, uint8_t* ub)
{
    UNARY(vabs) UNARY(vexp) UNARY(vln) UNARY(vsqrt) UNARY(vrsqrt) UNARY(vrec) UNARY(vrelu) UNARY(vnot) UNARY(vcopy)
    BINARY(vadd) BINARY(vsub) BINARY(vmul) BINARY(vdiv) BINARY(vmax) BINARY(vmin) BINARY(vand) BINARY(vor)
    SCALAR(vadds) SCALAR(vmuls) SCALAR(vmaxs) SCALAR(vmins) SCALAR(vlrelu)
    if (c.name == "vector_dup") {
        return WithType(c.dtype, [&](auto tag) {
            using T = decltype(tag);
            vector_dup(reinterpret_cast<T*>(ub + c.offsets[0]), FromBits<T>(c.scalar), F5);
        });
    }
    CONV(vconv_f162f32, float, half)
    CONV(vconv_f322f16o, half, float)
    CONV(vconv_s162f32, float, int16_t)
    CONV_ROUNDINGS(f322f16, half, float)
    CONV_ROUNDINGS(f322f32, float, float)
    CONV_ROUNDINGS(f322s32, int32_t, float)
    CONV_ROUNDINGS(s322f32, float, int32_t)
    CONV_ROUNDINGS(f162s32, int32_t, half)
    CONV_ROUNDINGS(s162f16, half, int16_t)
    CONV_ROUNDINGS(f162s16, int16_t, half)
    COPY_PAD(copy_gm_to_ubuf_align_b8) COPY_PAD(copy_gm_to_ubuf_align_b16) COPY_PAD(copy_gm_to_ubuf_align_b32)
    COPY_PAD(copy_ubuf_to_gm_align_b8) COPY_PAD(copy_ubuf_to_gm_align_b16) COPY_PAD(copy_ubuf_to_gm_align_b32)
    COPY_BLOCKS(copy_gm_to_ubuf) COPY_BLOCKS(copy_ubuf_to_gm) COPY_BLOCKS(copy_ubuf_to_ubuf)
    return false;
}

std::vector<uint64_t> ReadList(std::istringstream& in)
{
    size_t count = 0;
    in >> count;
    std::vector<uint64_t> values(count < 8 ? 8 : count, 0);
    for (size_t index = 0; index < count; ++index) {
        in >> values[index];
    }
    return values;
}

}  // namespace

int main()
{
    std::string line;
    while (std::getline(std::cin, line)) {
        std::istringstream in(line);
        Case c;
        int counter = 0;
        uint64_t high = 0, low = 0, pad = 0;
        std::string hex;
        in >> c.name >> c.dtype >> counter >> high >> low >> pad >> c.scalar;
        c.offsets = ReadList(in);
        c.fields = ReadList(in);
        in >> hex;
        std::vector<uint8_t> image = FromHex(hex);
        if (counter != 0) {
            set_mask_count();
        } else {
            set_mask_norm();
        }
        set_vector_mask(high, low);
        set_mov_pad_val(pad);
        if (!Execute(c, image.data())) {
            std::cout << "unknown " << c.name << " " << c.dtype << std::endl;
            continue;
        }
        std::cout << ToHex(image) << std::endl;
    }
    return 0;
}
