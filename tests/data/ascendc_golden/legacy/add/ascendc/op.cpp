// Torch binding for add: torch.ops.opbot_add.add(x, y) on NPU tensors.
// Legacy toolchain (ascendc.cmake, every CANN release): the kernels come from ascendc_library and are launched with ACLRT_LAUNCH_KERNEL.
// Load with torch.ops.load_library("libadd_ops.so").
#include <cstdint>
#include <initializer_list>
#include <tuple>
#include <utility>

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "acl/acl.h"
#include "torch_npu/csrc/core/npu/NPUStream.h"
#include "tiling/platform/platform_ascendc.h"
#include "add_tiling.h"
#include "aclrtlaunch_add_float32.h"
#include "aclrtlaunch_add_float16.h"

namespace {

using add_tiling::ComputeTiling;
using add_tiling::TilingData;
using NamedTensor = std::pair<const char*, at::Tensor>;

struct CoreInfo {
    uint32_t vectorCores;
    uint64_t ubBytes;
};

// Read once from the platform: never hard-coded, so one build serves every SoC it runs on.
const CoreInfo& Platform()
{
    static const CoreInfo info = [] {
        auto* platform = platform_ascendc::PlatformAscendCManager::GetInstance();
        TORCH_CHECK(platform != nullptr, "add: PlatformAscendCManager is unavailable");
        uint64_t ubBytes = 0;
        platform->GetCoreMemSize(platform_ascendc::CoreMemType::UB, ubBytes);
        return CoreInfo{static_cast<uint32_t>(platform->GetCoreNumAiv()), ubBytes};
    }();
    return info;
}

// The kernel reads raw pointers: every tensor must live on the one NPU the launch goes to.
void CheckInputs(std::initializer_list<NamedTensor> tensors)
{
    const NamedTensor& first = *tensors.begin();
    for (const NamedTensor& item : tensors) {
        const at::Tensor& tensor = item.second;
        TORCH_CHECK(tensor.device().type() == c10::DeviceType::PrivateUse1, "add: ",
                    item.first, " must be an NPU tensor, not one on ", tensor.device());
        TORCH_CHECK(tensor.device() == first.second.device(), "add: all tensors must be on "
                    "one NPU device, but ", first.first, " is on ", first.second.device(),
                    " and ", item.first, " on ", tensor.device());
        TORCH_CHECK(tensor.scalar_type() == first.second.scalar_type(),
                    "add: inputs must share one dtype");
        TORCH_CHECK(tensor.sizes() == first.second.sizes(),
                    "add: inputs must share one shape");
    }
}

void CheckLaunch(const char* kernel, int64_t code)
{
    TORCH_CHECK(code == 0, "add: launching kernel ", kernel, " failed with error code ", code,
                " (ACL error codes: acl/acl_base.h; details in the CANN plog)");
}

void Launch(at::ScalarType dtype, const TilingData& tiling, aclrtStream stream, uint8_t* x, uint8_t* y, uint8_t* out)
{
    // ACLRT_LAUNCH_KERNEL(k)(...) calls the generated aclrtlaunch_k(), which returns the
    // launch's error code (0: the kernel is on the stream).
    switch (dtype) {
        case at::kFloat:
            CheckLaunch("add_float32", ACLRT_LAUNCH_KERNEL(add_float32)(tiling.blockDim, stream, x, y, out,
                tiling.totalLength, tiling.blockLength, tiling.tileLength));
            break;
        case at::kHalf:
            CheckLaunch("add_float16", ACLRT_LAUNCH_KERNEL(add_float16)(tiling.blockDim, stream, x, y, out,
                tiling.totalLength, tiling.blockLength, tiling.tileLength));
            break;
        default:
            TORCH_CHECK(false, "add: no kernel for dtype ", dtype, " (built for float32, float16)");
    }
}

}  // namespace

at::Tensor add_npu(const at::Tensor& x, const at::Tensor& y)
{
    const at::Tensor x_c = x.contiguous();
    const at::Tensor y_c = y.contiguous();
    CheckInputs({{"x", x_c}, {"y", y_c}});
    // The current device becomes the inputs' one, so the stream, the outputs and the launch
    // all go to it whichever NPU the caller had selected.
    const c10::DeviceGuard guard(x_c.device());
    at::Tensor out = at::empty_like(x_c);
    const int64_t numel = x_c.numel();
    if (numel == 0) {
        return out;
    }
    const CoreInfo& core = Platform();
    const TilingData tiling = ComputeTiling(static_cast<uint64_t>(numel),
                                            static_cast<uint64_t>(x_c.element_size()),
                                            core.vectorCores, core.ubBytes);
    TORCH_CHECK(tiling.blockDim > 0, "add: no tiling for ", numel, " elements on ",
                core.vectorCores, " cores with ", core.ubBytes, " B of UB");
    // stream() (need_empty = true) first empties torch_npu's task queue, so every op queued
    // before this call (the producers of the inputs, readers of memory the allocator may
    // hand to the outputs) is on the stream ahead of the kernel, and events queued around
    // the call bracket it. stream(false) would skip that and race the queue. Enqueueing the
    // launch with OpCommand::SetCustomHandler would keep the queue asynchronous but needs
    // torch_npu's internal framework headers, which change between releases; draining the
    // queue costs one host-side wait per call, small next to a kernel launch.
    const aclrtStream stream = c10_npu::getCurrentNPUStream().stream();
    Launch(x_c.scalar_type(), tiling, stream, static_cast<uint8_t*>(x_c.data_ptr()), static_cast<uint8_t*>(y_c.data_ptr()), static_cast<uint8_t*>(out.data_ptr()));
    return out;
}

TORCH_LIBRARY(opbot_add, m)
{
    m.def("add(Tensor x, Tensor y) -> Tensor");
}

TORCH_LIBRARY_IMPL(opbot_add, PrivateUse1, m)
{
    m.impl("add", TORCH_FN(add_npu));
}
