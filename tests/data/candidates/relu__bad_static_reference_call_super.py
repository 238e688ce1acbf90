# expect: failed static_reference_call
# ModelNew subclasses the reference Model and returns super().forward(x) after a token
# Triton launch.
import importlib.util
import pathlib
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _reference_model_class():
    for mod in list(sys.modules.values()):
        # look only at what a module really defines (torch.ops namespaces answer any name)
        names = getattr(mod, "__dict__", {})
        model = names.get("Model")
        if (isinstance(model, type) and issubclass(model, nn.Module)
                and callable(names.get("get_inputs")) and callable(names.get("get_init_inputs"))):
            return mod.Model
    path = pathlib.Path(__file__).resolve().parent / "refs" / "relu.py"
    spec = importlib.util.spec_from_file_location("_relu_reference", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.Model


Model = _reference_model_class()


@triton.jit
def noop_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.load(x_ptr + offs, mask=offs < 1, other=0.0)


class ModelNew(Model):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        noop_kernel[(1,)](x, BLOCK=16)
        return super().forward(x)
