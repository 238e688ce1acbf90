"""Run Ascend C vector kernels on the CPU: the open cpudebug sources (block processes,
GmAlloc, the real API checks) built with our stand-ins for CANN's binary-only pieces (the
block runtime and the CPU semantics of the intrinsics), linked with a package's CPU twin.
"""

from runners.ascendc.cpumodel.errors import CpuModelError
from runners.ascendc.cpumodel.library import build_library
from runners.ascendc.cpumodel.program import ProgramBuild, build_program
from runners.ascendc.cpumodel.run import BlockRun, run_numpy, run_program
from runners.ascendc.cpumodel.status import CpuModelStatus, cpu_model_status

__all__ = ["BlockRun", "CpuModelError", "CpuModelStatus", "ProgramBuild", "build_library",
           "build_program", "cpu_model_status", "run_numpy", "run_program"]
