"""add: the Ascend C kernel against its PyTorch reference (written by opbot).

On an Ascend machine: ./build.sh (builds libadd_ops.so, then runs `pytest -m npu` here).
With CANN but no NPU: ./build.sh --cpu builds the CPU twin and runs the cpu_twin tests.
Both compare every case (the spec's shapes and dtypes, plus odd-sized tails) with the
reference, within the spec's tolerances.
"""

import importlib.util
import json
import os
import pathlib
import subprocess

import pytest
import torch

HERE = pathlib.Path(__file__).resolve().parent
PACKAGE = HERE.parent  # ops/add/ascendc


def _path(variable, default):
    # Relative paths (the runner passes them) are relative to the package folder.
    value = pathlib.Path(os.environ.get(variable, default))
    return value if value.is_absolute() else PACKAGE / value


REFERENCE = _path("OPBOT_REFERENCE", PACKAGE.parent / "reference.py")
LIBRARY = _path("OPBOT_ASCENDC_LIB", "build-npu/libadd_ops.so")
CPU_TWIN = _path("OPBOT_ASCENDC_CPU_TWIN", "build-cpu/add_cpu_twin")
NAMESPACE = "opbot_add"
OP = "add"
CASES = [
    {'name': 'shape0-float32', 'seed': 0, 'inputs': [{'kind': 'tensor', 'shape': [127, 4099], 'dtype': 'float32', 'init': 'randn', 'low': None, 'high': None, 'value': None}, {'kind': 'tensor', 'shape': [127, 4099], 'dtype': 'float32', 'init': 'randn', 'low': None, 'high': None, 'value': None}]},
    {'name': 'shape0-float16', 'seed': 1, 'inputs': [{'kind': 'tensor', 'shape': [127, 4099], 'dtype': 'float16', 'init': 'randn', 'low': None, 'high': None, 'value': None}, {'kind': 'tensor', 'shape': [127, 4099], 'dtype': 'float16', 'init': 'randn', 'low': None, 'high': None, 'value': None}]},
    {'name': 'tail1-float32', 'seed': 2, 'inputs': [{'kind': 'tensor', 'shape': [1], 'dtype': 'float32', 'init': 'randn', 'low': None, 'high': None, 'value': None}, {'kind': 'tensor', 'shape': [1], 'dtype': 'float32', 'init': 'randn', 'low': None, 'high': None, 'value': None}]},
    {'name': 'tail31-float32', 'seed': 3, 'inputs': [{'kind': 'tensor', 'shape': [31], 'dtype': 'float32', 'init': 'randn', 'low': None, 'high': None, 'value': None}, {'kind': 'tensor', 'shape': [31], 'dtype': 'float32', 'init': 'randn', 'low': None, 'high': None, 'value': None}]},
    {'name': 'tail33-float32', 'seed': 4, 'inputs': [{'kind': 'tensor', 'shape': [33], 'dtype': 'float32', 'init': 'randn', 'low': None, 'high': None, 'value': None}, {'kind': 'tensor', 'shape': [33], 'dtype': 'float32', 'init': 'randn', 'low': None, 'high': None, 'value': None}]},
    {'name': 'tail1000003-float32', 'seed': 5, 'inputs': [{'kind': 'tensor', 'shape': [1000003], 'dtype': 'float32', 'init': 'randn', 'low': None, 'high': None, 'value': None}, {'kind': 'tensor', 'shape': [1000003], 'dtype': 'float32', 'init': 'randn', 'low': None, 'high': None, 'value': None}]},
    {'name': 'tail1-float16', 'seed': 6, 'inputs': [{'kind': 'tensor', 'shape': [1], 'dtype': 'float16', 'init': 'randn', 'low': None, 'high': None, 'value': None}, {'kind': 'tensor', 'shape': [1], 'dtype': 'float16', 'init': 'randn', 'low': None, 'high': None, 'value': None}]},
    {'name': 'tail31-float16', 'seed': 7, 'inputs': [{'kind': 'tensor', 'shape': [31], 'dtype': 'float16', 'init': 'randn', 'low': None, 'high': None, 'value': None}, {'kind': 'tensor', 'shape': [31], 'dtype': 'float16', 'init': 'randn', 'low': None, 'high': None, 'value': None}]},
    {'name': 'tail33-float16', 'seed': 8, 'inputs': [{'kind': 'tensor', 'shape': [33], 'dtype': 'float16', 'init': 'randn', 'low': None, 'high': None, 'value': None}, {'kind': 'tensor', 'shape': [33], 'dtype': 'float16', 'init': 'randn', 'low': None, 'high': None, 'value': None}]},
    {'name': 'tail1000003-float16', 'seed': 9, 'inputs': [{'kind': 'tensor', 'shape': [1000003], 'dtype': 'float16', 'init': 'randn', 'low': None, 'high': None, 'value': None}, {'kind': 'tensor', 'shape': [1000003], 'dtype': 'float16', 'init': 'randn', 'low': None, 'high': None, 'value': None}]},
]
INIT_ARGS = None
TOLERANCES = {
    'float64': {'atol': 1e-07, 'rtol': 1e-07},
    'float32': {'atol': 1e-05, 'rtol': 1.3e-06},
    'float16': {'atol': 1e-05, 'rtol': 0.001},
    'bfloat16': {'atol': 1e-05, 'rtol': 0.016},
}
# The core count and UB size the CPU twin tiles for (dav-2201 has 192 KB of UB); on the
# NPU the binding reads both from the platform at run time.
TWIN_CORES = int(os.environ.get("OPBOT_TWIN_CORES", "8"))
TWIN_UB_BYTES = int(os.environ.get("OPBOT_TWIN_UB_BYTES", str(192 * 1024)))


def _cases():
    # The runner may pass the request's own cases (a JSON list in CASES' format).
    override = os.environ.get("OPBOT_ASCENDC_CASES")
    if override:
        return json.loads(pathlib.Path(override).read_text(encoding="utf-8"))
    return CASES


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _model(device):
    reference = _load(REFERENCE, f"{OP}_reference")
    init_args = INIT_ARGS if INIT_ARGS is not None else list(
        getattr(reference, "get_init_inputs", lambda: [])())
    torch.manual_seed(0)
    return reference.Model(*init_args).to(device).eval()


def _make(item, generator):
    # The same inputs as opbot's harness makes for a case.
    if item["kind"] != "tensor":
        return item["value"]
    dtype = getattr(torch, item["dtype"])
    shape = tuple(item["shape"])
    low, high = item.get("low"), item.get("high")
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


def _inputs(case):
    generator = torch.Generator().manual_seed(case["seed"])
    return [_make(item, generator) for item in case["inputs"]]


def _flatten(value):
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in _flatten(item)]
    return [value]


def _truth(inputs):
    """The reference in float64 on the CPU: what "correct" means when the NPU's own
    float16 reference rounds differently from a kernel that computes in float32."""
    model = _model("cpu").double()
    with torch.no_grad():
        return _flatten(model(*[value.cpu().double() if isinstance(value, torch.Tensor)
                                and value.dtype.is_floating_point else value
                                for value in inputs]))


def _assert_matches(actual, expected, inputs):
    assert len(actual) == len(expected), f"{len(actual)} outputs, expected {len(expected)}"
    truth = None
    for index, (got, want) in enumerate(zip(actual, expected)):
        assert got.shape == want.shape and got.dtype == want.dtype
        tolerance = TOLERANCES.get(str(want.dtype).removeprefix("torch."),
                                   {"atol": 1e-5, "rtol": 1.3e-6})
        try:
            torch.testing.assert_close(got.cpu(), want.cpu(), atol=tolerance["atol"],
                                       rtol=tolerance["rtol"], equal_nan=True)
        except AssertionError:
            truth = truth or _truth(inputs)
            torch.testing.assert_close(got.cpu().double(), truth[index],
                                       atol=tolerance["atol"], rtol=tolerance["rtol"],
                                       equal_nan=True)


def _ids(case):
    return case["name"]


def _npu_op():
    """(torch_npu, the operator), or a skip saying what is missing."""
    torch_npu = pytest.importorskip("torch_npu")
    if not torch_npu.npu.is_available():
        pytest.skip("no NPU is visible")
    if not LIBRARY.exists():
        pytest.skip(f"{LIBRARY} is not built: run ./build.sh")
    torch.ops.load_library(str(LIBRARY))
    return torch_npu, getattr(getattr(torch.ops, NAMESPACE), OP)


def _tensors(values):
    return [value for value in values if isinstance(value, torch.Tensor)]


def _first_case():
    cases = _cases()
    if not cases:
        pytest.skip("no cases")
    return cases[0]


@pytest.mark.npu
@pytest.mark.parametrize("case", _cases(), ids=_ids)
def test_npu_matches_reference(case):
    torch_npu, op = _npu_op()
    inputs = [value.to("npu") if isinstance(value, torch.Tensor) else value
              for value in _inputs(case)]
    with torch.no_grad():
        expected = _flatten(_model("npu")(*inputs))
        actual = _flatten(op(*_tensors(inputs)))
    torch_npu.npu.synchronize()
    _assert_matches(actual, expected, inputs)


@pytest.mark.npu
def test_npu_waits_for_queued_producers():
    """Inputs written by ops still in torch_npu's task queue when the operator is called:
    the binding must empty the queue before it launches, or it reads them unwritten."""
    torch_npu, op = _npu_op()
    case = _first_case()
    inputs = [value.to("npu") if isinstance(value, torch.Tensor) else value
              for value in _inputs(case)]
    with torch.no_grad():
        expected = _flatten(_model("npu")(*inputs))
        torch_npu.npu.synchronize()
        produced = []
        for value in inputs:
            if isinstance(value, torch.Tensor):
                value = torch.zeros_like(value).copy_(value)
                for _ in range(32):  # keep the queue busy; adding 0 changes nothing
                    value = value.add_(0)
            produced.append(value)
        actual = _flatten(op(*_tensors(produced)))
    torch_npu.npu.synchronize()
    _assert_matches(actual, expected, inputs)


@pytest.mark.npu
def test_npu_refuses_tensors_on_other_devices():
    torch_npu, op = _npu_op()
    tensors = _tensors(_inputs(_first_case()))
    if len(tensors) < 2:
        pytest.skip("one tensor input: there is nothing to mix")
    with pytest.raises(RuntimeError, match="must be an NPU tensor"):
        op(tensors[0].to("npu"), *tensors[1:])  # the others stay on the CPU
    if torch_npu.npu.device_count() < 2:
        pytest.skip("one NPU: devices cannot be mixed")
    with pytest.raises(RuntimeError, match="one NPU device"):
        op(tensors[0].to("npu:0"), *[tensor.to("npu:1") for tensor in tensors[1:]])


@pytest.mark.npu
def test_npu_runs_on_the_inputs_device():
    """Inputs on another NPU than the current one: the launch follows them there."""
    torch_npu, op = _npu_op()
    if torch_npu.npu.device_count() < 2:
        pytest.skip("needs two NPUs")
    inputs = [value.to("npu:1") if isinstance(value, torch.Tensor) else value
              for value in _inputs(_first_case())]
    torch_npu.npu.set_device(0)
    with torch.no_grad():
        expected = _flatten(_model("npu:1")(*inputs))
        actual = _flatten(op(*_tensors(inputs)))
    torch_npu.npu.synchronize(1)
    assert all(tensor.device == inputs[0].device for tensor in actual)
    _assert_matches(actual, expected, inputs)


@pytest.mark.parametrize("case", _cases(), ids=_ids)
def test_cpu_twin_matches_reference(case, tmp_path):
    if not CPU_TWIN.exists():
        pytest.skip(f"{CPU_TWIN} is not built: run ./build.sh --cpu (needs CANN, no NPU)")
    inputs = _inputs(case)
    with torch.no_grad():
        expected = _flatten(_model("cpu")(*inputs))
    tensors = [value.contiguous() for value in inputs if isinstance(value, torch.Tensor)]
    in_files = []
    for index, tensor in enumerate(tensors):
        path = tmp_path / f"in{index}.bin"
        tensor.numpy().tofile(path)
        in_files.append(str(path))
    out_files = [str(tmp_path / f"out{index}.bin") for index in range(len(expected))]
    dtype = str(tensors[0].dtype).removeprefix("torch.")
    subprocess.run([str(CPU_TWIN), dtype, str(tensors[0].numel()), str(TWIN_CORES),
                    str(TWIN_UB_BYTES), *in_files, *out_files], check=True, timeout=900)
    actual = [torch.from_file(path, size=want.numel(), dtype=want.dtype).reshape(want.shape)
              for path, want in zip(out_files, expected)]
    _assert_matches(actual, expected, inputs)
