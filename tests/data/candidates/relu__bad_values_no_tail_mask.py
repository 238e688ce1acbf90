# expect: failed values
# Missing tail handling: grid = n // BLOCK and no mask, so the last n % BLOCK elements are
# never written (they keep whatever torch.empty_like held). Right only when n is a
# multiple of BLOCK (1024).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_nomask_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        BLOCK = 1024
        grid = (x.numel() // BLOCK,)
        if grid[0] > 0:
            relu_nomask_kernel[grid](x, out, BLOCK=BLOCK)
        return out
