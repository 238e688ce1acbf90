"""Out-of-bounds loads and stores under the Triton CPU interpreter (runners/harness/bounds.py).

Unchecked, a store past a tensor's end writes into the candidate process's heap: the worker
aborts with no case named, or hangs in a broken allocator until the verification's time
limit (minutes of CPU for one wrong kernel). Checked, the case fails at once as
`out_of_bounds`, naming the kernel and the program.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from runners.harness.bounds import BoundsChecker
from tests.support import DATA, run_opbot_here

RELU = DATA / "candidates" / "refs" / "relu.py"
RMS_NORM = DATA / "kernelbench_level1" / "36_RMSNorm_.py"
RMS_NORM_WRONG_BATCH = DATA / "kernelbench_level1" / "36_RMSNorm__bad_batch_from_features.py"

_KERNEL_HEAD = """
import torch
import torch.nn as nn
import triton
import triton.language as tl
"""

# One more element than the tensor holds, stored by the last program: the mask is `<=`.
STORE_ONE_PAST = _KERNEL_HEAD + """
@triton.jit
def relu_off_by_one(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=offs <= n)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        relu_off_by_one[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
        return out
"""

# The same kernel with the launch wrapped in try/except: swallowing the error must not
# turn the case into a pass or a plain value mismatch.
SWALLOWED = STORE_ONE_PAST.replace(
    "        relu_off_by_one[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)\n",
    "        try:\n"
    "            relu_off_by_one[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)\n"
    "        except Exception:\n"
    "            pass\n")

# A load before the start: offsets shifted by one, the first program reads x[-1].
LOAD_BEFORE_START = _KERNEL_HEAD + """
@triton.jit
def relu_shifted(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs - 1, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        relu_shifted[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
        return out
"""

# A candidate that takes the check out before it reads one element past the end: the check
# is gone, but the verdict is still not a pass (the values it read are garbage).
UNDOES_THE_CHECK = _KERNEL_HEAD + """
import gc
from triton.runtime import interpreter

for owner in (interpreter.GridExecutor, interpreter.InterpreterBuilder):
    for name in ("__call__", "_init_args_hst", "create_masked_load", "create_masked_store"):
        wrapper = owner.__dict__.get(name)
        inner = [cell.cell_contents for cell in (getattr(wrapper, "__closure__", None) or ())
                 if callable(cell.cell_contents) and getattr(cell.cell_contents, "__name__", "")
                 == name]
        if inner:
            setattr(owner, name, inner[0])


@triton.jit
def relu_reads_past(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs + 1, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        relu_reads_past[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
        return out
"""


# Grouped-GEMM style: the kernel is given a table of addresses, not the tensors. Correct,
# and passed: a launch that makes pointers out of integers is not checked (what they reach
# is not known from the arguments).
POINTER_TABLE = _KERNEL_HEAD + """
@triton.jit
def relu_by_table(table, n, BLOCK: tl.constexpr):
    x_ptr = tl.load(table + 0).to(tl.pointer_type(tl.float32))
    out_ptr = tl.load(table + 1).to(tl.pointer_type(tl.float32))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    keep = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=keep), 0.0), mask=keep)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        table = torch.tensor([x.data_ptr(), out.data_ptr()], dtype=torch.int64)
        relu_by_table[(triton.cdiv(n, 1024),)](table, n, BLOCK=1024)
        return out
"""

# Decoy arguments that look like tensors to a careless check (an `untyped_storage()` that
# claims the 16 MiB after each tensor), then a read and a write past the end.
DECOY_STORAGE = _KERNEL_HEAD + """
class _Claimed:
    def __init__(self, start):
        self.start = start

    def data_ptr(self):
        return self.start

    def nbytes(self):
        return 1 << 24


class Decoy:
    def __init__(self, tensor):
        self.claimed = _Claimed(tensor.data_ptr() + tensor.numel() * tensor.element_size())

    def untyped_storage(self):
        return self.claimed


@triton.jit
def relu_past(x, out, n, decoy_x, decoy_out, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n + 7, other=0.0)
    tl.store(out + offs, tl.maximum(v, 0.0), mask=offs < n + 1)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        relu_past[(triton.cdiv(n + 8, 1024),)](x, out, n, Decoy(x), Decoy(out), BLOCK=1024)
        return out
"""


def _verify(reference: Path, source: str | Path, tmp_path: Path) -> dict[str, object]:
    candidate = source if isinstance(source, Path) else tmp_path / "candidate.py"
    if not isinstance(source, Path):
        candidate.write_text(source, encoding="utf-8")
    run = run_opbot_here("verify", str(reference), str(candidate), "--backend", "triton",
                         "--json", "--timeout", "120")
    assert "Traceback" not in run.stderr, run.stderr[-2000:]
    data = run.json()
    assert isinstance(data, dict)
    return data


@pytest.mark.parametrize(("source", "access", "kernel"), [
    (STORE_ONE_PAST, "store", "relu_off_by_one"),
    (SWALLOWED, "store", "relu_off_by_one"),
    (LOAD_BEFORE_START, "load", "relu_shifted"),
    (DECOY_STORAGE, "load", "relu_past"),
], ids=["store-one-past", "swallowed", "load-before-start", "decoy-storage"])
def test_an_access_outside_the_tensors_fails_its_case_by_name(
        source: str, access: str, kernel: str, tmp_path: Path) -> None:
    data = _verify(RELU, source, tmp_path)
    assert data["status"] == "failed"
    reasons = data["reasons"]
    assert isinstance(reasons, list)
    [reason] = [item for item in reasons if item["check"] == "out_of_bounds"]
    assert f"out-of-bounds {access} in kernel `{kernel}`" in reason["message"]
    assert reason["case"]  # the case it happened on, not a worker crash without one


def test_a_kernel_wrong_at_the_real_sizes_fails_in_seconds_not_at_the_time_limit(
        tmp_path: Path) -> None:
    # Before the check this corrupted the worker's heap and hung until the time limit.
    data = _verify(RMS_NORM, RMS_NORM_WRONG_BATCH, tmp_path)
    assert data["status"] == "failed"
    checks = {item["check"] for item in data["reasons"]}  # type: ignore[union-attr]
    assert checks == {"out_of_bounds"}, data["reasons"]


def test_a_kernel_reaching_its_tensors_through_a_pointer_table_passes(tmp_path: Path) -> None:
    data = _verify(RELU, POINTER_TABLE, tmp_path)
    assert data["status"] == "passed", data["reasons"]


def test_undoing_the_check_does_not_make_a_wrong_kernel_pass(tmp_path: Path) -> None:
    data = _verify(RELU, UNDOES_THE_CHECK, tmp_path)
    assert data["status"] == "failed"
    checks = {item["check"] for item in data["reasons"]}  # type: ignore[union-attr]
    assert "values" in checks, data["reasons"]  # at run time too, not only by the static scan


# -- the checker on its own, in this process ---------------------------------------------------


@pytest.fixture
def checker() -> Iterator[BoundsChecker]:
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("the bounds check is for Triton's CPU interpreter (TRITON_INTERPRET=1)")
    installed = BoundsChecker()
    assert installed.install()
    yield installed
    installed.uninstall()


def test_masked_off_lanes_past_the_end_are_fine(checker: BoundsChecker) -> None:
    import triton
    import triton.language as tl

    @triton.jit
    def copy(src, dst, n, BLOCK: tl.constexpr) -> None:
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)

    x = torch.arange(1000, dtype=torch.float32)
    out = torch.empty_like(x)
    copy[(4,)](x, out, 1000, BLOCK=256)  # 1024 lanes, 24 of them masked off past the end
    assert torch.equal(out, x)
    assert checker.violation is None


def test_a_view_may_reach_the_rest_of_its_storage_but_not_beyond(
        checker: BoundsChecker) -> None:
    import triton
    import triton.language as tl

    @triton.jit
    def read_at(src, dst, offset) -> None:
        tl.store(dst, tl.load(src + offset))

    base = torch.arange(16, dtype=torch.float32)
    view = base[4:8]
    out = torch.zeros(1)
    read_at[(1,)](view, out, 8)  # base[12]: the view's storage, as on a device
    assert out.item() == 12.0
    with pytest.raises(Exception, match="out-of-bounds load in kernel `read_at`"):
        read_at[(1,)](view, out, 12)  # base[16]: past the storage
    assert checker.violation is not None
    assert checker.violation.program == (0, 0, 0)


def test_a_view_inside_another_argument_is_one_range() -> None:
    from runners.harness.bounds import _Launch

    launch = _Launch("k")
    launch.add([(1000, 2000), (1400, 1600), (3000, 3100)])  # a view inside the first
    addresses = np.array([1999, 1700, 2000, 3050, 999], dtype=np.uint64)
    assert launch.outside(addresses, 1).tolist() == [2000, 999]
    assert launch.outside(np.array([1996], dtype=np.uint64), 8).tolist() == [1996]


def test_uninstall_puts_the_interpreter_back(checker: BoundsChecker) -> None:
    from triton.runtime import interpreter

    patched = interpreter.InterpreterBuilder.__dict__["create_masked_store"]
    checker.uninstall()
    assert interpreter.InterpreterBuilder.__dict__["create_masked_store"] is not patched
    assert checker.install()
