// c10::DeviceGuard: makes a device current for a scope (torch_npu registers the NPU's).
// The stub keeps the current device in opbot_current_device(), so a test can see it.
#ifndef OPBOT_STUB_DEVICE_GUARD_H
#define OPBOT_STUB_DEVICE_GUARD_H

#include <ATen/ATen.h>

namespace c10 {

inline Device& opbot_current_device()
{
    static Device current;
    return current;
}

class DeviceGuard {
public:
    explicit DeviceGuard(Device device) : original_(opbot_current_device())
    {
        opbot_current_device() = device;
    }
    ~DeviceGuard() { opbot_current_device() = original_; }
    DeviceGuard(const DeviceGuard&) = delete;
    DeviceGuard& operator=(const DeviceGuard&) = delete;
    Device original_device() const { return original_; }

private:
    Device original_;
};

}  // namespace c10

#endif  // OPBOT_STUB_DEVICE_GUARD_H
