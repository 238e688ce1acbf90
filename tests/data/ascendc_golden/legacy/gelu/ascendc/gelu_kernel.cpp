// gelu: out = gelu(x)
//
// Ascend C vector kernel written by opbot for the legacy toolchain (ascendc_library; CANN 8.x, still built by 9.x).
// Each vector core takes one contiguous range of blockLength elements (the last core
// takes what is left) and walks it in tiles of tileLength elements; the host computes
// both at run time from the core count and UB size (gelu_tiling.h). BUFFER_NUM = 2
// lets the copy-in of tile i+1 overlap the compute of tile i. Every copy goes through
// DataCopyPad, so the last tile needs no 32-byte multiple. Inputs are widened to
// float32 in UB and results narrowed back, so float16 is computed in float32.
#include "kernel_operator.h"

namespace opbot_gelu {

constexpr int32_t BUFFER_NUM = 2;
constexpr uint32_t NUM_INPUTS = 1;
constexpr uint32_t NUM_OUTPUTS = 1;
// float32 scratch tiles the compute chain needs; the host tiling sizes tiles from it.
constexpr uint32_t COMPUTE_SLOTS = 3;

template <typename A, typename B>
struct SameType {
    static constexpr bool value = false;
};
template <typename A>
struct SameType<A, A> {
    static constexpr bool value = true;
};

template <typename T>
class KernelGelu {
public:
    __aicore__ inline KernelGelu() {}

    __aicore__ inline void Init(GM_ADDR x, GM_ADDR out, uint32_t totalLength,
                                uint32_t blockLength, uint32_t tileLength)
    {
        const uint32_t start = AscendC::GetBlockIdx() * blockLength;
        length_ = start < totalLength ? totalLength - start : 0;
        if (length_ > blockLength) {
            length_ = blockLength;
        }
        tileLength_ = tileLength;
        tileNum_ = (length_ + tileLength - 1) / tileLength;
        inGm0_.SetGlobalBuffer((__gm__ T*)x + start, length_);
        outGm0_.SetGlobalBuffer((__gm__ T*)out + start, length_);
        pipe_.InitBuffer(inQueue0_, BUFFER_NUM, tileLength * sizeof(T));
        pipe_.InitBuffer(outQueue0_, BUFFER_NUM, tileLength * sizeof(T));
        if constexpr (SCRATCH_SLOTS > 0) {
            pipe_.InitBuffer(scratch_, SCRATCH_SLOTS * tileLength * sizeof(float));
        }
    }

    __aicore__ inline void Process()
    {
        for (uint32_t tile = 0; tile < tileNum_; ++tile) {
            const uint32_t count = (tile + 1 == tileNum_) ? length_ - tile * tileLength_ : tileLength_;
            CopyIn(tile, count);
            Compute(count);
            CopyOut(tile, count);
        }
    }

private:
    // Half tensors need one float32 tile each to be widened into (inputs) or computed in
    // (outputs); float32 ones are used in place.
    static constexpr uint32_t SCRATCH_SLOTS =
        COMPUTE_SLOTS + (SameType<T, float>::value ? 0 : NUM_INPUTS + NUM_OUTPUTS);

    __aicore__ inline void CopyIn(uint32_t tile, uint32_t count)
    {
        const AscendC::DataCopyExtParams copyParams{1, static_cast<uint32_t>(count * sizeof(T)), 0, 0, 0};
        const AscendC::DataCopyPadExtParams<T> padParams{false, 0, 0, 0};
        AscendC::LocalTensor<T> in0 = inQueue0_.AllocTensor<T>();
        AscendC::DataCopyPad(in0, inGm0_[tile * tileLength_], copyParams, padParams);
        inQueue0_.EnQue(in0);
    }

    __aicore__ inline void Compute(uint32_t count)
    {
        AscendC::LocalTensor<T> in0 = inQueue0_.DeQue<T>();
        AscendC::LocalTensor<T> out0 = outQueue0_.AllocTensor<T>();
        const AscendC::LocalTensor<float> x0 = Widen(in0, COMPUTE_SLOTS + 0, count);
        const AscendC::LocalTensor<float> y0 = Target(out0, COMPUTE_SLOTS + NUM_INPUTS + 0);
        const AscendC::LocalTensor<float> s0 = Slot(0);
        const AscendC::LocalTensor<float> s1 = Slot(1);
        const AscendC::LocalTensor<float> s2 = Slot(2);
        // y0 = gelu(x0)
        // erf(|x| / sqrt 2) by Abramowitz-Stegun 7.1.26, then (x + |x| * erf) / 2
        AscendC::Abs(s0, x0, count);
        AscendC::Muls(s1, s0, 0.7071067811865475f, count);
        AscendC::Muls(y0, s1, 0.3275911f, count);
        AscendC::Adds(y0, y0, 1.0f, count);
        AscendC::Duplicate(s2, 1.0f, count);
        AscendC::Div(y0, s2, y0, count);
        AscendC::Muls(s2, y0, 1.061405429f, count);
        AscendC::Adds(s2, s2, -1.453152027f, count);
        AscendC::Mul(s2, s2, y0, count);
        AscendC::Adds(s2, s2, 1.421413741f, count);
        AscendC::Mul(s2, s2, y0, count);
        AscendC::Adds(s2, s2, -0.284496736f, count);
        AscendC::Mul(s2, s2, y0, count);
        AscendC::Adds(s2, s2, 0.254829592f, count);
        AscendC::Mul(s2, s2, y0, count);
        AscendC::Mul(y0, s1, s1, count);
        AscendC::Muls(y0, y0, -1.0f, count);
        AscendC::Exp(y0, y0, count);
        AscendC::Mul(y0, s2, y0, count);
        AscendC::Muls(y0, y0, -1.0f, count);
        AscendC::Adds(y0, y0, 1.0f, count);
        AscendC::Mul(y0, s0, y0, count);
        AscendC::Add(y0, x0, y0, count);
        AscendC::Muls(y0, y0, 0.5f, count);
        Narrow(out0, y0, count);
        outQueue0_.EnQue<T>(out0);
        inQueue0_.FreeTensor(in0);
    }

    __aicore__ inline void CopyOut(uint32_t tile, uint32_t count)
    {
        const AscendC::DataCopyExtParams copyParams{1, static_cast<uint32_t>(count * sizeof(T)), 0, 0, 0};
        AscendC::LocalTensor<T> out0 = outQueue0_.DeQue<T>();
        AscendC::DataCopyPad(outGm0_[tile * tileLength_], out0, copyParams);
        outQueue0_.FreeTensor(out0);
    }

    __aicore__ inline AscendC::LocalTensor<float> Slot(uint32_t index)
    {
        return scratch_.Get<float>()[index * tileLength_];
    }

    // The float32 view of an input tile: the tile itself, or a widened copy of it.
    __aicore__ inline AscendC::LocalTensor<float> Widen(const AscendC::LocalTensor<T>& tile,
                                                        uint32_t slot, uint32_t count)
    {
        if constexpr (SameType<T, float>::value) {
            return tile;
        } else {
            AscendC::LocalTensor<float> wide = Slot(slot);
            AscendC::Cast(wide, tile, AscendC::RoundMode::CAST_NONE, count);
            return wide;
        }
    }

    // Where an output is computed: its own tile when float32, else a float32 slot.
    __aicore__ inline AscendC::LocalTensor<float> Target(const AscendC::LocalTensor<T>& tile,
                                                         uint32_t slot)
    {
        if constexpr (SameType<T, float>::value) {
            return tile;
        } else {
            return Slot(slot);
        }
    }

    // CAST_NONE rounds to nearest even when precision is lost, as torch does.
    __aicore__ inline void Narrow(const AscendC::LocalTensor<T>& tile,
                                  const AscendC::LocalTensor<float>& value, uint32_t count)
    {
        if constexpr (!SameType<T, float>::value) {
            AscendC::Cast(tile, value, AscendC::RoundMode::CAST_NONE, count);
        }
    }

    AscendC::TPipe pipe_;
    AscendC::TQue<AscendC::QuePosition::VECIN, BUFFER_NUM> inQueue0_;
    AscendC::TQue<AscendC::QuePosition::VECOUT, BUFFER_NUM> outQueue0_;
    AscendC::TBuf<AscendC::TPosition::VECCALC> scratch_;
    AscendC::GlobalTensor<T> inGm0_;
    AscendC::GlobalTensor<T> outGm0_;
    uint32_t length_ = 0;
    uint32_t tileLength_ = 0;
    uint32_t tileNum_ = 0;
};

}  // namespace opbot_gelu

// One extern "C" entry per dtype: templated kernel names are mangled differently across
// CANN releases (8.2.RC1 changed it), plain C names are stable.
extern "C" __global__ __aicore__ void gelu_float32(GM_ADDR x, GM_ADDR out,
    uint32_t totalLength, uint32_t blockLength, uint32_t tileLength)
{
    opbot_gelu::KernelGelu<float> op;
    op.Init(x, out, totalLength, blockLength, tileLength);
    op.Process();
}

extern "C" __global__ __aicore__ void gelu_float16(GM_ADDR x, GM_ADDR out,
    uint32_t totalLength, uint32_t blockLength, uint32_t tileLength)
{
    opbot_gelu::KernelGelu<half> op;
    op.Init(x, out, totalLength, blockLength, tileLength);
    op.Process();
}
