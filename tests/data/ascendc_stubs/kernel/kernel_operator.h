// CPU model of the Ascend C kernel API surface opbot's generated kernels use (see README).
// Signatures follow the Ascend C docs; behaviour is checked where the hardware has rules.
#ifndef OPBOT_STUB_KERNEL_OPERATOR_H
#define OPBOT_STUB_KERNEL_OPERATOR_H

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <type_traits>
#include <vector>

#define __global__
#define __aicore__
#define __vector__
#define __cube__
#define __mix__
#define __gm__
#define GM_ADDR uint8_t*

using half = _Float16;

namespace opbot_stub {

constexpr uint64_t UB_BYTES = 192 * 1024;
constexpr uint64_t UB_RESERVED = 8 * 1024 + 256;
constexpr uint64_t BLOCK = 32;

struct Context {
    uint32_t blockIdx = 0;
    uint32_t blockNum = 1;
};

inline Context& State()
{
    static Context context;
    return context;
}

[[noreturn]] inline void Fail(const char* what, long long detail = -1)
{
    std::fprintf(stderr, "ascendc-stub: block %u: %s (%lld)\n", State().blockIdx, what, detail);
    std::exit(3);
}

inline void Check(bool ok, const char* what, long long detail = -1)
{
    if (!ok) {
        Fail(what, detail);
    }
}

template <typename Kernel>
void RunBlocks(uint32_t blocks, Kernel&& kernel)
{
    Check(blocks >= 1 && blocks <= 65535, "numBlocks outside [1, 65535]", blocks);
    for (uint32_t block = 0; block < blocks; ++block) {
        State().blockIdx = block;
        State().blockNum = blocks;
        kernel();
    }
}

}  // namespace opbot_stub

namespace AscendC {

enum class TPosition { GM, VECIN, VECOUT, VECCALC, A1, A2, B1, B2, CO1, CO2 };
using QuePosition = TPosition;
enum class RoundMode { CAST_NONE, CAST_RINT, CAST_FLOOR, CAST_CEIL, CAST_ROUND, CAST_TRUNC, CAST_ODD };

inline int64_t GetBlockIdx() { return opbot_stub::State().blockIdx; }
inline int64_t GetBlockNum() { return opbot_stub::State().blockNum; }

struct DataCopyExtParams {
    uint16_t blockCount;
    uint32_t blockLen;  // bytes
    uint32_t srcStride;
    uint32_t dstStride;
    uint32_t rsv;
};

template <typename T>
struct DataCopyPadExtParams {
    bool isPad;
    uint8_t leftPadding;
    uint8_t rightPadding;
    T paddingValue;
};

template <typename T>
class LocalTensor {
public:
    LocalTensor() = default;
    LocalTensor(T* data, uint32_t size, const uint8_t* base) : data_(data), size_(size), base_(base) {}

    LocalTensor operator[](uint32_t offset) const
    {
        opbot_stub::Check(data_ != nullptr, "LocalTensor[] on an empty tensor");
        opbot_stub::Check(offset <= size_, "LocalTensor offset past its buffer", offset);
        return LocalTensor(data_ + offset, size_ - offset, base_);
    }
    uint32_t GetSize() const { return size_; }
    T GetValue(uint32_t index) const
    {
        opbot_stub::Check(index < size_, "GetValue past the buffer", index);
        return data_[index];
    }
    void SetValue(uint32_t index, T value) const
    {
        opbot_stub::Check(index < size_, "SetValue past the buffer", index);
        data_[index] = value;
    }

    T* data_ = nullptr;
    uint32_t size_ = 0;
    const uint8_t* base_ = nullptr;  // the UB it lives in, for alignment checks
};

template <typename T>
class GlobalTensor {
public:
    void SetGlobalBuffer(T* data, uint64_t size)
    {
        data_ = data;
        size_ = size;
    }
    GlobalTensor operator[](uint64_t offset) const
    {
        opbot_stub::Check(offset <= size_, "GlobalTensor offset past SetGlobalBuffer's size",
                          static_cast<long long>(offset));
        GlobalTensor slice;
        slice.SetGlobalBuffer(data_ + offset, size_ - offset);
        return slice;
    }
    T* data_ = nullptr;
    uint64_t size_ = 0;
};

namespace detail {

template <typename T>
void CheckOperand(const LocalTensor<T>& tensor, int32_t count, const char* what)
{
    opbot_stub::Check(tensor.data_ != nullptr, what);
    opbot_stub::Check(count >= 0 && static_cast<uint32_t>(count) <= tensor.size_,
                      "vector op count exceeds its operand's buffer", count);
    const auto offset = reinterpret_cast<const uint8_t*>(tensor.data_) - tensor.base_;
    opbot_stub::Check(offset % opbot_stub::BLOCK == 0, "UB operand not 32-byte aligned", offset);
}

template <typename D, typename S>
void CheckOverlap(const LocalTensor<D>& dst, const LocalTensor<S>& src, int32_t count)
{
    // Vector instructions allow an operand to be the destination only when they overlap
    // completely; a partial overlap corrupts the result.
    const auto* d = reinterpret_cast<const uint8_t*>(dst.data_);
    const auto* s = reinterpret_cast<const uint8_t*>(src.data_);
    const size_t dBytes = count * sizeof(D);
    const size_t sBytes = count * sizeof(S);
    const bool disjoint = d + dBytes <= s || s + sBytes <= d;
    opbot_stub::Check(disjoint || (d == s && sizeof(D) == sizeof(S)), "operands partially overlap");
}

template <typename T, typename F>
void Unary(const LocalTensor<T>& dst, const LocalTensor<T>& src, int32_t count, F f)
{
    CheckOperand(dst, count, "unary dst");
    CheckOperand(src, count, "unary src");
    CheckOverlap(dst, src, count);
    for (int32_t i = 0; i < count; ++i) {
        dst.data_[i] = static_cast<T>(f(static_cast<float>(src.data_[i])));
    }
}

template <typename T, typename F>
void Binary(const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b,
            int32_t count, F f)
{
    CheckOperand(dst, count, "binary dst");
    CheckOperand(a, count, "binary src0");
    CheckOperand(b, count, "binary src1");
    CheckOverlap(dst, a, count);
    CheckOverlap(dst, b, count);
    for (int32_t i = 0; i < count; ++i) {
        dst.data_[i] = static_cast<T>(f(static_cast<float>(a.data_[i]), static_cast<float>(b.data_[i])));
    }
}

}  // namespace detail

template <typename T> void Add(const LocalTensor<T>& d, const LocalTensor<T>& a, const LocalTensor<T>& b, const int32_t& n)
{ detail::Binary(d, a, b, n, [](float x, float y) { return x + y; }); }
template <typename T> void Sub(const LocalTensor<T>& d, const LocalTensor<T>& a, const LocalTensor<T>& b, const int32_t& n)
{ detail::Binary(d, a, b, n, [](float x, float y) { return x - y; }); }
template <typename T> void Mul(const LocalTensor<T>& d, const LocalTensor<T>& a, const LocalTensor<T>& b, const int32_t& n)
{ detail::Binary(d, a, b, n, [](float x, float y) { return x * y; }); }
template <typename T> void Div(const LocalTensor<T>& d, const LocalTensor<T>& a, const LocalTensor<T>& b, const int32_t& n)
{ detail::Binary(d, a, b, n, [](float x, float y) { return x / y; }); }
template <typename T> void Max(const LocalTensor<T>& d, const LocalTensor<T>& a, const LocalTensor<T>& b, const int32_t& n)
{ detail::Binary(d, a, b, n, [](float x, float y) { return x > y ? x : y; }); }
template <typename T> void Min(const LocalTensor<T>& d, const LocalTensor<T>& a, const LocalTensor<T>& b, const int32_t& n)
{ detail::Binary(d, a, b, n, [](float x, float y) { return x < y ? x : y; }); }

// Scalar forms: the scalar has the tensor's type (a double literal does not deduce).
template <typename T> void Adds(const LocalTensor<T>& d, const LocalTensor<T>& s, const T& v, const int32_t& n)
{ detail::Unary(d, s, n, [v](float x) { return x + static_cast<float>(v); }); }
template <typename T> void Muls(const LocalTensor<T>& d, const LocalTensor<T>& s, const T& v, const int32_t& n)
{ detail::Unary(d, s, n, [v](float x) { return x * static_cast<float>(v); }); }
template <typename T> void Maxs(const LocalTensor<T>& d, const LocalTensor<T>& s, const T& v, const int32_t& n)
{ detail::Unary(d, s, n, [v](float x) { return x > static_cast<float>(v) ? x : static_cast<float>(v); }); }
template <typename T> void Mins(const LocalTensor<T>& d, const LocalTensor<T>& s, const T& v, const int32_t& n)
{ detail::Unary(d, s, n, [v](float x) { return x < static_cast<float>(v) ? x : static_cast<float>(v); }); }
template <typename T> void LeakyRelu(const LocalTensor<T>& d, const LocalTensor<T>& s, const T& v, const int32_t& n)
{ detail::Unary(d, s, n, [v](float x) { return x >= 0.0f ? x : x * static_cast<float>(v); }); }

template <typename T> void Exp(const LocalTensor<T>& d, const LocalTensor<T>& s, const int32_t& n)
{ detail::Unary(d, s, n, [](float x) { return std::exp(x); }); }
template <typename T> void Ln(const LocalTensor<T>& d, const LocalTensor<T>& s, const int32_t& n)
{ detail::Unary(d, s, n, [](float x) { return std::log(x); }); }
template <typename T> void Abs(const LocalTensor<T>& d, const LocalTensor<T>& s, const int32_t& n)
{ detail::Unary(d, s, n, [](float x) { return std::fabs(x); }); }
template <typename T> void Sqrt(const LocalTensor<T>& d, const LocalTensor<T>& s, const int32_t& n)
{ detail::Unary(d, s, n, [](float x) { return std::sqrt(x); }); }
template <typename T> void Rsqrt(const LocalTensor<T>& d, const LocalTensor<T>& s, const int32_t& n)
{ detail::Unary(d, s, n, [](float x) { return 1.0f / std::sqrt(x); }); }
template <typename T> void Reciprocal(const LocalTensor<T>& d, const LocalTensor<T>& s, const int32_t& n)
{ detail::Unary(d, s, n, [](float x) { return 1.0f / x; }); }
template <typename T> void Relu(const LocalTensor<T>& d, const LocalTensor<T>& s, const int32_t& n)
{ detail::Unary(d, s, n, [](float x) { return x > 0.0f ? x : 0.0f; }); }

template <typename T>
void Duplicate(const LocalTensor<T>& d, const T& value, const int32_t& n)
{
    detail::CheckOperand(d, n, "Duplicate dst");
    for (int32_t i = 0; i < n; ++i) {
        d.data_[i] = value;
    }
}

template <typename D, typename S>
void Cast(const LocalTensor<D>& dst, const LocalTensor<S>& src, const RoundMode& mode, const uint32_t count)
{
    (void)mode;  // float <-> half: the C++ conversion rounds to nearest even, as CAST_NONE does
    detail::CheckOperand(dst, static_cast<int32_t>(count), "Cast dst");
    detail::CheckOperand(src, static_cast<int32_t>(count), "Cast src");
    detail::CheckOverlap(dst, src, static_cast<int32_t>(count));
    for (uint32_t i = 0; i < count; ++i) {
        dst.data_[i] = static_cast<D>(src.data_[i]);
    }
}

// ---- data movement ------------------------------------------------------------------------

template <typename T>
void DataCopyPad(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyExtParams& params,
                 const DataCopyPadExtParams<T>& pad)
{
    (void)pad;
    opbot_stub::Check(params.blockCount == 1, "stub DataCopyPad handles blockCount 1 only", params.blockCount);
    const uint64_t bytes = params.blockLen;
    opbot_stub::Check(bytes <= src.size_ * sizeof(T), "DataCopyPad reads past the core's GM range",
                      static_cast<long long>(bytes));
    const uint64_t padded = (bytes + opbot_stub::BLOCK - 1) / opbot_stub::BLOCK * opbot_stub::BLOCK;
    opbot_stub::Check(padded <= dst.size_ * sizeof(T), "DataCopyPad writes past the UB buffer",
                      static_cast<long long>(padded));
    std::memcpy(dst.data_, src.data_, bytes);
    // Without isPad the rest of the last 32-byte block is undefined: poison it (NaN).
    std::memset(reinterpret_cast<uint8_t*>(dst.data_) + bytes, 0xFF, padded - bytes);
}

template <typename T>
void DataCopyPad(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyExtParams& params)
{
    opbot_stub::Check(params.blockCount == 1, "stub DataCopyPad handles blockCount 1 only", params.blockCount);
    const uint64_t bytes = params.blockLen;
    opbot_stub::Check(bytes <= dst.size_ * sizeof(T), "DataCopyPad writes past the core's GM range",
                      static_cast<long long>(bytes));
    opbot_stub::Check(bytes <= src.size_ * sizeof(T), "DataCopyPad reads past the UB buffer",
                      static_cast<long long>(bytes));
    std::memcpy(dst.data_, src.data_, bytes);
}

template <typename T>
void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const uint32_t count)
{
    opbot_stub::Check(count * sizeof(T) % opbot_stub::BLOCK == 0, "DataCopy of a length that is no 32-byte multiple", count);
    opbot_stub::Check(count <= src.size_ && count <= dst.size_, "DataCopy out of range", count);
    std::memcpy(dst.data_, src.data_, count * sizeof(T));
}

template <typename T>
void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const uint32_t count)
{
    opbot_stub::Check(count * sizeof(T) % opbot_stub::BLOCK == 0, "DataCopy of a length that is no 32-byte multiple", count);
    opbot_stub::Check(count <= src.size_ && count <= dst.size_, "DataCopy out of range", count);
    std::memcpy(dst.data_, src.data_, count * sizeof(T));
}

// ---- buffers --------------------------------------------------------------------------------

template <TPosition pos, int32_t depth>
class TQue {
public:
    ~TQue()
    {
        for (size_t i = 0; i < held_.size(); ++i) {
            opbot_stub::Check(!held_[i], "a queue buffer was never freed (FreeTensor missing)", static_cast<long long>(i));
        }
        opbot_stub::Check(queued_.empty(), "a queued tensor was never dequeued (DeQue missing)",
                          static_cast<long long>(queued_.size()));
    }

    void Setup(uint8_t* base, const uint8_t* ub, int32_t num, uint32_t bytes)
    {
        opbot_stub::Check(buffers_.empty(), "InitBuffer called twice for one queue");
        opbot_stub::Check(num >= 1 && num <= depth, "InitBuffer: buffer count exceeds the queue depth", num);
        for (int32_t i = 0; i < num; ++i) {
            buffers_.push_back(base + static_cast<size_t>(i) * bytes);
        }
        held_.assign(num, false);
        bytes_ = bytes;
        ub_ = ub;
    }

    template <typename T>
    LocalTensor<T> AllocTensor()
    {
        for (size_t i = 0; i < buffers_.size(); ++i) {
            if (!held_[i]) {
                held_[i] = true;
                return LocalTensor<T>(reinterpret_cast<T*>(buffers_[i]), bytes_ / sizeof(T), ub_);
            }
        }
        opbot_stub::Fail("AllocTensor with every buffer held (FreeTensor missing?)");
    }

    template <typename T>
    bool EnQue(const LocalTensor<T>& tensor)
    {
        const size_t index = IndexOf(tensor.data_);
        opbot_stub::Check(held_[index], "EnQue of a tensor that was not allocated", static_cast<long long>(index));
        queued_.push_back(index);
        return true;
    }

    template <typename T>
    LocalTensor<T> DeQue()
    {
        opbot_stub::Check(!queued_.empty(), "DeQue from an empty queue (EnQue missing?)");
        const size_t index = queued_.front();
        queued_.pop_front();
        return LocalTensor<T>(reinterpret_cast<T*>(buffers_[index]), bytes_ / sizeof(T), ub_);
    }

    template <typename T>
    void FreeTensor(LocalTensor<T>& tensor)
    {
        const size_t index = IndexOf(tensor.data_);
        opbot_stub::Check(held_[index], "FreeTensor of a buffer that is not held", static_cast<long long>(index));
        for (size_t queued : queued_) {
            opbot_stub::Check(queued != index, "FreeTensor of a tensor still queued (DeQue missing)");
        }
        held_[index] = false;
    }

private:
    template <typename T>
    size_t IndexOf(const T* data) const
    {
        for (size_t i = 0; i < buffers_.size(); ++i) {
            if (reinterpret_cast<const uint8_t*>(data) == buffers_[i]) {
                return i;
            }
        }
        opbot_stub::Fail("tensor does not belong to this queue");
    }

    std::vector<uint8_t*> buffers_;
    std::vector<bool> held_;
    std::deque<size_t> queued_;
    uint32_t bytes_ = 0;
    const uint8_t* ub_ = nullptr;
};

template <TPosition pos>
class TBuf {
public:
    void Setup(uint8_t* base, const uint8_t* ub, uint32_t bytes)
    {
        opbot_stub::Check(base_ == nullptr, "InitBuffer called twice for one TBuf");
        base_ = base;
        ub_ = ub;
        bytes_ = bytes;
    }
    template <typename T>
    LocalTensor<T> Get()
    {
        opbot_stub::Check(base_ != nullptr, "TBuf::Get before InitBuffer");
        return LocalTensor<T>(reinterpret_cast<T*>(base_), bytes_ / sizeof(T), ub_);
    }
    template <typename T>
    LocalTensor<T> Get(uint32_t length)
    {
        opbot_stub::Check(length * sizeof(T) <= bytes_, "TBuf::Get longer than the buffer", length);
        return LocalTensor<T>(reinterpret_cast<T*>(base_), length, ub_);
    }

private:
    uint8_t* base_ = nullptr;
    const uint8_t* ub_ = nullptr;
    uint32_t bytes_ = 0;
};

class TPipe {
public:
    TPipe() : size_(opbot_stub::UB_BYTES - opbot_stub::UB_RESERVED)
    {
        ub_ = static_cast<uint8_t*>(std::aligned_alloc(64, opbot_stub::UB_BYTES));
        std::memset(ub_, 0xFF, opbot_stub::UB_BYTES);  // NaN everywhere until written
    }
    ~TPipe() { std::free(ub_); }
    TPipe(const TPipe&) = delete;
    TPipe& operator=(const TPipe&) = delete;

    template <TPosition pos, int32_t depth>
    void InitBuffer(TQue<pos, depth>& que, uint8_t num, uint32_t len)
    {
        que.Setup(Carve(static_cast<uint64_t>(num) * len, len), ub_, num, len);
    }
    template <TPosition pos>
    void InitBuffer(TBuf<pos>& buf, uint32_t len)
    {
        buf.Setup(Carve(len, len), ub_, len);
    }

private:
    uint8_t* Carve(uint64_t bytes, uint32_t len)
    {
        opbot_stub::Check(len > 0 && len % opbot_stub::BLOCK == 0, "InitBuffer length is no positive 32-byte multiple", len);
        opbot_stub::Check(used_ + bytes <= size_, "UB overflow: buffers exceed the usable UB",
                          static_cast<long long>(used_ + bytes));
        uint8_t* start = ub_ + used_;
        used_ += bytes;
        return start;
    }

    uint8_t* ub_ = nullptr;
    uint64_t size_ = 0;
    uint64_t used_ = 0;
};

}  // namespace AscendC

#endif  // OPBOT_STUB_KERNEL_OPERATOR_H
