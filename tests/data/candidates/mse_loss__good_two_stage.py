# expect: passed
# Two-stage global reduction: stage 1 writes one partial sum of squared differences per
# block; stage 2 (a single program) folds the partials and divides by n. Returns a 0-d
# tensor like torch.mean.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sq_diff_partial_kernel(p_ptr, t_ptr, partial_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    p = tl.load(p_ptr + offs, mask=mask, other=0.0)
    t = tl.load(t_ptr + offs, mask=mask, other=0.0)
    d = p - t
    tl.store(partial_ptr + pid, tl.sum(d * d, axis=0))


@triton.jit
def finish_mean_kernel(partial_ptr, out_ptr, num_partials, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, num_partials, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(partial_ptr + offs, mask=offs < num_partials, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0) / n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        p = predictions.contiguous()
        t = targets.contiguous()
        n = p.numel()
        BLOCK = 1024
        num_partials = triton.cdiv(n, BLOCK)
        partials = torch.empty(num_partials, dtype=torch.float32)
        out = torch.empty((), dtype=torch.float32)
        sq_diff_partial_kernel[(num_partials,)](p, t, partials, n, BLOCK=BLOCK)
        finish_mean_kernel[(1,)](partials, out, num_partials, n, BLOCK=256)
        return out
