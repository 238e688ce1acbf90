"""Reading CPU-model logs (no compiler needed): block counts, failure messages, and the
intrinsics a failed link names."""

from __future__ import annotations

from runners.ascendc.cpumodel.blocks import block_errors, launched_blocks, succeeded_blocks
from runners.ascendc.cpumodel.program import unsupported_names
from runners.ascendc.cpumodel.run import BlockRun, _outcome

API_CHECK = ("[ERROR][Block_2][AIV_0][/x/impl/basic_api/kernel_tpipe_impl.h:270][InitBuffer]"
             "[24660] buffer length is 197888, which should be larger than 0, and at least "
             "less than or equal to 196608")
LOG = "\n".join([
    "[opbot-twin] launching 3 blocks",
    API_CHECK,
    "[ERROR][CORE_2][pid 24660] error happened! ========= ",
    "SIGABRT Signal (Abort Signal from abort) catched, backtrace info:",
    "[#0] 0x000000000003fc08: AscendC::StackTrace() at ??:?",
    "[ERROR][CORE_1][pid 24661] error happened! ========= ",
    "SIGSEGV Signal (Invalid memory reference) catched, backtrace info:",
    "[SUCCESS][CORE_0][pid 24659] exit success!",
])


def test_blocks_are_counted_against_the_launch() -> None:
    assert launched_blocks(LOG) == 3
    assert succeeded_blocks(LOG) == 1
    assert block_errors(LOG) == [
        "InitBuffer: buffer length is 197888, which should be larger than 0, and at least "
        "less than or equal to 196608",
        "a block stopped: SIGABRT Signal (Abort Signal from abort)",
        "a block stopped: SIGSEGV Signal (Invalid memory reference)",
    ]


def test_a_run_is_ok_only_when_every_launched_block_succeeded() -> None:
    run = _outcome(0, LOG, 1.0)
    assert not run.ok
    assert (run.blocks, run.succeeded) == (3, 1)
    assert run.failure().startswith("2 of 3 blocks failed: InitBuffer: buffer length")
    good = "[opbot-twin] launching 2 blocks\n" + "[SUCCESS][CORE_0][pid 1] exit success!\n" * 2
    assert _outcome(0, good, 1.0).ok
    missing = "[opbot-twin] launching 2 blocks\n[SUCCESS][CORE_0][pid 1] exit success!\n"
    assert not _outcome(0, missing, 1.0).ok  # a block that died without a word


def test_exit_status_timeout_and_model_errors_are_reported() -> None:
    assert _outcome(None, "", 120.0).errors == ["the run timed out"]
    said = _outcome(1, "no tiling for 0 elements\n", 0.1)
    assert not said.ok
    assert said.errors == ["no tiling for 0 elements"]
    model = ("[opbot-twin] launching 1 blocks\n"
             "[ERROR] opbot cpumodel: unsupported: vadd with 1 fields\n")
    assert _outcome(0, model, 0.1).errors == ["opbot cpumodel: unsupported: vadd with 1 fields"]
    npucheck = "[opbot-twin] launching 1 blocks\n[NPUCHECK ERROR]: queue depth exceeded\n"
    assert _outcome(0, npucheck, 0.1).errors == ["NPUCHECK ERROR: queue depth exceeded"]
    assert isinstance(said, BlockRun)


def test_undefined_intrinsics_become_unsupported_names() -> None:
    log = "\n".join([
        "/usr/bin/ld: /tmp/ccX.o: in function `AscendC::WholeReduceSum<float>(...)':",
        "k.cpp:(.text+0x1d4): undefined reference to `long vcadd<float*, float*, unsigned "
        "char, int, int, int, int>(float*, float*, unsigned char, int, int, int, int)'",
        "/usr/bin/ld: k.cpp:(.text+0x2d4): undefined reference to `long vcadd<float*, float*>"
        "(float*, float*)'",
        "/usr/bin/ld: k.cpp:(.text+0x3d4): undefined reference to `vcmax'",
        "/usr/bin/ld: k.cpp:(.text+0x4d4): undefined reference to `MyHelper(int)'",
        "/x/devkit/impl/basic_api/dav_c220/k.h:12:5: error: \u2018vaxpy\u2019 was not declared "
        "in this scope",
        "relu_kernel.cpp:3:5: error: \u2018myhelper_fn\u2019 was not declared in this scope",
        "collect2: error: ld returned 1 exit status",
    ])
    assert unsupported_names(log) == ["vcadd", "vcmax", "vaxpy"]


def test_a_launch_the_library_refuses_names_its_reason() -> None:
    log = ("[opbot-twin] launching 64 blocks\n"
           "The input numBlocks 64 exceed max core num of ascend910B1!\n")
    run = _outcome(134, log, 0.1)
    assert not run.ok
    assert run.failure() == ("the CPU-model run exited with status 134: The input numBlocks "
                             "64 exceed max core num of ascend910B1!")
