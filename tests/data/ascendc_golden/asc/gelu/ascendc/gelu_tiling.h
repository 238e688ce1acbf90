// Host tiling for gelu: how a flat problem of totalLength elements is split over the
// vector cores and into UB tiles. The core count and UB size are arguments: op.cpp reads
// them from the platform at run time, so nothing here is specific to one SoC.
// opbot keeps a Python mirror of ComputeTiling (runners/ascendc/tiling.py, plan_tiling)
// and checks the two agree.
#ifndef OPBOT_GELU_TILING_H
#define OPBOT_GELU_TILING_H

#include <cstdint>

namespace gelu_tiling {

constexpr uint64_t BUFFER_NUM = 2;                   // double buffering, as in the kernel
constexpr uint64_t BLOCK_BYTES = 32;                 // UB and DMA work in 32-byte blocks
constexpr uint64_t UB_RESERVED_BYTES = 8 * 1024 + 256;  // reserved by default on dav-2201
constexpr uint64_t MAX_BLOCK_DIM = 65535;            // launch limit for numBlocks
constexpr uint64_t MAX_LENGTH = 0xFFFFFFFFULL;       // the kernel's lengths are uint32_t
constexpr uint64_t NUM_INPUTS = 1;
constexpr uint64_t NUM_OUTPUTS = 1;
constexpr uint64_t COMPUTE_SLOTS = 3;  // must match the kernel's COMPUTE_SLOTS

struct TilingData {
    uint32_t blockDim;     // cores to launch; 0 means: launch nothing
    uint32_t totalLength;  // elements of every input and output
    uint32_t blockLength;  // elements per core, a multiple of 32 bytes; the last core takes the rest
    uint32_t tileLength;   // elements per UB tile, a multiple of 32 bytes
};

inline uint64_t CeilDiv(uint64_t numerator, uint64_t denominator)
{
    return (numerator + denominator - 1) / denominator;
}

inline uint64_t Min(uint64_t first, uint64_t second)
{
    return first < second ? first : second;
}

// float32 scratch tiles per element: the compute chain's, plus one per input and output
// to widen or narrow them when they are not float32 (the kernel's SCRATCH_SLOTS).
inline uint64_t ScratchSlots(uint64_t dtypeBytes)
{
    return COMPUTE_SLOTS + (dtypeBytes == sizeof(float) ? 0 : NUM_INPUTS + NUM_OUTPUTS);
}

inline TilingData ComputeTiling(uint64_t totalLength, uint64_t dtypeBytes, uint64_t cores,
                                uint64_t ubBytes)
{
    TilingData tiling{0, 0, 0, 0};
    if (totalLength == 0 || totalLength > MAX_LENGTH || cores == 0 || dtypeBytes == 0 ||
        ubBytes <= UB_RESERVED_BYTES) {
        return tiling;
    }
    const uint64_t align = BLOCK_BYTES / dtypeBytes > 0 ? BLOCK_BYTES / dtypeBytes : 1;
    const uint64_t bytesPerElement =
        BUFFER_NUM * (NUM_INPUTS + NUM_OUTPUTS) * dtypeBytes + ScratchSlots(dtypeBytes) * sizeof(float);
    const uint64_t maxTile = (ubBytes - UB_RESERVED_BYTES) / bytesPerElement / align * align;
    if (maxTile == 0) {
        return tiling;
    }
    // Deal the work in 32-byte units so every core starts on an aligned GM address, then
    // recount the blocks so no core is launched without work.
    const uint64_t units = CeilDiv(totalLength, align);
    uint64_t blocks = Min(Min(cores, MAX_BLOCK_DIM), units);
    const uint64_t blockLength = CeilDiv(units, blocks) * align;
    blocks = CeilDiv(totalLength, blockLength);
    tiling.blockDim = static_cast<uint32_t>(blocks);
    tiling.totalLength = static_cast<uint32_t>(totalLength);
    tiling.blockLength = static_cast<uint32_t>(blockLength);
    tiling.tileLength = static_cast<uint32_t>(Min(maxTile, blockLength));
    return tiling;
}

}  // namespace gelu_tiling

#endif  // OPBOT_GELU_TILING_H
