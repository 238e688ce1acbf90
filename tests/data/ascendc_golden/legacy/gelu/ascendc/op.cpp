// Torch binding for gelu: torch.ops.opbot_gelu.gelu(x) on NPU tensors.
// Legacy toolchain (CANN <= 8.3): the kernels come from ascendc_library and are launched with ACLRT_LAUNCH_KERNEL.
// Load with torch.ops.load_library("libgelu_ops.so").
#include <cstdint>
#include <initializer_list>
#include <tuple>

#include <ATen/ATen.h>
#include <torch/library.h>

#include "torch_npu/csrc/core/npu/NPUStream.h"
#include "tiling/platform/platform_ascendc.h"
#include "gelu_tiling.h"
#include "aclrtlaunch_gelu_float32.h"
#include "aclrtlaunch_gelu_float16.h"

namespace {

using gelu_tiling::ComputeTiling;
using gelu_tiling::TilingData;

struct CoreInfo {
    uint32_t vectorCores;
    uint64_t ubBytes;
};

// Read once from the platform: never hard-coded, so one build serves every SoC it runs on.
const CoreInfo& Platform()
{
    static const CoreInfo info = [] {
        auto* platform = platform_ascendc::PlatformAscendCManager::GetInstance();
        TORCH_CHECK(platform != nullptr, "gelu: PlatformAscendCManager is unavailable");
        uint64_t ubBytes = 0;
        platform->GetCoreMemSize(platform_ascendc::CoreMemType::UB, ubBytes);
        return CoreInfo{static_cast<uint32_t>(platform->GetCoreNumAiv()), ubBytes};
    }();
    return info;
}

void CheckInputs(std::initializer_list<at::Tensor> tensors)
{
    const at::Tensor& first = *tensors.begin();
    for (const at::Tensor& tensor : tensors) {
        TORCH_CHECK(tensor.device().type() == c10::DeviceType::PrivateUse1,
                    "gelu: inputs must be NPU tensors");
        TORCH_CHECK(tensor.scalar_type() == first.scalar_type(),
                    "gelu: inputs must share one dtype");
        TORCH_CHECK(tensor.sizes() == first.sizes(), "gelu: inputs must share one shape");
    }
}

void Launch(at::ScalarType dtype, const TilingData& tiling, void* stream, uint8_t* x, uint8_t* out)
{
    switch (dtype) {
        case at::kFloat:
            ACLRT_LAUNCH_KERNEL(gelu_float32)(tiling.blockDim, stream, x, out,
                tiling.totalLength, tiling.blockLength, tiling.tileLength);
            break;
        case at::kHalf:
            ACLRT_LAUNCH_KERNEL(gelu_float16)(tiling.blockDim, stream, x, out,
                tiling.totalLength, tiling.blockLength, tiling.tileLength);
            break;
        default:
            TORCH_CHECK(false, "gelu: no kernel for dtype ", dtype, " (built for float32, float16)");
    }
}

}  // namespace

at::Tensor gelu_npu(const at::Tensor& x)
{
    const at::Tensor x_c = x.contiguous();
    CheckInputs({x_c});
    at::Tensor out = at::empty_like(x_c);
    const int64_t numel = x_c.numel();
    if (numel == 0) {
        return out;
    }
    const CoreInfo& core = Platform();
    const TilingData tiling = ComputeTiling(static_cast<uint64_t>(numel),
                                            static_cast<uint64_t>(x_c.element_size()),
                                            core.vectorCores, core.ubBytes);
    TORCH_CHECK(tiling.blockDim > 0, "gelu: no tiling for ", numel, " elements on ",
                core.vectorCores, " cores with ", core.ubBytes, " B of UB");
    void* stream = c10_npu::getCurrentNPUStream().stream(false);
    Launch(x_c.scalar_type(), tiling, stream, static_cast<uint8_t*>(x_c.data_ptr()), static_cast<uint8_t*>(out.data_ptr()));
    return out;
}

TORCH_LIBRARY(opbot_gelu, m)
{
    m.def("gelu(Tensor x) -> Tensor");
}

TORCH_LIBRARY_IMPL(opbot_gelu, PrivateUse1, m)
{
    m.impl("gelu", TORCH_FN(gelu_npu));
}
