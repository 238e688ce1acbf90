# expect: failed dtype
# Accumulates "for accuracy" into a float64 scalar and returns it as float64 (the
# reference returns float32). The value itself is right.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def mse_f64_kernel(p_ptr, t_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    p = tl.load(p_ptr + offs, mask=mask, other=0.0).to(tl.float64)
    t = tl.load(t_ptr + offs, mask=mask, other=0.0).to(tl.float64)
    d = p - t
    tl.atomic_add(out_ptr, tl.sum(d * d, axis=0) / n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        p = predictions.contiguous()
        t = targets.contiguous()
        n = p.numel()
        out = torch.zeros((), dtype=torch.float64)
        mse_f64_kernel[(triton.cdiv(n, 1024),)](p, t, out, n, BLOCK=1024)
        return out
