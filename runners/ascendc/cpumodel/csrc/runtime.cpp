// The block-process runtime that kern_fwk.h's RunKernelFunctionOnCpu drives, standing in for
// CANN's binary libcpudebug_stubreg / model pieces: how many processes a launch forks, which
// block and core type each one is, the process-shared lock, and the vector unit's control
// registers that the open API checkers read. Written from what the open sources call.
#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <pthread.h>

#include "stub_def.h"
#include "stub_reg.h"
#include "kernel_process_lock.h"
#include "model_state.h"

namespace {

// Processes per launched block: dav-2201 separates cube and vector cores, one AIC and two
// AIV per AI core, so a mixed launch of N blocks is 3N processes, a vector-only one N.
int ProcessesPerBlock()
{
    switch (g_kernelMode) {
        case KernelMode::MIX_MODE:
            return AscendC::MIX_IN_GROUP_CORE_NUM;
        case KernelMode::MIX_AIC_1_1:
            return 2;
        default:
            return 1;
    }
}

}  // namespace

int get_process_num() { return static_cast<int>(block_num) * ProcessesPerBlock(); }

// Called in the parent before each fork: the child inherits the block it is.
void set_block_dim(int index)
{
    if (g_kernelMode == KernelMode::AIV_MODE) {
        // GetBlockIdx() on a vector core is block_idx * g_taskRation + sub_block_idx.
        block_idx = index / g_taskRation;
        sub_block_idx = index % g_taskRation;
    } else if (g_kernelMode == KernelMode::AIC_MODE) {
        block_idx = index;
        sub_block_idx = 0;
    } else {
        const int per = ProcessesPerBlock();
        block_idx = index / per;
        sub_block_idx = index % per == 0 ? 0 : index % per - 1;
    }
}

void set_core_type(int index)
{
    int type = AscendC::AIV_TYPE;
    if (g_kernelMode == KernelMode::AIC_MODE) {
        type = AscendC::AIC_TYPE;
    } else if (g_kernelMode != KernelMode::AIV_MODE && index % ProcessesPerBlock() == 0) {
        type = AscendC::AIC_TYPE;
    }
    AscendC::SetGCoreType(type);
    GetStrCoreType() = type == AscendC::AIC_TYPE ? "aic" : "aiv";
    opbot::ResetVectorState();
}

void set_ffts_base_addr(uint64_t address) { (void)address; }

int64_t get_block_idx() { return block_idx; }

int64_t get_block_num() { return block_num; }

namespace AscendC {
// CANN's checker verifies here that every set_flag met its wait_flag; our pipes run in
// program order, so no event can be left pending.
void CheckSyncState() {}
}  // namespace AscendC

// --- the process-shared lock (utils/kernel_process_lock.h declares it; CANN ships the body) ---

namespace AscendC {
ProcessLock* ProcessLock::processLock = nullptr;

ProcessLock::ProcessLock() { Init(); }

inline void ProcessLock::Init()
{
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_rwlock_init(&lock, &attr);
}

// In shared anonymous memory, so the forked blocks and the parent lock the same object.
ProcessLock* ProcessLock::CreateLock()
{
    void* memory = mmap(nullptr, sizeof(ProcessLock), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) {
        std::fprintf(stderr, "[ERROR] opbot cpumodel: cannot map the process lock\n");
        std::abort();
    }
    return new (memory) ProcessLock();
}

int ProcessLock::Read() { return pthread_rwlock_rdlock(&lock); }

int ProcessLock::Write() { return pthread_rwlock_wrlock(&lock); }

int ProcessLock::Unlock() { return pthread_rwlock_unlock(&lock); }

void ProcessLock::UnInit()
{
    pthread_rwlock_destroy(&lock);
    pthread_rwlockattr_destroy(&attr);
}

ProcessLock::~ProcessLock() {}

void ProcessLock::FreeLock()
{
    if (processLock != nullptr) {
        processLock->UnInit();
        munmap(processLock, sizeof(ProcessLock));
        processLock = nullptr;
    }
}
}  // namespace AscendC

// --- stub registration (stub_reg.h): CANN resolves its intrinsic table by dlsym; our
// intrinsics are linked directly, so there is nothing to register. ---
namespace AscendC {
const int SYM_LEN_MAX = 511;
void StubReg(IntriTypeT type, const char* stub)
{
    (void)type;
    (void)stub;
}
void StubInit(void) {}
}  // namespace AscendC
