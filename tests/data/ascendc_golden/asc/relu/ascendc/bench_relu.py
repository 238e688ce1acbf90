"""Time relu on an Ascend NPU: the Ascend C kernel against the PyTorch reference.

Written by opbot. Usage: python3 bench_relu.py [--warmup 20] [--trials 100]
Prints one JSON object (median, min and max milliseconds of each, and the speedup).
./build.sh --profile runs it under msopprof for per-kernel pipe utilisation.
"""

import argparse
import importlib.util
import json
import os
import pathlib
import statistics

import torch
import torch_npu

HERE = pathlib.Path(__file__).resolve().parent  # ops/relu/ascendc


def _path(variable, default):
    # Relative paths (the runner passes them) are relative to the package folder.
    value = pathlib.Path(os.environ.get(variable, default))
    return value if value.is_absolute() else HERE / value


REFERENCE = _path("OPBOT_REFERENCE", HERE.parent / "reference.py")
LIBRARY = _path("OPBOT_ASCENDC_LIB", "build-npu/librelu_ops.so")
NAMESPACE = "opbot_relu"
OP = "relu"
PERF_CASE = {
    'name': 'tail1000003-float32',
    'seed': 5,
    'inputs': [{'kind': 'tensor', 'shape': [1000003], 'dtype': 'float32', 'init': 'randn', 'low': None, 'high': None, 'value': None}],
}
INIT_ARGS = None


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


def time_ms(fn, warmup, trials):
    """Per-call device times from NPU events on the current stream.

    torch_npu queues its ops (the events too) and launches them from a task queue; the
    operator empties that queue before it launches, so a queued start event is on the
    stream ahead of the kernel and the end event after it. Synchronizing before each start
    leaves the stream idle, so no earlier work (the inputs' copies, the last trial) is
    counted.
    """
    stream = torch_npu.npu.current_stream()
    torch_npu.npu.synchronize()
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(trials):
        start = torch_npu.npu.Event(enable_timing=True)
        end = torch_npu.npu.Event(enable_timing=True)
        torch_npu.npu.synchronize()
        start.record(stream)
        fn()
        end.record(stream)
        end.synchronize()
        times.append(start.elapsed_time(end))
    torch_npu.npu.synchronize()
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--trials", type=int, default=100)
    options = parser.parse_args()
    torch.ops.load_library(str(LIBRARY))
    op = getattr(getattr(torch.ops, NAMESPACE), OP)
    reference = _load(REFERENCE, f"{OP}_reference")
    init_args = INIT_ARGS if INIT_ARGS is not None else list(
        getattr(reference, "get_init_inputs", lambda: [])())
    torch.manual_seed(0)
    model = reference.Model(*init_args).to("npu").eval()
    generator = torch.Generator().manual_seed(PERF_CASE["seed"])
    inputs = [value.to("npu") if isinstance(value, torch.Tensor) else value
              for value in (_make(item, generator) for item in PERF_CASE["inputs"])]
    tensors = [value for value in inputs if isinstance(value, torch.Tensor)]
    with torch.no_grad():
        candidate = time_ms(lambda: op(*tensors), options.warmup, options.trials)
        baseline = time_ms(lambda: model(*inputs), options.warmup, options.trials)
    median = statistics.median(candidate)
    reference_ms = statistics.median(baseline)
    print(json.dumps({
        "op": OP, "device": "npu", "shapes": [list(t.shape) for t in tensors],
        "dtype": str(tensors[0].dtype).removeprefix("torch."), "trials": options.trials,
        "candidate_ms": median, "candidate_min_ms": min(candidate),
        "candidate_max_ms": max(candidate), "reference_ms": reference_ms,
        "speedup": reference_ms / median if median > 0 else 0.0,
    }))


if __name__ == "__main__":
    main()
