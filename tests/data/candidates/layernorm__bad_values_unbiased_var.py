# expect: failed values
# Uses the unbiased variance (divides by N - 1) where LayerNorm uses the biased one (N):
# a relative error of about 1 / (2N), ~2.4e-4 for N = 2051. Fails an fp32 tolerance of
# 1e-4 on most elements with |y| > 0.7.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layernorm_kernel(x_ptr, y_ptr, w_ptr, b_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0)
    mean = tl.sum(acc, axis=0) / N
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0)
        d = tl.where(cols < N, x - mean, 0.0)
        acc += d * d
    var = tl.sum(acc, axis=0) / (N - 1)
    rstd = 1.0 / tl.sqrt(var + eps)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0)
        w = tl.load(w_ptr + cols, mask=mask)
        b = tl.load(b_ptr + cols, mask=mask)
        tl.store(y_ptr + row * N + cols, (x - mean) * rstd * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.ln = nn.LayerNorm(hidden, eps=1e-5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        N = x.shape[-1]
        y = torch.empty_like(x)
        layernorm_kernel[(x.numel() // N,)](x, y, self.ln.weight, self.ln.bias, N, self.ln.eps,
                                            BLOCK=512)
        return y
