# expect: failed input_mutation
# "Saves an allocation" by writing predictions - targets into the predictions tensor, then
# reducing that buffer. The loss is right; predictions is overwritten.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def diff_into_p_kernel(p_ptr, t_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    p = tl.load(p_ptr + offs, mask=mask)
    t = tl.load(t_ptr + offs, mask=mask)
    tl.store(p_ptr + offs, p - t, mask=mask)


@triton.jit
def mean_sq_kernel(d_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        d = tl.load(d_ptr + offs, mask=offs < n, other=0.0)
        acc += d * d
    tl.store(out_ptr, tl.sum(acc, axis=0) / n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        n = predictions.numel()
        out = torch.empty((), dtype=torch.float32)
        diff_into_p_kernel[(triton.cdiv(n, 1024),)](predictions, targets, n, BLOCK=1024)
        mean_sq_kernel[(1,)](predictions, out, n, BLOCK=1024)
        return out
