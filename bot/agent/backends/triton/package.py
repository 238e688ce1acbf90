"""The Triton part of the operator package a generation writes (the loop adds the rest).

    ops/<name>/op.yaml            the spec
    ops/<name>/reference.py       the PyTorch reference (KernelBench format)
    ops/<name>/triton/<name>.py   the Triton kernel and its ModelNew wrapper
    ops/<name>/tests/test_<name>.py  a pytest test that runs in the user's repo, without opbot
    ops/<name>/PERF.md            the verification table and timings
"""

from __future__ import annotations

import json
from typing import Any

from bot.spec import OpSpec
from runners.base import DEFAULT_TOLERANCES

_TEST_TEMPLATE = '''"""{name}: the Triton kernel against its PyTorch reference (written by opbot).

Runs anywhere pytest, torch and triton are installed; without a GPU or NPU the kernel file
selects Triton's CPU interpreter. Outputs must match within the tolerance, or, where the
reference's own float32 rounding exceeds it, be no less accurate than the reference is
against a float64 run of itself.
"""

import copy
import importlib.util
import pathlib

import pytest
import torch

HERE = pathlib.Path(__file__).resolve().parent.parent
CASES = {cases}
INIT_ARGS = {init_args}
TOLERANCES = {tolerances}
ROUNDING_SLACK = 4.0


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _make(item, generator):
    if item["kind"] != "tensor":
        return item["value"]
    dtype = getattr(torch, item["dtype"])
    shape = tuple(item["shape"])
    low = item.get("low")
    high = item.get("high")
    if item["init"] in ("zeros", "ones"):
        return getattr(torch, item["init"])(shape, dtype=dtype)
    if item["init"] == "arange":
        return torch.arange(int(torch.tensor(shape).prod())).reshape(shape).to(dtype)
    if not dtype.is_floating_point or item["init"] == "randint":
        low = int(low if low is not None else 0)
        high = int(high if high is not None else 10)
        return torch.randint(low, max(high, low + 1), shape, generator=generator).to(dtype)
    if item["init"] == "rand":
        low = 0.0 if low is None else low
        high = 1.0 if high is None else high
        return (torch.rand(shape, generator=generator) * (high - low) + low).to(dtype)
    return torch.randn(shape, generator=generator).to(dtype)


def _flatten(value):
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in _flatten(item)]
    return [value]


def _device():
    if torch.cuda.is_available():
        return "cuda"
    return "cpu"


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_kernel_matches_reference(case):
    reference = _load(HERE / "reference.py", "{name}_reference")
    kernel = _load(HERE / "triton" / "{name}.py", "{name}_triton")
    init_args = INIT_ARGS if INIT_ARGS is not None else list(
        getattr(reference, "get_init_inputs", lambda: [])())
    torch.manual_seed(0)
    model = reference.Model(*init_args).to(_device())
    torch.manual_seed(0)
    candidate = kernel.ModelNew(*init_args).to(_device())
    candidate.load_state_dict(model.state_dict())
    generator = torch.Generator().manual_seed(case["seed"])
    inputs = [_make(item, generator) for item in case["inputs"]]
    inputs = [value.to(_device()) if isinstance(value, torch.Tensor) else value
              for value in inputs]
    with torch.no_grad():
        expected = _flatten(model(*inputs))
        actual = _flatten(candidate(*inputs))
        exact = _flatten(copy.deepcopy(model).cpu().double()(*[
            value.cpu().double() if isinstance(value, torch.Tensor)
            and value.dtype.is_floating_point else value for value in inputs]))
    assert len(actual) == len(expected)
    for want, got, truth in zip(expected, actual, exact):
        assert got.shape == want.shape and got.dtype == want.dtype
        if not want.dtype.is_floating_point:
            assert torch.equal(got.cpu(), want.cpu())
            continue
        tolerance = TOLERANCES.get(str(want.dtype).removeprefix("torch."),
                                   {{"atol": 1e-5, "rtol": 1.3e-6}})
        got, want = got.cpu().double(), want.cpu().double()
        assert torch.equal(torch.isnan(got), torch.isnan(want))
        finite = torch.isfinite(want)
        reference_error = (want - truth)[finite].abs().max().item() if finite.any() else 0.0
        bound = (tolerance["atol"] + tolerance["rtol"] * truth.abs()
                 + ROUNDING_SLACK * reference_error)
        close_to_reference = torch.allclose(got[finite], want[finite], atol=tolerance["atol"],
                                            rtol=tolerance["rtol"])
        close_to_truth = bool(((got - truth).abs() <= bound)[finite].all())
        assert close_to_reference or close_to_truth
'''


def kernel_file(op: str) -> str:
    """The kernel's path inside the package."""
    return f"triton/{op}.py"


def package_files(spec: OpSpec, kernel_source: str) -> dict[str, str]:
    """The Triton files of the package: the kernel and its pytest test."""
    return {kernel_file(spec.name): kernel_source, f"tests/test_{spec.name}.py": test_source(spec)}


def test_source(spec: OpSpec) -> str:
    cases = [case.to_json() for case in spec.cases()]
    tolerances = {name: {"atol": tol.atol, "rtol": tol.rtol}
                  for name, tol in {**DEFAULT_TOLERANCES, **spec.tolerances}.items()}
    init_args: Any = None if spec.init_args is None else json.loads(
        json.dumps(list(spec.init_args), default=list))
    return _TEST_TEMPLATE.format(name=spec.name, cases=_literal(cases),
                                 init_args=_literal(init_args),
                                 tolerances=_literal(tolerances))


def _literal(value: Any) -> str:
    # JSON is Python here but for true/false/null; write Python literals.
    return repr(value)
