"""Tests for bot.spec: loading, validating and writing op specs."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import sys
import textwrap
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema
import pytest

from bot import spec as spec_module
from bot.errors import BadInputError, SpecError
from bot.spec import (
    DTYPES,
    INIT_KINDS,
    MAX_YAML_BYTES,
    InputSpec,
    OpSpec,
    derive_op_name,
    load_spec,
    write_reference,
)
from runners.base import BACKENDS, DEFAULT_TOLERANCES, Tolerance

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "ops"
EXAMPLE_NAMES = ["gelu", "softmax", "rms_norm", "linear_relu"]
SCHEMA = Path(spec_module.__file__).parent / "schemas" / "op-spec.schema.json"

REFERENCE = textwrap.dedent("""\
    import torch
    from torch import nn


    class Model(nn.Module):
        \"\"\"Adds two tensors.

        More words.
        \"\"\"

        def forward(self, x, y):
            return x + y


    def get_inputs():
        return [torch.randn(4, 4), torch.randn(4, 4)]


    def get_init_inputs():
        return []
    """)

MINIMAL = "name: add\nreference: reference.py\n"


def write_op(directory: Path, text: str, reference: str | None = REFERENCE) -> Path:
    """An op folder holding op.yaml (and reference.py unless None); returns the op.yaml."""
    directory.mkdir(parents=True, exist_ok=True)
    if reference is not None:
        (directory / "reference.py").write_text(reference)
    path = directory / "op.yaml"
    path.write_text(text)
    return path


def spec_error(path: Path) -> SpecError:
    with pytest.raises(SpecError) as info:
        load_spec(path)
    return info.value


# --------------------------------------------------------------------------- the examples


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_example_loads(name: str) -> None:
    spec = load_spec(EXAMPLES / name / "op.yaml")
    assert spec.name == name
    assert spec.origin == "op.yaml"
    assert spec.reference_path == EXAMPLES / name / "reference.py"
    assert spec.reference_source == (EXAMPLES / name / "reference.py").read_text()
    assert spec.inputs is not None
    assert spec.cases()
    assert spec.perf_case() is not None


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_example_shapes_are_modest_and_irregular(name: str) -> None:
    spec = load_spec(EXAMPLES / name / "op.yaml")
    shapes = [item.shape for case in spec.cases() for item in case.inputs if item.kind == "tensor"]
    perf = spec.perf_case()
    assert perf is not None
    shapes += [item.shape for item in perf.inputs if item.kind == "tensor"]
    # The CPU Triton interpreter runs these.
    assert all(math.prod(shape) <= 1 << 20 for shape in shapes)
    # Masked tails only get exercised by dims that are no multiple of a block size.
    assert any(all(dim % 16 for dim in shape) for shape in shapes)


def test_example_details() -> None:
    gelu = load_spec(EXAMPLES / "gelu" / "op.yaml")
    assert [case.name for case in gelu.cases()] == [
        "shape0-float32", "shape0-float16", "shape1-float32", "shape1-float16",
        "shape2-float32", "shape2-float16",
    ]
    assert gelu.loose_tolerances == ("float16",)
    assert gelu.targets == ("triton", "ascendc")
    assert gelu.socs == ("Ascend910B3",)
    softmax = load_spec(EXAMPLES / "softmax" / "op.yaml")
    assert softmax.inputs is not None
    assert (softmax.inputs[0].init, softmax.inputs[0].low, softmax.inputs[0].high) == (
        "rand", -100, 100)
    assert softmax.loose_tolerances == ()
    assert softmax.tolerances == {}
    rms_norm = load_spec(EXAMPLES / "rms_norm" / "op.yaml")
    assert rms_norm.init_args == (1000, 1e-6)
    assert rms_norm.derive_tail_cases is False
    linear = load_spec(EXAMPLES / "linear_relu" / "op.yaml")
    assert linear.init_args == (300, 77)
    assert linear.loose_tolerances == ("float32",)


def import_reference(path: Path) -> ModuleType:
    # exec rather than an import: no __pycache__ left in the examples, nothing in sys.modules.
    module = ModuleType(f"reference_{path.parent.name}")
    exec(compile(path.read_text(), str(path), "exec"), module.__dict__)
    return module


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_example_reference_matches_its_spec(name: str) -> None:
    torch = pytest.importorskip("torch")
    spec = load_spec(EXAMPLES / name / "op.yaml")
    module = import_reference(EXAMPLES / name / "reference.py")
    first = spec.cases()[0]
    assert [list(tensor.shape) for tensor in module.get_inputs()] == [
        item.shape for item in first.inputs]
    assert tuple(module.get_init_inputs()) == (spec.init_args or ())
    model = module.Model(*module.get_init_inputs())
    for case in spec.cases():
        args = [torch.zeros(item.shape, dtype=getattr(torch, item.dtype)) for item in case.inputs]
        assert torch.isfinite(model(*args)).all(), case.name


# --------------------------------------------------------------------------- round trips


def test_examples_round_trip(tmp_path: Path) -> None:
    for name in EXAMPLE_NAMES:
        folder = tmp_path / name
        shutil.copytree(EXAMPLES / name, folder)
        original = load_spec(folder / "op.yaml")
        (folder / "op.yaml").write_text(original.to_yaml())
        assert load_spec(folder / "op.yaml") == original, name


FULL = textwrap.dedent("""\
    name: scaled_add
    description: |-
      x * alpha + y
      over two lines
    reference: reference.py
    inputs:
      - name: x
        dtypes: [float32, float16, bfloat16]
        shapes: [[8, 8], [1000, 37]]
        init: rand
        low: -2
        high: 2.5
      - name: y
        dtypes: [int64]
        shapes: [[8], [37]]
        init: randint
        low: 0
        high: 10
      - name: alpha
        value: 0.5
      - name: dims
        value: [1, [2, 3]]
      - name: mode
        value: "1e-3"
      - name: flag
        value: null
    init_args: [3, true, "yes", [4, 5]]
    tolerance:
      float16: {atol: 1e-3}
      float32: {atol: 1.0e-6, rtol: 1.0e-6}
    targets: [ascendc, triton]
    socs: [Ascend910B3, Ascend310P]
    perf:
      shapes: [[64, 64], [64]]
    derive_tail_cases: false
    """)


def test_round_trip_keeps_every_field(tmp_path: Path) -> None:
    path = write_op(tmp_path / "op", FULL)
    original = load_spec(path)
    path.write_text(original.to_yaml())
    again = load_spec(path)
    assert again == original
    # The fields a lossy writer would most likely drop or retype.
    assert again.inputs is not None
    assert again.inputs[4].value == "1e-3"
    assert again.inputs[5].value is None
    assert not again.inputs[5].is_tensor
    assert again.inputs[3].value == (1, (2, 3))
    assert again.init_args == (3, True, "yes", (4, 5))
    assert again.description == "x * alpha + y\nover two lines"
    default_rtol = DEFAULT_TOLERANCES["float16"].rtol
    assert again.tolerances["float16"] == Tolerance(atol=1e-3, rtol=default_rtol)


def test_to_yaml_points_at_the_given_reference(tmp_path: Path) -> None:
    spec = load_spec(write_op(tmp_path / "op", MINIMAL))
    text = spec.to_yaml(reference="impl/ref.py")
    assert "reference: impl/ref.py" in text
    folder = tmp_path / "other"
    write_reference(spec, folder / "impl" / "ref.py")
    (folder / "op.yaml").write_text(text)
    again = load_spec(folder / "op.yaml")
    assert again.reference_path == folder / "impl" / "ref.py"
    assert again.reference_source == REFERENCE
    assert again.inputs is None
    assert again.init_args is None


def test_inline_reference_round_trips_through_a_file(tmp_path: Path) -> None:
    inline = "name: add\nreference:\n  source: |\n" + textwrap.indent(REFERENCE, "    ")
    path = write_op(tmp_path / "op", inline, reference=None)
    spec = load_spec(path)
    assert spec.reference_path is None
    assert spec.reference_source == REFERENCE
    write_reference(spec, tmp_path / "op" / "reference.py")
    path.write_text(spec.to_yaml())
    again = load_spec(path)
    assert again == dataclasses.replace(spec, reference_path=tmp_path / "op" / "reference.py")


def test_kernelbench_with_inputs_round_trips_as_op_yaml(tmp_path: Path) -> None:
    source = tmp_path / "12_Add.py"
    source.write_text(REFERENCE)
    spec = load_spec(source).with_inputs(
        [InputSpec("x", ("float32",), ((4, 4),)), InputSpec("y", ("float32",), ((4, 4),))], [])
    assert spec.init_args == ()
    folder = tmp_path / "ops" / spec.name
    write_reference(spec, folder / "reference.py")
    (folder / "op.yaml").write_text(spec.to_yaml())
    again = load_spec(folder / "op.yaml")
    assert again.origin == "op.yaml"
    assert (again.name, again.inputs, again.init_args) == ("add", spec.inputs, ())
    assert again.cases() == spec.cases()


def test_exponent_floats_read_as_numbers(tmp_path: Path) -> None:
    text = MINIMAL + "tolerance:\n  float32: {atol: 1e-3, rtol: 2E-4}\n"
    spec = load_spec(write_op(tmp_path, text))
    assert spec.tolerances == {"float32": Tolerance(atol=1e-3, rtol=2e-4)}


# --------------------------------------------------------------------------- cases


def two_input_spec(tmp_path: Path, extra: str = "") -> OpSpec:
    text = MINIMAL + textwrap.dedent("""\
        inputs:
          - name: x
            dtypes: [float32, float16]
            shapes: [[4, 5], [1000, 37]]
          - name: w
            dtypes: [float32]
            shapes: [[5], [37]]
            init: ones
          - name: axes
            value: [0, 1]
        """) + extra
    return load_spec(write_op(tmp_path, text))


def test_cases_cross_shape_and_dtype_cases(tmp_path: Path) -> None:
    cases = two_input_spec(tmp_path).cases()
    assert [case.name for case in cases] == [
        "shape0-float32", "shape0-float16-float32", "shape1-float32", "shape1-float16-float32"]
    assert [case.seed for case in cases] == [0, 1, 2, 3]
    third = cases[2].inputs
    assert [(item.kind, item.shape, item.dtype) for item in third[:2]] == [
        ("tensor", [1000, 37], "float32"), ("tensor", [37], "float32")]
    assert third[1].init == "ones"
    assert (third[2].kind, third[2].value) == ("value", [0, 1])
    assert cases[1].inputs[0].dtype == "float16"


def test_perf_case_uses_first_dtypes_and_a_fresh_seed(tmp_path: Path) -> None:
    spec = two_input_spec(tmp_path, "perf:\n  shapes: [[64, 48], [48]]\n")
    perf = spec.perf_case()
    assert perf is not None
    assert perf.name == "perf"
    assert perf.seed not in {case.seed for case in spec.cases()}
    assert [(item.shape, item.dtype) for item in perf.inputs[:2]] == [
        ([64, 48], "float32"), ([48], "float32")]


def test_no_perf_case_without_perf_shapes(tmp_path: Path) -> None:
    assert two_input_spec(tmp_path).perf_case() is None


def test_kernelbench_spec_has_no_cases(tmp_path: Path) -> None:
    path = tmp_path / "1_Add.py"
    path.write_text(REFERENCE)
    spec = load_spec(path)
    assert spec.cases() == []
    assert spec.perf_case() is None


def test_to_request(tmp_path: Path) -> None:
    spec = two_input_spec(tmp_path, "init_args: [[1, 2]]\ntolerance:\n  float16: {rtol: 0.01}\n")
    request = spec.to_request(tmp_path / "cand.py", backend="ascendc",
                              reference_file=tmp_path / "ref.py", time_it=True, timeout_s=9.0)
    assert request.reference == tmp_path / "ref.py"
    assert request.candidate == tmp_path / "cand.py"
    assert request.backend == "ascendc"
    assert request.cases == spec.cases()
    assert request.init_args == [[1, 2]]
    assert request.tolerances["float16"] == Tolerance(atol=1e-5, rtol=0.01)
    assert request.tolerances["float64"] == DEFAULT_TOLERANCES["float64"]
    assert (request.time_it, request.timeout_s, request.derive_tail_cases) == (True, 9.0, True)
    json.dumps(request.to_json())  # crosses a process boundary as JSON
    with pytest.raises(BadInputError, match="unknown backend"):
        spec.to_request(tmp_path / "cand.py", backend="cuda", reference_file=tmp_path / "r.py")


def test_to_request_leaves_kernelbench_init_args_to_the_reference(tmp_path: Path) -> None:
    path = tmp_path / "1_Add.py"
    path.write_text(REFERENCE)
    request = load_spec(path).to_request(tmp_path / "c.py", reference_file=path)
    assert request.init_args is None
    assert request.cases == []


# --------------------------------------------------------------------------- tolerances


def test_tolerance_defaults(tmp_path: Path) -> None:
    spec = load_spec(write_op(tmp_path, MINIMAL))
    assert spec.tolerances == {}
    assert spec.tolerance_table() == DEFAULT_TOLERANCES
    assert spec.loose_tolerances == ()


def test_loose_tolerances_are_recorded(tmp_path: Path) -> None:
    text = MINIMAL + textwrap.dedent("""\
        tolerance:
          float64: {atol: 1.0e-9, rtol: 1.0e-9}
          bfloat16: {rtol: 0.05}
          float32: {atol: 1.0e-5}
          float16: {atol: 0.1, rtol: 0.1}
        """)
    spec = load_spec(write_op(tmp_path, text))
    # Tighter (float64) or equal to the default (float32) is not loose.
    assert spec.loose_tolerances == ("bfloat16", "float16")
    assert spec.tolerance_table()["float16"] == Tolerance(atol=0.1, rtol=0.1)
    assert spec.tolerance_table()["float32"] == DEFAULT_TOLERANCES["float32"]


# --------------------------------------------------------------------------- malformed op.yaml

TENSOR = "inputs:\n  - name: x\n    dtypes: [float32]\n    shapes: [[4]]\n"

MALFORMED = {
    "unknown key, did you mean": (
        MINIMAL + "inputs:\n  - name: x\n    dtype: [float32]\n    shapes: [[4]]\n",
        5, "inputs[0].dtype", "unknown key 'dtype' (did you mean 'dtypes'?)"),
    "unknown top-level key": (
        "name: add\nreference: reference.py\ntarget: [triton]\n",
        3, "target", "did you mean 'targets'?"),
    "wrong type": (
        MINIMAL + "inputs:\n  - name: x\n    dtypes: float32\n    shapes: [[4]]\n",
        5, "inputs[0].dtypes", "expected a list, got a string 'float32' (write a list: [float32])"),
    "bad dtype": (
        MINIMAL + "inputs:\n  - name: x\n    dtypes: [float32, fp16]\n    shapes: [[4]]\n",
        5, "inputs[0].dtypes[1]", "did you mean 'float16'?"),
    "shape case counts differ": (
        MINIMAL + TENSOR + "  - name: y\n    dtypes: [float32]\n    shapes: [[4], [5]]\n",
        9, "inputs[1].shapes", "has 2 shape cases but inputs[0].shapes has 1"),
    "dtype list lengths differ": (
        MINIMAL + "inputs:\n  - name: x\n    dtypes: [float32, float16]\n    shapes: [[4]]\n"
        "  - name: y\n    dtypes: [int64, int32, int8]\n    shapes: [[4]]\n",
        8, "inputs[1].dtypes", "has 3 dtypes but inputs[0].dtypes has 2"),
    "value and shapes both set": (
        MINIMAL + TENSOR + "  - name: alpha\n    value: 0.5\n    shapes: [[4]]\n",
        9, "inputs[1].shapes", "takes no dtypes, shapes"),
    "tensor without shapes": (
        MINIMAL + "inputs:\n  - name: x\n    dtypes: [float32]\n",
        4, "inputs[0].shapes", "missing required key 'shapes'"),
    "name with ../": (
        "name: ../etc\nreference: reference.py\n", 1, "name", "'../etc' is not allowed"),
    "name too long": (
        f"name: {'a' * 65}\nreference: reference.py\n", 1, "name", "at most 64"),
    "missing name": ("reference: reference.py\n", 1, "name", "missing required key 'name'"),
    "unknown target": (MINIMAL + "targets: [triton, cuda]\n", 3, "targets[1]", "'cuda'"),
    "negative dim": (
        MINIMAL + "inputs:\n  - name: x\n    dtypes: [float32]\n    shapes: [[4, -1]]\n",
        6, "inputs[0].shapes[0][1]", "below the minimum"),
    "repeated dtype": (
        MINIMAL + "inputs:\n  - name: x\n    dtypes: [float16, float16]\n    shapes: [[4]]\n",
        5, "inputs[0].dtypes", "'float16' more than once"),
    "tolerance for an int dtype": (
        MINIMAL + "tolerance:\n  int64: {atol: 1}\n", 4, "tolerance.int64", "unknown key"),
    "negative tolerance": (
        MINIMAL + "tolerance:\n  float32:\n    atol: -1.0e-3\n", 5, "tolerance.float32.atol",
        "below the minimum"),
    "low with randn": (
        MINIMAL + TENSOR + "    low: 1\n", 7, "inputs[0].low", "only to init rand or randint"),
    "low above high": (
        MINIMAL + TENSOR + "    init: rand\n    low: 3\n    high: 1\n", 9, "inputs[0].high",
        "greater than low"),
    "duplicate input name": (
        MINIMAL + TENSOR + "  - name: x\n    value: 1\n", 7, "inputs[1].name", "already the name"),
    "only value inputs": (
        MINIMAL + "inputs:\n  - name: a\n    value: 1\n", 3, "inputs", "at least one input"),
    "perf without inputs": (
        MINIMAL + "perf:\n  shapes: [[4]]\n", 4, "perf.shapes", "needs 'inputs'"),
    "perf shape count": (
        MINIMAL + TENSOR + "perf:\n  shapes: [[4], [4]]\n", 8, "perf.shapes",
        "has 2 shapes for 1 tensor input"),
    "reference not a .py": ("name: add\nreference: ref.txt\n", 2, "reference", "'ref.txt'"),
    "reference with ..": (
        "name: add\nreference: ../reference.py\n", 2, "reference", "inside the op's folder"),
    "reference absolute": (
        "name: add\nreference: /etc/reference.py\n", 2, "reference", "inside the op's folder"),
    "missing reference file": (
        "name: add\n\nreference: nope.py\n", 3, "reference", "does not exist"),
    "a date for a name": ("name: 2024-01-01\nreference: reference.py\n", 1, "name", "a date"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_spec_names_line_and_field(tmp_path: Path, case: str) -> None:
    text, line, field, fragment = MALFORMED[case]
    path = write_op(tmp_path, text)
    error = spec_error(path)
    assert (error.file, error.line, error.field) == (str(path), line, field)
    assert fragment in error.detail
    assert str(error).startswith(f"{path}:{line}: field '{field}': ")


WITHOUT_FIELD = {
    "invalid YAML": (MINIMAL + "inputs:\n  - name: x\n   dtypes: [float32]\n", 5, "invalid YAML"),
    "tab indentation": ("name: add\n\treference: reference.py\n", 2, "invalid YAML"),
    "two documents": (MINIMAL + "---\nname: other\n", 3, "a single document"),
    "list at top level": ("- name: add\n", 1, "must be a mapping"),
    "scalar at top level": ("\n\njust text\n", 3, "must be a mapping"),
    "duplicate key": (MINIMAL + "name: again\n", 3, "duplicate key 'name'"),
    "boolean key": (MINIMAL + "on: true\n", 3, "keys must be plain names"),
    "alias that contains itself": ("name: &a [*a]\n", 1, "contains it"),
    "control character": ("name: add\nreference: ref\x07.py\n", 2, "invalid YAML"),
}


@pytest.mark.parametrize("case", list(WITHOUT_FIELD))
def test_unreadable_yaml_names_the_line(tmp_path: Path, case: str) -> None:
    text, line, fragment = WITHOUT_FIELD[case]
    path = write_op(tmp_path, text)
    error = spec_error(path)
    assert (error.file, error.line) == (str(path), line)
    assert fragment in error.detail


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "~\n"])
def test_empty_spec(tmp_path: Path, text: str) -> None:
    error = spec_error(write_op(tmp_path, text))
    assert "empty" in error.detail


def test_unknown_key_beats_the_missing_key_it_causes(tmp_path: Path) -> None:
    # "dtype" for "dtypes" also makes dtypes missing; the typo is the one to report.
    text = MINIMAL + "inputs:\n  - name: x\n    shapes: [[4]]\n    dtype: [float32]\n"
    error = spec_error(write_op(tmp_path, text))
    assert (error.line, error.field) == (6, "inputs[0].dtype")


def test_earliest_problem_is_reported(tmp_path: Path) -> None:
    text = MINIMAL + "socs: oops\ntargets: [cuda]\n"
    assert spec_error(write_op(tmp_path, text)).field == "socs"


def test_alias_bomb_is_refused_quickly(tmp_path: Path) -> None:
    lines = ["a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    for level in "bcdefgh":
        previous = chr(ord(level) - 1)
        lines.append(f"{level}: &{level} [" + ", ".join([f"*{previous}"] * 10) + "]")
    path = write_op(tmp_path, "\n".join(lines) + "\n")
    started = time.monotonic()
    error = spec_error(path)
    assert time.monotonic() - started < 5
    assert "YAML nodes" in error.detail


def test_deep_nesting_is_refused(tmp_path: Path) -> None:
    for depth in (40, 5000):
        text = MINIMAL + "init_args: " + "[" * depth + "]" * depth + "\n"
        error = spec_error(write_op(tmp_path, text))
        assert "nested" in error.detail


def test_aliases_are_allowed(tmp_path: Path) -> None:
    text = MINIMAL + textwrap.dedent("""\
        inputs:
          - name: x
            dtypes: &types [float32, float16]
            shapes: &shapes [[4, 4], [1000, 37]]
          - name: y
            dtypes: *types
            shapes: *shapes
        """)
    spec = load_spec(write_op(tmp_path, text))
    assert spec.inputs is not None
    assert spec.inputs[0].shapes == spec.inputs[1].shapes == ((4, 4), (1000, 37))


def test_merge_keys_are_allowed_and_local_keys_win(tmp_path: Path) -> None:
    text = MINIMAL + textwrap.dedent("""\
        inputs:
          - &first
            name: x
            dtypes: [float32]
            shapes: [[4]]
          - <<: *first
            name: y
          - <<: *first
            name: x
        """)
    path = write_op(tmp_path, text)
    error = spec_error(path)
    # The third input's own "name: x" (line 11), not the merged one from line 5.
    assert (error.line, error.field) == (11, "inputs[2].name")
    path.write_text(text.rsplit("  - <<", 1)[0])
    spec = load_spec(path)
    assert spec.inputs is not None
    assert spec.inputs[1] == InputSpec("y", ("float32",), ((4,),))


# --------------------------------------------------------------------------- the reference


def test_reference_without_model(tmp_path: Path) -> None:
    path = write_op(tmp_path, "name: add\nreference: reference.py\n",
                    reference="def get_inputs():\n    return []\n")
    error = spec_error(path)
    assert (error.file, error.line, error.field) == (str(path), 2, "reference")
    assert "class Model" in error.detail


def test_model_must_be_top_level(tmp_path: Path) -> None:
    nested = "if True:\n    class Model:\n        pass\n\ndef get_inputs():\n    return []\n"
    error = spec_error(write_op(tmp_path, MINIMAL, reference=nested))
    assert "class Model" in error.detail


def test_reference_syntax_error_names_the_reference_and_its_line(tmp_path: Path) -> None:
    broken = "import torch\n\nclass Model:\n    def forward(self, x)\n        return x\n"
    path = write_op(tmp_path, MINIMAL, reference=broken)
    error = spec_error(path)
    assert (error.file, error.line) == (str(tmp_path / "reference.py"), 4)
    assert "invalid Python syntax" in error.detail


def test_inline_reference_syntax_error_maps_to_the_yaml_line(tmp_path: Path) -> None:
    text = textwrap.dedent("""\
        name: add
        reference:
          source: |
            import torch

            class Model:
                def forward(self, x)
                    return x
        """)
    path = write_op(tmp_path, text, reference=None)
    error = spec_error(path)
    assert (error.file, error.line) == (str(path), 7)
    assert "line 4 of the inline source" in error.detail


def test_reference_needs_get_inputs_only_without_inputs(tmp_path: Path) -> None:
    no_get_inputs = "class Model:\n    pass\n"
    error = spec_error(write_op(tmp_path / "a", MINIMAL, reference=no_get_inputs))
    assert (error.line, error.field) == (2, "reference")
    assert "get_inputs" in error.detail
    spec = load_spec(write_op(tmp_path / "b", MINIMAL + TENSOR, reference=no_get_inputs))
    assert spec.inputs is not None


def test_reference_that_is_a_directory(tmp_path: Path) -> None:
    path = write_op(tmp_path, "name: add\nreference: sub.py\n")
    (tmp_path / "sub.py").mkdir()
    error = spec_error(path)
    assert (error.line, error.field) == (2, "reference")
    assert "is not a file" in error.detail


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_reference_symlink_out_of_the_folder(tmp_path: Path) -> None:
    outside = tmp_path / "secret.py"
    outside.write_text(REFERENCE)
    path = write_op(tmp_path / "op", "name: add\nreference: link.py\n")
    (tmp_path / "op" / "link.py").symlink_to(outside)
    error = spec_error(path)
    assert (error.line, error.field) == (2, "reference")
    assert "outside" in error.detail


def test_non_utf8_reference(tmp_path: Path) -> None:
    path = write_op(tmp_path, MINIMAL, reference=None)
    (tmp_path / "reference.py").write_bytes(b"# ok\n# caf\xe9\n")
    error = spec_error(path)
    assert (error.file, error.line) == (str(tmp_path / "reference.py"), 2)
    assert "UTF-8" in error.detail


# --------------------------------------------------------------------------- the file itself


def test_missing_file(tmp_path: Path) -> None:
    error = spec_error(tmp_path / "op.yaml")
    assert error.file == str(tmp_path / "op.yaml")
    assert "not found" in error.detail


def test_directory_suggests_its_op_yaml(tmp_path: Path) -> None:
    write_op(tmp_path / "gelu", MINIMAL)
    error = spec_error(tmp_path / "gelu")
    assert "directory" in error.detail
    assert str(tmp_path / "gelu" / "op.yaml") in error.detail
    (tmp_path / "x.yaml").mkdir()
    assert "directory" in spec_error(tmp_path / "x.yaml").detail


def test_non_utf8_spec(tmp_path: Path) -> None:
    path = tmp_path / "op.yaml"
    path.write_bytes(b"name: add\ndescription: caf\xe9\n")
    error = spec_error(path)
    assert error.line == 2
    assert "UTF-8" in error.detail


def test_huge_spec_is_refused_without_parsing(tmp_path: Path) -> None:
    path = tmp_path / "op.yaml"
    path.write_bytes(b"name: add\n" + b"# padding\n" * 1_000_000)  # 10 MB
    started = time.monotonic()
    error = spec_error(path)
    assert time.monotonic() - started < 2
    assert f"{MAX_YAML_BYTES // 1024} KiB" in error.detail


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_is_refused_not_read(tmp_path: Path) -> None:
    path = tmp_path / "op.yaml"
    os.mkfifo(path)
    assert "regular file" in spec_error(path).detail


def test_unknown_suffix_is_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "op.json"
    path.write_text("{}")
    with pytest.raises(BadInputError, match=r"op\.yaml") as info:
        load_spec(path)
    assert not isinstance(info.value, SpecError)


def test_yml_suffix_and_str_path(tmp_path: Path) -> None:
    write_op(tmp_path, MINIMAL)
    (tmp_path / "op.yaml").rename(tmp_path / "op.YML")
    assert load_spec(str(tmp_path / "op.YML")).name == "add"


# --------------------------------------------------------------------------- KernelBench .py


def test_kernelbench_file(tmp_path: Path) -> None:
    path = tmp_path / "19_ReLU.py"
    path.write_text(REFERENCE)
    spec = load_spec(path)
    assert spec.origin == "kernelbench"
    assert spec.name == "relu"
    assert spec.description == "Adds two tensors."
    assert (spec.spec_path, spec.reference_path, spec.reference_source) == (path, path, REFERENCE)
    assert spec.inputs is None
    assert spec.init_args is None
    assert spec.targets == ("triton",)
    assert spec.derive_tail_cases is True
    assert spec.tolerance_table() == DEFAULT_TOLERANCES


@pytest.mark.parametrize(("stem", "name"), [
    ("19_ReLU", "relu"),
    ("23_Softmax", "softmax"),
    ("1_Square_matrix_multiplication_", "square_matrix_multiplication"),
    ("36_RMSNorm_", "rmsnorm"),
    ("Conv2d-Transpose (3x3)", "conv2d_transpose__3x3"),
    ("2_3", "op"),
    ("__", "op"),
    ("Élan", "lan"),
])
def test_derive_op_name(stem: str, name: str) -> None:
    assert derive_op_name(stem) == name


def test_derived_names_are_valid_op_names() -> None:
    schema = json.loads(SCHEMA.read_text())
    validator = jsonschema.Draft202012Validator(schema["properties"]["name"])
    for stem in ["9" * 80 + "x" * 80, "a_" * 50, "Matmul for 3D tensor", "ü"]:
        assert validator.is_valid(derive_op_name(stem)), stem


def test_kernelbench_syntax_error(tmp_path: Path) -> None:
    path = tmp_path / "5_Bad.py"
    path.write_text("import torch\n\n\nclass Model(:\n    pass\n")
    error = spec_error(path)
    assert (error.file, error.line) == (str(path), 4)


@pytest.mark.parametrize(("source", "missing"), [
    ("def get_inputs():\n    return []\n", "class Model"),
    ("Model = object\ndef get_inputs():\n    return []\n", "class Model"),
    ("class Model:\n    pass\n", "get_inputs"),
    ("class Model:\n    def get_inputs(self):\n        return []\n", "get_inputs"),
])
def test_kernelbench_needs_model_and_get_inputs(tmp_path: Path, source: str,
                                                missing: str) -> None:
    path = tmp_path / "7_Op.py"
    path.write_text(source)
    error = spec_error(path)
    assert error.file == str(path)
    assert missing in error.detail


def test_kernelbench_file_is_never_executed(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    path = tmp_path / "3_Sneaky.py"
    path.write_text(f"open({str(marker)!r}, 'w').close()\n" + REFERENCE)
    load_spec(path)
    assert not marker.exists()
    assert "3_Sneaky" not in sys.modules


def test_kernelbench_null_byte(tmp_path: Path) -> None:
    path = tmp_path / "4_Nul.py"
    path.write_text("class Model:\x00 pass\n")
    assert spec_error(path).file == str(path)


# --------------------------------------------------------------------------- with_inputs


def kernelbench_spec(tmp_path: Path) -> OpSpec:
    path = tmp_path / "1_Add.py"
    path.write_text(REFERENCE)
    return load_spec(path)


def test_with_inputs_sets_inputs_and_init_args(tmp_path: Path) -> None:
    spec = kernelbench_spec(tmp_path).with_inputs(
        [InputSpec("x", ("float32",), ((4, 4),)), InputSpec("k", value=[1, 2])], [8, [1, 2]])
    assert spec.inputs is not None
    assert spec.inputs[1].value == (1, 2)  # frozen, so the spec stays hashable-by-parts
    assert spec.init_args == (8, (1, 2))
    assert [case.name for case in spec.cases()] == ["shape0-float32"]
    assert spec.to_request(tmp_path / "c.py", reference_file=tmp_path / "r.py").init_args == [
        8, [1, 2]]


def test_with_inputs_checks_the_inputs(tmp_path: Path) -> None:
    spec = kernelbench_spec(tmp_path)
    with pytest.raises(SpecError) as info:
        spec.with_inputs([InputSpec("x", ("float32",), ((4,), (5,))),
                          InputSpec("y", ("float32",), ((4,),))], None)
    assert info.value.field == "inputs[1].shapes"
    assert info.value.file == str(tmp_path / "1_Add.py")
    with pytest.raises(SpecError, match="unknown dtype 'complex64'"):
        spec.with_inputs([InputSpec("x", ("complex64",), ((4,),))], None)


# --------------------------------------------------------------------------- the schema


def test_schema_is_valid_and_matches_the_code() -> None:
    schema: dict[str, Any] = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    assert tuple(schema["$defs"]["dtype"]["enum"]) == DTYPES
    assert tuple(schema["properties"]["targets"]["items"]["enum"]) == BACKENDS
    assert set(schema["properties"]["tolerance"]["properties"]) == set(DEFAULT_TOLERANCES)
    assert tuple(schema["$defs"]["input"]["properties"]["init"]["enum"]) == INIT_KINDS
