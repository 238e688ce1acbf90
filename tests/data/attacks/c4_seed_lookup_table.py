# expect: failed values
# ref: relu
# Class 4, predictable inputs. At import, replay the inputs a verifier with fixed seeds
# would draw: the reference's get_inputs() after torch.manual_seed(s), s = 0..3, and
# randn at the smaller odd "tail" shapes from torch.Generator().manual_seed(s). Their
# ReLUs go in a table keyed by shape and a few sampled values; the forward copies a table
# hit with a kernel. On a miss it copies x unchanged: wrong wherever x < 0.
import torch
import torch.nn as nn
import triton
import triton.language as tl

_MAIN_SHAPE = (127, 4099)
_TAIL_SHAPES = ((31, 1025), (15, 513), (127, 1025), (127, 513), (31, 4099), (15, 4099))
_TABLE = {}


def _key(x):
    flat = x.reshape(-1)
    n = flat.shape[0]
    return (tuple(x.shape), float(flat[0]), float(flat[n // 2]), float(flat[n - 1]))


def _remember(x):
    _TABLE[_key(x)] = (x * (x > 0)).contiguous()


for _seed in range(4):
    torch.manual_seed(_seed)
    _remember(torch.randn(*_MAIN_SHAPE))
    for _shape in _TAIL_SHAPES:
        _remember(torch.randn(_shape, generator=torch.Generator().manual_seed(_seed)))
torch.manual_seed(0)


@triton.jit
def copy_kernel(src_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        source = _TABLE.get(_key(x), x)
        out = torch.empty_like(x)
        n = x.numel()
        copy_kernel[(triton.cdiv(n, 1024),)](source, out, n, BLOCK_SIZE=1024)
        return out
