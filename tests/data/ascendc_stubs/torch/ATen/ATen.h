// A minimal ATen surface for type-checking opbot's torch bindings without torch headers.
#ifndef OPBOT_STUB_ATEN_H
#define OPBOT_STUB_ATEN_H

#include <cstdint>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <vector>

namespace c10 {

enum class DeviceType : int8_t { CPU = 0, CUDA = 1, Meta = 9, PrivateUse1 = 20 };
enum class ScalarType : int8_t { Byte, Char, Short, Int, Long, Half, Float, Double, Bool, BFloat16 };
enum class DispatchKey : uint16_t { CPU, CUDA, Meta, PrivateUse1, Autograd, CompositeImplicitAutograd };

inline std::ostream& operator<<(std::ostream& out, ScalarType type)
{
    return out << static_cast<int>(type);
}

using DeviceIndex = int8_t;

class Device {
public:
    Device(DeviceType type = DeviceType::CPU, DeviceIndex index = -1) : type_(type), index_(index) {}
    DeviceType type() const { return type_; }
    DeviceIndex index() const { return index_; }
    bool operator==(const Device& other) const
    {
        return type_ == other.type_ && index_ == other.index_;
    }
    bool operator!=(const Device& other) const { return !(*this == other); }

private:
    DeviceType type_;
    DeviceIndex index_;
};

inline std::ostream& operator<<(std::ostream& out, const Device& device)
{
    return out << static_cast<int>(device.type()) << ':' << static_cast<int>(device.index());
}

template <typename T>
class ArrayRef {
public:
    size_t size() const { return items_.size(); }
    bool operator==(const ArrayRef& other) const { return items_ == other.items_; }
    bool operator!=(const ArrayRef& other) const { return items_ != other.items_; }

private:
    std::vector<T> items_;
};
using IntArrayRef = ArrayRef<int64_t>;

}  // namespace c10

namespace at {

using c10::IntArrayRef;
using c10::ScalarType;
constexpr ScalarType kFloat = ScalarType::Float;
constexpr ScalarType kHalf = ScalarType::Half;
constexpr ScalarType kBFloat16 = ScalarType::BFloat16;

class Tensor {
public:
    Tensor() = default;
    // A tensor that only says where it lives and how big it is (data_ptr() stays null).
    Tensor(c10::Device device, int64_t numel) : device_(device), numel_(numel) {}
    Tensor contiguous() const { return *this; }
    int64_t numel() const { return numel_; }
    int64_t element_size() const { return 4; }
    int64_t dim() const { return 0; }
    ScalarType scalar_type() const { return ScalarType::Float; }
    void* data_ptr() const { return nullptr; }
    c10::Device device() const { return device_; }
    IntArrayRef sizes() const { return IntArrayRef(); }
    bool is_contiguous() const { return true; }

private:
    c10::Device device_;
    int64_t numel_ = 0;
};

inline Tensor empty_like(const Tensor& self) { return self; }

}  // namespace at

namespace opbot_torch_stub {

inline void Stream(std::ostringstream&) {}
template <typename First, typename... Rest>
void Stream(std::ostringstream& out, const First& first, const Rest&... rest)
{
    out << first;
    Stream(out, rest...);
}

template <typename... Args>
[[noreturn]] void Fail(const Args&... args)
{
    std::ostringstream out;
    Stream(out, args...);
    throw std::runtime_error(out.str());
}

}  // namespace opbot_torch_stub

#define TORCH_CHECK(cond, ...)                           \
    do {                                                 \
        if (!(cond)) {                                   \
            ::opbot_torch_stub::Fail(__VA_ARGS__);       \
        }                                                \
    } while (0)

#endif  // OPBOT_STUB_ATEN_H
