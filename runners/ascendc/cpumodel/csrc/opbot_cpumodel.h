// opbot_cpumodel.h: CPU semantics for the CCE intrinsics that Ascend C vector kernels reach,
// for running kernels on the open cpudebug sources without CANN's binary-only model library.
//
// Included at the end of our stub_fun.h, after the realapi declarations, which declare every
// intrinsic as `template <typename... Args> int64_t name(Args...)` and leave undefined. The
// templates below are more specialised overloads of the same names, so a call with the
// operand types we model picks ours and any other call falls back to the undefined generic
// one: the program then fails to link with "undefined reference to name<...>", which the
// Python side reports as "unsupported: name". Data work is done out of line in the library
// (opbot_* C functions), so the kernel's compile stays cheap.
#ifndef OPBOT_CPUMODEL_H
#define OPBOT_CPUMODEL_H

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernel_fp16.h"

namespace opbot {

// Element type codes shared with the library; 0 = a type the model does not handle.
enum Dtype : int32_t { DT_NONE = 0, DT_F16, DT_F32, DT_S16, DT_S32, DT_U16, DT_U32, DT_S8, DT_U8, DT_BF16 };

template <typename T> struct DtypeOf { static constexpr int32_t value = DT_NONE; };
template <> struct DtypeOf<half> { static constexpr int32_t value = DT_F16; };
template <> struct DtypeOf<float> { static constexpr int32_t value = DT_F32; };
template <> struct DtypeOf<int16_t> { static constexpr int32_t value = DT_S16; };
template <> struct DtypeOf<int32_t> { static constexpr int32_t value = DT_S32; };
template <> struct DtypeOf<uint16_t> { static constexpr int32_t value = DT_U16; };
template <> struct DtypeOf<uint32_t> { static constexpr int32_t value = DT_U32; };
// Not modelled: 8-bit lanes (the mask covers them differently) and bfloat16 arithmetic.
// Their calls fall back to the undefined generic declarations: "unsupported" at link time.

template <typename T> constexpr int32_t kDtype = DtypeOf<std::remove_cv_t<T>>::value;

// One element type shared by every operand, and one the model knows.
template <typename A, typename... B>
constexpr bool kSame = (std::is_same_v<std::remove_cv_t<A>, std::remove_cv_t<B>> && ...) && kDtype<A> != DT_NONE;

// Integer-like instruction fields (repeat counts, strides, enums) as the library takes them.
template <typename P>
constexpr bool kField = std::is_integral_v<P> || std::is_enum_v<P>;

template <typename... P>
constexpr bool kFields = (kField<P> && ...);

// The raw bits of a scalar operand, zero-extended.
template <typename T>
inline uint64_t ScalarBits(const T& value)
{
    uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof(T) < sizeof(bits) ? sizeof(T) : sizeof(bits));
    return bits;
}

// Operation codes (the library's switch keys).
enum Op : int32_t {
    OP_ABS = 1, OP_EXP, OP_LN, OP_SQRT, OP_RSQRT, OP_REC, OP_RELU, OP_NOT, OP_COPY,
    OP_ADD = 20, OP_SUB, OP_MUL, OP_DIV, OP_MAX, OP_MIN, OP_AND, OP_OR,
    OP_ADDS = 40, OP_MULS, OP_MAXS, OP_MINS, OP_LRELU,
};

// Conversion rounding: what each vconv suffix means.
enum Round : int32_t { RND_DEFAULT = 0, RND_RINT, RND_AWAY, RND_FLOOR, RND_CEIL, RND_TRUNC, RND_ODD };

}  // namespace opbot

extern "C" {
int64_t opbot_vec_unary(int32_t op, int32_t dtype, void* dst, const void* src, const uint64_t* fields, int32_t count);
int64_t opbot_vec_binary(int32_t op, int32_t dtype, void* dst, const void* src0, const void* src1,
                         const uint64_t* fields, int32_t count);
int64_t opbot_vec_scalar(int32_t op, int32_t dtype, void* dst, const void* src, uint64_t scalar,
                         const uint64_t* fields, int32_t count);
int64_t opbot_vec_dup(int32_t dtype, void* dst, uint64_t scalar, const uint64_t* fields, int32_t count);
int64_t opbot_vec_conv(int32_t dstType, int32_t srcType, int32_t round, void* dst, const void* src,
                       const uint64_t* fields, int32_t count);
int64_t opbot_copy_pad(int32_t toGm, int32_t elementBytes, void* dst, const void* src, const uint64_t* fields,
                       int32_t count);
int64_t opbot_copy_blocks(void* dst, const void* src, const uint64_t* fields, int32_t count);
}

// Instruction fields after the operands, packed for the library.
#define OPBOT_FIELDS(params) const uint64_t fields[] = {0, static_cast<uint64_t>(params)...}

#define OPBOT_UNARY(name, op)                                                                          \
    template <typename D, typename S, typename... P>                                                    \
    inline std::enable_if_t<opbot::kSame<D, S> && opbot::kFields<P...>, int64_t> name(D* dst, S* src, \
                                                                                       P... params)    \
    {                                                                                                   \
        OPBOT_FIELDS(params);                                                                           \
        return opbot_vec_unary(op, opbot::kDtype<D>, dst, src, fields + 1, sizeof...(P));              \
    }

#define OPBOT_BINARY(name, op)                                                                         \
    template <typename D, typename S0, typename S1, typename... P>                                      \
    inline std::enable_if_t<opbot::kSame<D, S0, S1> && opbot::kFields<P...>, int64_t> name(            \
        D* dst, S0* src0, S1* src1, P... params)                                                        \
    {                                                                                                   \
        OPBOT_FIELDS(params);                                                                           \
        return opbot_vec_binary(op, opbot::kDtype<D>, dst, src0, src1, fields + 1, sizeof...(P));      \
    }

#define OPBOT_SCALAR(name, op)                                                                         \
    template <typename D, typename S, typename V, typename... P>                                        \
    inline std::enable_if_t<opbot::kSame<D, S> && !std::is_pointer_v<V> && opbot::kFields<P...>,       \
                            int64_t>                                                                    \
    name(D* dst, S* src, V scalar, P... params)                                                         \
    {                                                                                                   \
        OPBOT_FIELDS(params);                                                                           \
        const std::remove_cv_t<D> value = static_cast<std::remove_cv_t<D>>(scalar);                    \
        return opbot_vec_scalar(op, opbot::kDtype<D>, dst, src, opbot::ScalarBits(value), fields + 1,  \
                                sizeof...(P));                                                          \
    }

#define OPBOT_CONV(name, dstType, srcType, round)                                                      \
    template <typename D, typename S, typename... P>                                                    \
    inline std::enable_if_t<opbot::kDtype<D> == (dstType) && opbot::kDtype<S> == (srcType) &&          \
                                opbot::kFields<P...>,                                                   \
                            int64_t>                                                                    \
    name(D* dst, S* src, P... params)                                                                   \
    {                                                                                                   \
        OPBOT_FIELDS(params);                                                                           \
        return opbot_vec_conv(dstType, srcType, round, dst, src, fields + 1, sizeof...(P));            \
    }

OPBOT_UNARY(vabs, opbot::OP_ABS)
OPBOT_UNARY(vexp, opbot::OP_EXP)
OPBOT_UNARY(vln, opbot::OP_LN)
OPBOT_UNARY(vsqrt, opbot::OP_SQRT)
OPBOT_UNARY(vrsqrt, opbot::OP_RSQRT)
OPBOT_UNARY(vrec, opbot::OP_REC)
OPBOT_UNARY(vrelu, opbot::OP_RELU)
OPBOT_UNARY(vnot, opbot::OP_NOT)
OPBOT_UNARY(vcopy, opbot::OP_COPY)  // Copy(): 16/32-bit lanes moved as bits

OPBOT_BINARY(vadd, opbot::OP_ADD)
OPBOT_BINARY(vsub, opbot::OP_SUB)
OPBOT_BINARY(vmul, opbot::OP_MUL)
OPBOT_BINARY(vdiv, opbot::OP_DIV)
OPBOT_BINARY(vmax, opbot::OP_MAX)
OPBOT_BINARY(vmin, opbot::OP_MIN)
OPBOT_BINARY(vand, opbot::OP_AND)
OPBOT_BINARY(vor, opbot::OP_OR)

OPBOT_SCALAR(vadds, opbot::OP_ADDS)
OPBOT_SCALAR(vmuls, opbot::OP_MULS)
OPBOT_SCALAR(vmaxs, opbot::OP_MAXS)
OPBOT_SCALAR(vmins, opbot::OP_MINS)
OPBOT_SCALAR(vlrelu, opbot::OP_LRELU)

// vector_dup(dst, scalar, repeat, dstBlockStride, srcBlockStride, dstRepeatStride, srcRepeatStride)
template <typename D, typename V, typename... P>
inline std::enable_if_t<opbot::kDtype<D> != opbot::DT_NONE && !std::is_pointer_v<V> && opbot::kFields<P...>,
                        int64_t>
vector_dup(D* dst, V scalar, P... params)
{
    OPBOT_FIELDS(params);
    const std::remove_cv_t<D> value = static_cast<std::remove_cv_t<D>>(scalar);
    return opbot_vec_dup(opbot::kDtype<D>, dst, opbot::ScalarBits(value), fields + 1, sizeof...(P));
}

#define OPBOT_CONV_ROUNDINGS(pair, dstType, srcType)                          \
    OPBOT_CONV(vconv_##pair, dstType, srcType, opbot::RND_DEFAULT)             \
    OPBOT_CONV(vconv_##pair##r, dstType, srcType, opbot::RND_RINT)             \
    OPBOT_CONV(vconv_##pair##a, dstType, srcType, opbot::RND_AWAY)             \
    OPBOT_CONV(vconv_##pair##f, dstType, srcType, opbot::RND_FLOOR)            \
    OPBOT_CONV(vconv_##pair##c, dstType, srcType, opbot::RND_CEIL)             \
    OPBOT_CONV(vconv_##pair##z, dstType, srcType, opbot::RND_TRUNC)

OPBOT_CONV(vconv_f162f32, opbot::DT_F32, opbot::DT_F16, opbot::RND_DEFAULT)
OPBOT_CONV_ROUNDINGS(f322f16, opbot::DT_F16, opbot::DT_F32)
OPBOT_CONV(vconv_f322f16o, opbot::DT_F16, opbot::DT_F32, opbot::RND_ODD)
OPBOT_CONV_ROUNDINGS(f322f32, opbot::DT_F32, opbot::DT_F32)
OPBOT_CONV_ROUNDINGS(f322s32, opbot::DT_S32, opbot::DT_F32)
OPBOT_CONV_ROUNDINGS(s322f32, opbot::DT_F32, opbot::DT_S32)
OPBOT_CONV_ROUNDINGS(f162s32, opbot::DT_S32, opbot::DT_F16)
OPBOT_CONV_ROUNDINGS(s162f16, opbot::DT_F16, opbot::DT_S16)
OPBOT_CONV_ROUNDINGS(f162s16, opbot::DT_S16, opbot::DT_F16)
OPBOT_CONV(vconv_s162f32, opbot::DT_F32, opbot::DT_S16, opbot::RND_DEFAULT)

// Data movement. Pointer operands of any element type; the byte layout is what matters.
#define OPBOT_COPY_PAD(name, toGm, bytes)                                                    \
    template <typename D, typename S, typename... P>                                          \
    inline std::enable_if_t<opbot::kFields<P...>, int64_t> name(D* dst, S* src, P... params) \
    {                                                                                         \
        OPBOT_FIELDS(params);                                                                 \
        return opbot_copy_pad(toGm, bytes, (void*)dst, (const void*)src, fields + 1,         \
                              sizeof...(P));                                                  \
    }

OPBOT_COPY_PAD(copy_gm_to_ubuf_align_b8, 0, 1)
OPBOT_COPY_PAD(copy_gm_to_ubuf_align_b16, 0, 2)
OPBOT_COPY_PAD(copy_gm_to_ubuf_align_b32, 0, 4)
OPBOT_COPY_PAD(copy_ubuf_to_gm_align_b8, 1, 1)
OPBOT_COPY_PAD(copy_ubuf_to_gm_align_b16, 1, 2)
OPBOT_COPY_PAD(copy_ubuf_to_gm_align_b32, 1, 4)

#define OPBOT_COPY_BLOCKS(name)                                                               \
    template <typename D, typename S, typename... P>                                          \
    inline std::enable_if_t<opbot::kFields<P...>, int64_t> name(D* dst, S* src, P... params) \
    {                                                                                         \
        OPBOT_FIELDS(params);                                                                 \
        return opbot_copy_blocks((void*)dst, (const void*)src, fields + 1, sizeof...(P));    \
    }

OPBOT_COPY_BLOCKS(copy_gm_to_ubuf)
OPBOT_COPY_BLOCKS(copy_ubuf_to_gm)
OPBOT_COPY_BLOCKS(copy_ubuf_to_ubuf)

// Registers and synchronisation: real functions in the library (their realapi generic
// declarations are switched off with OPBOT_REALAPI_HAVE_<name>, see opbot_stub_fun.h).
void set_vector_mask(uint64_t high, uint64_t low);
void set_mask_count();
void set_mask_norm();
void set_mov_pad_val(uint64_t value);
int64_t get_block_idx();
int64_t get_block_num();
int64_t get_ctrl();
void set_ctrl(uint64_t value);
// The pipes of one CPU process run in program order, so events and barriers have nothing to wait for.
template <typename... A> inline void set_flag(A...) {}
template <typename... A> inline void wait_flag(A...) {}
template <typename... A> inline void pipe_barrier(A...) {}
template <typename... A> inline void dsb(A...) {}
template <typename... A> inline void dcci(A...) {}
template <typename... A> inline void set_atomic_none(A...) {}
// Cube-side configuration that vector kernels' TPipe set-up writes and never reads back.
template <typename... A> inline void set_l1_3d_size(A...) {}
template <typename... A> inline void set_padding(A...) {}

// Scalar bit instructions (the TPipe's event-id allocator uses them): pure functions.
inline int64_t sff0(uint64_t value)  // lowest clear bit, -1 when none
{
    return ~value == 0 ? -1 : __builtin_ctzll(~value);
}
inline int64_t sff1(uint64_t value)  // lowest set bit, -1 when none
{
    return value == 0 ? -1 : __builtin_ctzll(value);
}
inline uint64_t sbitset0(uint64_t value, int64_t bit) { return value & ~(1ULL << bit); }
inline uint64_t sbitset1(uint64_t value, int64_t bit) { return value | (1ULL << bit); }
inline int64_t bcnt1(uint64_t value) { return __builtin_popcountll(value); }
inline int64_t bcnt0(uint64_t value) { return 64 - __builtin_popcountll(value); }
inline int64_t clz(uint64_t value) { return value == 0 ? 64 : __builtin_clzll(value); }
// Bits below the sign bit equal to it, counted from bit 62 down.
inline int64_t sflbits(int64_t value)
{
    return clz(static_cast<uint64_t>(value < 0 ? ~value : value)) - 1;
}

// Runtime of the block processes (called by kern_fwk.h's RunKernelFunctionOnCpu).
int get_process_num();
void set_block_dim(int index);
void set_core_type(int index);
void set_ffts_base_addr(uint64_t address);

// npuchk's hooks: the buffer/queue bookkeeping checks of CANN's closed checker. The open API
// checks (src/api_check) still run; these record nothing.
#define OPBOT_NOOP_HOOK(name) \
    template <typename... A>  \
    inline int64_t name(A...) \
    {                         \
        return 0;             \
    }
OPBOT_NOOP_HOOK(AscendCBufAbsAddr)
OPBOT_NOOP_HOOK(AscendCBufAlloc)
OPBOT_NOOP_HOOK(AscendCBufDeque)
OPBOT_NOOP_HOOK(AscendCBufEnque)
OPBOT_NOOP_HOOK(AscendCBufFree)
OPBOT_NOOP_HOOK(AscendCBufGet)
OPBOT_NOOP_HOOK(AscendCBufInit)
OPBOT_NOOP_HOOK(AscendCQueCreate)
OPBOT_NOOP_HOOK(AscendCRecordPoolHierarchy)
OPBOT_NOOP_HOOK(AscendCTBufPoolInit)
OPBOT_NOOP_HOOK(AscendCTBufPoolResetCheck)
OPBOT_NOOP_HOOK(AscendCUpdateTbufPoolStatus)
OPBOT_NOOP_HOOK(AscendCKernelBegin)
OPBOT_NOOP_HOOK(AscendCKernelEnd)
OPBOT_NOOP_HOOK(AscendCBlockBegin)
OPBOT_NOOP_HOOK(AscendCBlockEnd)
OPBOT_NOOP_HOOK(AscendCEnInterruptExit)

#endif  // OPBOT_CPUMODEL_H
