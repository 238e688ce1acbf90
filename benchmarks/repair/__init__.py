"""Does our feedback let a model repair the mistakes real models make? Measured without one.

A scripted "mistake model" injects the kernel mistakes the papers report (missing masks,
non-power-of-two blocks, int32 offsets, PyTorch fallbacks; FreeTensor leaks, half/float
mixes, tiling constants out of step) into verified kernels, puts each through the agent
loop's own workbench (precheck, verify, feedback), and a "repair oracle" undoes the mistake
only when the feedback names it. The repair rate per mistake class is repaired / injected.

    mistakes.py  the mistake classes and the source transformations that inject them
    oracle.py    the cues that name each class in a feedback text
    runner.py    baseline, injection, the workbench's verdict, the oracle's repair
    table.py     per-class rates, the printed table and the floors
"""
