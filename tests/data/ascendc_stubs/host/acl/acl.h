// The aclrt* calls opbot's host code uses, over host memory (signatures from the ACL docs).
#ifndef OPBOT_STUB_ACL_H
#define OPBOT_STUB_ACL_H

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

using aclError = int;
using aclrtStream = void*;

constexpr aclError ACL_SUCCESS = 0;
enum aclrtLastErrLevel { ACL_RT_THREAD_LEVEL = 0 };
// The thread's last runtime error, cleared by reading it (a <<<>>> launch reports here).
inline aclError aclrtGetLastError(aclrtLastErrLevel level) { (void)level; return ACL_SUCCESS; }

enum aclrtMemMallocPolicy { ACL_MEM_MALLOC_HUGE_FIRST = 0, ACL_MEM_MALLOC_HUGE_ONLY = 1, ACL_MEM_MALLOC_NORMAL_ONLY = 2 };
enum aclrtMemcpyKind { ACL_MEMCPY_HOST_TO_HOST = 0, ACL_MEMCPY_HOST_TO_DEVICE = 1, ACL_MEMCPY_DEVICE_TO_HOST = 2, ACL_MEMCPY_DEVICE_TO_DEVICE = 3 };

inline aclError aclInit(const char* configPath) { (void)configPath; return 0; }
inline aclError aclFinalize() { return 0; }
inline aclError aclrtSetDevice(int32_t deviceId) { (void)deviceId; return 0; }
inline aclError aclrtResetDevice(int32_t deviceId) { (void)deviceId; return 0; }
inline aclError aclrtCreateStream(aclrtStream* stream) { *stream = nullptr; return 0; }
inline aclError aclrtDestroyStream(aclrtStream stream) { (void)stream; return 0; }
inline aclError aclrtSynchronizeStream(aclrtStream stream) { (void)stream; return 0; }
inline aclError aclrtMalloc(void** devPtr, size_t size, aclrtMemMallocPolicy policy)
{
    (void)policy;
    *devPtr = std::aligned_alloc(64, (size + 63) / 64 * 64);
    return *devPtr == nullptr ? 1 : 0;
}
inline aclError aclrtFree(void* devPtr) { std::free(devPtr); return 0; }
inline aclError aclrtMemcpy(void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind kind)
{
    (void)kind;
    if (count > destMax) {
        return 1;
    }
    std::memcpy(dst, src, count);
    return 0;
}

#endif  // OPBOT_STUB_ACL_H
