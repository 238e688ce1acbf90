// CPU twin of add for the legacy toolchain (CANN <= 8.3): the kernel compiled for the
// host and run block by block through tikicpulib (build with RUN_MODE=cpu; no NPU needed).
// Usage: add_cpu_twin <float32|float16> <elements> <cores> <ubBytes> <x.bin> <y.bin> <out.bin>
// Inputs and outputs are raw little-endian arrays; tests/test_add_npu.py drives it.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tikicpulib.h"
#include "add_tiling.h"

extern "C" __global__ __aicore__ void add_float32(GM_ADDR in0, GM_ADDR in1, GM_ADDR out0, uint32_t totalLength, uint32_t blockLength, uint32_t tileLength);
extern "C" __global__ __aicore__ void add_float16(GM_ADDR in0, GM_ADDR in1, GM_ADDR out0, uint32_t totalLength, uint32_t blockLength, uint32_t tileLength);

namespace {

// ICPU_RUN_KF hands every kernel argument to the blocks as a GM address (it copies each as
// 8 bytes and checks it came from GmAlloc), so the tiling's scalars travel in a GmAlloc'd
// struct that an adapter entry per dtype unpacks for the real one.
struct TwinScalars {
    uint32_t totalLength;
    uint32_t blockLength;
    uint32_t tileLength;
};

bool ReadFileImpl(const char* path, uint8_t* data, size_t bytes)
{
    FILE* file = std::fopen(path, "rb");
    if (file == nullptr) {
        return false;
    }
    const size_t got = std::fread(data, 1, bytes, file);
    std::fclose(file);
    return got == bytes;
}

bool WriteFileImpl(const char* path, const uint8_t* data, size_t bytes)
{
    FILE* file = std::fopen(path, "wb");
    if (file == nullptr) {
        return false;
    }
    const size_t put = std::fwrite(data, 1, bytes, file);
    std::fclose(file);
    return put == bytes;
}

// Called through pointers taken by their exact type: an overload that a package's header
// or kernel declares (a better match for the call) can never stand in for opbot's I/O;
// one of the same name makes the twin fail to build.
bool (*const ReadFile)(const char*, uint8_t*, size_t) = &ReadFileImpl;
bool (*const WriteFile)(const char*, const uint8_t*, size_t) = &WriteFileImpl;

size_t DtypeBytes(const char* dtype)
{
    if (std::strcmp(dtype, "float32") == 0) {
        return 4;
    }
    if (std::strcmp(dtype, "float16") == 0) {
        return 2;
    }
    return 0;
}

}  // namespace

extern "C" __global__ __aicore__ void add_float32_twin(GM_ADDR in0, GM_ADDR in1, GM_ADDR out0, GM_ADDR scalars)
{
    const TwinScalars* tiling = reinterpret_cast<const TwinScalars*>(scalars);
    add_float32(in0, in1, out0, tiling->totalLength, tiling->blockLength, tiling->tileLength);
}

extern "C" __global__ __aicore__ void add_float16_twin(GM_ADDR in0, GM_ADDR in1, GM_ADDR out0, GM_ADDR scalars)
{
    const TwinScalars* tiling = reinterpret_cast<const TwinScalars*>(scalars);
    add_float16(in0, in1, out0, tiling->totalLength, tiling->blockLength, tiling->tileLength);
}

int main(int argc, char** argv)
{
    constexpr int FIXED_ARGS = 5;
    if (argc != FIXED_ARGS + 3) {
        std::fprintf(stderr, "usage: %s <float32|float16> <elements> <cores> <ubBytes> <x.bin> <y.bin> <out.bin>\n", argv[0]);
        return 2;
    }
    const char* dtype = argv[1];
    const uint64_t total = std::strtoull(argv[2], nullptr, 10);
    const uint64_t cores = std::strtoull(argv[3], nullptr, 10);
    const uint64_t ubBytes = std::strtoull(argv[4], nullptr, 10);
    const size_t elementBytes = DtypeBytes(dtype);
    if (elementBytes == 0) {
        std::fprintf(stderr, "no kernel for dtype %s\n", dtype);
        return 2;
    }
    const add_tiling::TilingData tiling = add_tiling::ComputeTiling(total, elementBytes, cores, ubBytes);
    if (tiling.blockDim == 0) {
        std::fprintf(stderr, "no tiling for %llu elements\n", static_cast<unsigned long long>(total));
        return 1;
    }
    const size_t bytes = total * elementBytes;
    uint8_t* in0 = static_cast<uint8_t*>(AscendC::GmAlloc(bytes));
    if (!ReadFile(argv[FIXED_ARGS + 0], in0, bytes)) {
        std::fprintf(stderr, "cannot read %s\n", argv[FIXED_ARGS + 0]);
        return 1;
    }
    uint8_t* in1 = static_cast<uint8_t*>(AscendC::GmAlloc(bytes));
    if (!ReadFile(argv[FIXED_ARGS + 1], in1, bytes)) {
        std::fprintf(stderr, "cannot read %s\n", argv[FIXED_ARGS + 1]);
        return 1;
    }
    uint8_t* out0 = static_cast<uint8_t*>(AscendC::GmAlloc(bytes));
    uint8_t* scalars = static_cast<uint8_t*>(AscendC::GmAlloc(sizeof(TwinScalars)));
    const TwinScalars packed{tiling.totalLength, tiling.blockLength, tiling.tileLength};
    std::memcpy(scalars, &packed, sizeof(packed));
    AscendC::SetKernelMode(KernelMode::AIV_MODE);
    // ICPU_RUN_KF returns normally even when a block fails: each block that ends well gets
    // a "[SUCCESS]" line, a failed one "[ERROR]" lines; the caller counts them against this.
    std::printf("[opbot-twin] launching %u blocks\n", tiling.blockDim);
    std::fflush(stdout);
    if (std::strcmp(dtype, "float32") == 0) {
        ICPU_RUN_KF(add_float32_twin, tiling.blockDim, in0, in1, out0, scalars);
    }
    if (std::strcmp(dtype, "float16") == 0) {
        ICPU_RUN_KF(add_float16_twin, tiling.blockDim, in0, in1, out0, scalars);
    }
    if (!WriteFile(argv[FIXED_ARGS + 2], out0, bytes)) {
        std::fprintf(stderr, "cannot write %s\n", argv[FIXED_ARGS + 2]);
        return 1;
    }
    AscendC::GmFree(in0);
    AscendC::GmFree(in1);
    AscendC::GmFree(out0);
    AscendC::GmFree(scalars);
    return 0;
}
