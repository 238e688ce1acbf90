// Torch binding for relu: torch.ops.opbot_relu.relu(x) on NPU tensors.
// ASC toolchain (CANN 9.x): compiled as ASC with the kernel source included; launches with <<<numBlocks, 0 (dynUBufSize), stream>>>.
// Load with torch.ops.load_library("librelu_ops.so").
#include <cstdint>
#include <initializer_list>
#include <tuple>

#include <ATen/ATen.h>
#include <torch/library.h>

#include "torch_npu/csrc/core/npu/NPUStream.h"
#include "tiling/platform/platform_ascendc.h"
#include "relu_tiling.h"
#include "relu_kernel.asc"

namespace {

using relu_tiling::ComputeTiling;
using relu_tiling::TilingData;

struct CoreInfo {
    uint32_t vectorCores;
    uint64_t ubBytes;
};

// Read once from the platform: never hard-coded, so one build serves every SoC it runs on.
const CoreInfo& Platform()
{
    static const CoreInfo info = [] {
        auto* platform = platform_ascendc::PlatformAscendCManager::GetInstance();
        TORCH_CHECK(platform != nullptr, "relu: PlatformAscendCManager is unavailable");
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
                    "relu: inputs must be NPU tensors");
        TORCH_CHECK(tensor.scalar_type() == first.scalar_type(),
                    "relu: inputs must share one dtype");
        TORCH_CHECK(tensor.sizes() == first.sizes(), "relu: inputs must share one shape");
    }
}

void Launch(at::ScalarType dtype, const TilingData& tiling, void* stream, uint8_t* x, uint8_t* out)
{
    switch (dtype) {
        case at::kFloat:
            relu_float32<<<tiling.blockDim, 0, stream>>>(x, out,
                tiling.totalLength, tiling.blockLength, tiling.tileLength);
            break;
        case at::kHalf:
            relu_float16<<<tiling.blockDim, 0, stream>>>(x, out,
                tiling.totalLength, tiling.blockLength, tiling.tileLength);
            break;
        default:
            TORCH_CHECK(false, "relu: no kernel for dtype ", dtype, " (built for float32, float16)");
    }
}

}  // namespace

at::Tensor relu_npu(const at::Tensor& x)
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
    TORCH_CHECK(tiling.blockDim > 0, "relu: no tiling for ", numel, " elements on ",
                core.vectorCores, " cores with ", core.ubBytes, " B of UB");
    void* stream = c10_npu::getCurrentNPUStream().stream(false);
    Launch(x_c.scalar_type(), tiling, stream, static_cast<uint8_t*>(x_c.data_ptr()), static_cast<uint8_t*>(out.data_ptr()));
    return out;
}

TORCH_LIBRARY(opbot_relu, m)
{
    m.def("relu(Tensor x) -> Tensor");
}

TORCH_LIBRARY_IMPL(opbot_relu, PrivateUse1, m)
{
    m.impl("relu", TORCH_FN(relu_npu));
}
