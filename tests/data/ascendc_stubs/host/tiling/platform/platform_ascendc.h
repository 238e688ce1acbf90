// PlatformAscendCManager as the Ascend C host docs describe it (values of a dav-2201 part).
#ifndef OPBOT_STUB_PLATFORM_ASCENDC_H
#define OPBOT_STUB_PLATFORM_ASCENDC_H

#include <cstdint>

namespace platform_ascendc {

enum class CoreMemType { L0_A = 0, L0_B = 1, L0_C = 2, L1 = 3, L2 = 4, UB = 5, HBM = 6, RESERVED };

class PlatformAscendC {
public:
    uint32_t GetCoreNumAiv() const { return 40; }
    uint32_t GetCoreNumAic() const { return 20; }
    void GetCoreMemSize(const CoreMemType& memType, uint64_t& size) const
    {
        size = memType == CoreMemType::UB ? 192 * 1024 : 0;
    }
};

class PlatformAscendCManager {
public:
    static PlatformAscendC* GetInstance()
    {
        static PlatformAscendC platform;
        return &platform;
    }
    static PlatformAscendC* GetInstance(const char* customSocVersion)
    {
        (void)customSocVersion;
        return GetInstance();
    }
};

}  // namespace platform_ascendc

#endif  // OPBOT_STUB_PLATFORM_ASCENDC_H
