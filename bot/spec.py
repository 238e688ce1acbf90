"""The operator spec: what an op computes, on which inputs, and how closely it must match.

A spec comes from one of two files, chosen by suffix in `load_spec`:

* ``ops/<name>/op.yaml`` (``.yaml``/``.yml``): the format below, checked against
  ``bot/schemas/op-spec.schema.json`` and the semantic rules after it.
* a KernelBench-format ``.py``: a module defining ``class Model(nn.Module)``,
  ``get_inputs()`` and optionally ``get_init_inputs()``. It is only parsed here, never run;
  the harness runs it later to learn the input cases (see `OpSpec.with_inputs`).

op.yaml::

    name: gelu                      # required; ^[a-z][a-z0-9_]*$, at most 64 chars;
                                    #   it becomes ops/<name>/
    description: GELU activation    # optional
    reference: reference.py         # required: a .py path relative to the op.yaml (no '..', not
                                    #   absolute), or {source: "<python code>"} inline
    inputs:                         # optional: omitted = the reference's get_inputs() decides
      - name: x                     # the forward's arguments, in order
        dtypes: [float32, float16]  # float64|float32|float16|bfloat16|int64|int32|int8|uint8|bool
        shapes: [[4096, 4096], [1000, 37]]   # one shape per shape case
        init: randn                 # randn (default) | rand | randint | ones | zeros | arange
        low: 0                      # optional, only with init rand/randint
        high: 10
      - name: alpha
        value: 0.5                  # a non-tensor argument: number, bool, string, null or list
    init_args: [64, 32]             # optional; default: the reference's get_init_inputs(), or none
    tolerance:                      # optional, per dtype; a missing atol/rtol keeps its default
      float16: {atol: 1.0e-3, rtol: 1.0e-3}
    targets: [triton, ascendc]      # optional, default [triton]
    socs: [Ascend910B3]             # optional
    perf:
      shapes: [[8192, 8192]]        # optional: one shape per tensor input, used for timing
    derive_tail_cases: true         # optional, default true: the harness adds odd-sized cases

Rules beyond the schema:

* An input has either ``value`` or both ``dtypes`` and ``shapes``; at least one is a tensor.
  Input names are distinct; ``low`` < ``high``.
* Every tensor input has the same number of shape cases; shape case i uses ``shapes[i]`` of each.
* Each ``dtypes`` list has one entry or a common length L; dtype case j uses ``dtypes[j]`` (or
  the single entry). Every shape case is checked in every dtype case: case names read
  ``shape<i>-<dtype>`` (``shape<i>-<dtype>-<dtype>...``, one per tensor input, when the tensors'
  dtypes differ), with seeds 0, 1, 2, ... in that order.
* ``perf.shapes`` needs ``inputs`` and has one shape per tensor input (first dtype of each).
* The reference file lies inside the op's folder (its text goes into prompts and pull
  requests), parses as Python and defines a top-level ``class Model``; without ``inputs`` it
  must also define ``get_inputs()``.
* Tolerances looser than `runners.base.DEFAULT_TOLERANCES` are allowed, and recorded in
  `OpSpec.loose_tolerances` so reports can say so.
* YAML floats may be written ``1e-3`` (YAML 1.1 would read that as a string).

Every problem raises `SpecError` naming the file, the 1-based line of the offending YAML node
and the field as a dotted path (``inputs[0].dtypes``); unknown keys get a "did you mean" hint.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import json
import re
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import yaml
from yaml.reader import ReaderError

from bot.errors import BadInputError, SpecError
from runners.base import (
    BACKENDS,
    DEFAULT_TOLERANCES,
    BackendName,
    CaseSpec,
    InputCase,
    Tolerance,
    VerifyRequest,
)

if TYPE_CHECKING:
    import jsonschema
    from jsonschema.exceptions import ValidationError

DTYPES: tuple[str, ...] = (
    "float64", "float32", "float16", "bfloat16", "int64", "int32", "int8", "uint8", "bool",
)
INIT_KINDS: tuple[str, ...] = ("randn", "rand", "randint", "ones", "zeros", "arange")
DEFAULT_TARGETS: tuple[str, ...] = ("triton",)
MAX_NAME_LENGTH = 64
# A real op.yaml is a few hundred bytes; PyYAML's pure-Python parser needs about 3 s per MiB,
# so the cap keeps a hostile file from stalling a job.
MAX_YAML_BYTES = 256 * 1024
MAX_SOURCE_BYTES = 1024 * 1024
# Counted with aliases expanded: a "billion laughs" document is small on disk but huge to walk.
MAX_YAML_NODES = 50_000
MAX_YAML_DEPTH = 24

FieldPath = tuple[str | int, ...]
Problem = tuple[FieldPath, str]

_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_BOUNDED_INITS = ("rand", "randint")
_SPEC_SUFFIXES = (".yaml", ".yml")
# Spellings people carry over from other tools; difflib alone finds none of them.
_DTYPE_ALIASES = {
    "fp64": "float64", "double": "float64", "fp32": "float32", "float": "float32",
    "fp16": "float16", "half": "float16", "bf16": "bfloat16", "int": "int64", "long": "int64",
}


# --------------------------------------------------------------------------- the model


@dataclass(frozen=True)
class InputSpec:
    """One argument of the reference's forward: a tensor (dtypes x shapes) or a plain value."""

    name: str
    dtypes: tuple[str, ...] = ()
    shapes: tuple[tuple[int, ...], ...] = ()
    init: str = "randn"
    low: float | None = None
    high: float | None = None
    value: Any = None  # set for non-tensor inputs; lists are stored as tuples

    @property
    def is_tensor(self) -> bool:
        # Decided by dtypes, not by value: `value: null` is a legitimate non-tensor argument.
        return bool(self.dtypes)


@dataclass(frozen=True)
class OpSpec:
    """A validated operator spec, whichever file it came from."""

    name: str
    description: str
    origin: Literal["op.yaml", "kernelbench"]
    spec_path: Path
    reference_path: Path | None
    reference_source: str
    inputs: tuple[InputSpec, ...] | None
    init_args: tuple[Any, ...] | None
    tolerances: dict[str, Tolerance]
    targets: tuple[str, ...]
    socs: tuple[str, ...]
    perf_shapes: tuple[tuple[int, ...], ...] | None
    derive_tail_cases: bool
    loose_tolerances: tuple[str, ...]

    def cases(self) -> list[CaseSpec]:
        """Every shape case in every dtype case, shape-major; [] when the reference decides."""
        if self.inputs is None:
            return []
        tensors = [item for item in self.inputs if item.is_tensor]
        shape_count = len(tensors[0].shapes) if tensors else 0
        dtype_count = max((len(item.dtypes) for item in tensors), default=0)
        cases: list[CaseSpec] = []
        for shape_index in range(shape_count):
            shapes = [item.shapes[shape_index] for item in tensors]
            for dtype_index in range(dtype_count):
                label = _dtype_label(tensors, dtype_index)
                cases.append(CaseSpec(
                    name=f"shape{shape_index}-{label}",
                    inputs=_case_inputs(self.inputs, shapes, dtype_index),
                    seed=len(cases),
                ))
        return cases

    def perf_case(self) -> CaseSpec | None:
        """The timing case from perf.shapes, in the first dtype of each input; else None."""
        if self.inputs is None or self.perf_shapes is None:
            return None
        # Seeded after the correctness cases so it never repeats one of their inputs.
        return CaseSpec(name="perf", inputs=_case_inputs(self.inputs, self.perf_shapes, 0),
                        seed=len(self.cases()))

    def tolerance_table(self) -> dict[str, Tolerance]:
        """DEFAULT_TOLERANCES overlaid with the spec's own."""
        return {**DEFAULT_TOLERANCES, **self.tolerances}

    def to_request(self, candidate: Path, *, backend: str = "triton", reference_file: Path,
                   time_it: bool = False, timeout_s: float = 300.0) -> VerifyRequest:
        """The harness request; `reference_file` holds the reference's source (write_reference)."""
        return VerifyRequest(
            reference=reference_file,
            candidate=candidate,
            backend=_backend_name(backend),
            cases=self.cases(),
            init_args=None if self.init_args is None else _thaw_list(self.init_args),
            tolerances=self.tolerance_table(),
            derive_tail_cases=self.derive_tail_cases,
            perf_case=self.perf_case(),
            time_it=time_it,
            timeout_s=timeout_s,
        )

    def with_inputs(self, inputs: Sequence[InputSpec], init_args: Sequence[Any] | None) -> OpSpec:
        """This spec with explicit inputs, e.g. those the harness inferred from get_inputs()."""
        normalized = tuple(_normalized_input(item) for item in inputs)
        problems = _input_problems(normalized, self.perf_shapes)
        if problems:
            path, message = problems[0]
            raise SpecError(message, file=str(self.spec_path), field=_render_field(path))
        frozen_args = None if init_args is None else tuple(_freeze(arg) for arg in init_args)
        return dataclasses.replace(self, inputs=normalized, init_args=frozen_args)

    def to_yaml(self, reference: str = "reference.py") -> str:
        """An op.yaml text that load_spec reads back to an equal spec (given the same paths)."""
        return yaml.dump(_spec_document(self, reference), Dumper=_SpecDumper, sort_keys=False,
                         default_flow_style=None, allow_unicode=True, width=100)


def load_spec(path: str | Path) -> OpSpec:
    """Read and validate an op.yaml or a KernelBench-format .py; raise SpecError on any problem."""
    spec_path = Path(path)
    suffix = spec_path.suffix.lower()
    if suffix in _SPEC_SUFFIXES:
        return _load_op_yaml(spec_path)
    if suffix == ".py":
        return _load_kernelbench(spec_path)
    if spec_path.is_dir():
        raise SpecError(f"is a directory, not a spec{_op_yaml_hint(spec_path)}", file=str(path))
    raise BadInputError(f"{path}: not a spec: expected an op.yaml (.yaml/.yml) or a "
                        "KernelBench-format .py")


def write_reference(spec: OpSpec, path: Path) -> None:
    """Write the reference's source to `path` (the harness imports it from a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(spec.reference_source, encoding="utf-8")


def derive_op_name(stem: str) -> str:
    """An op name from a KernelBench file stem: "19_ReLU" -> "relu"; "op" if nothing is left."""
    name = re.sub(r"[^a-z0-9_]", "_", stem.lower()).lstrip("0123456789_")
    # Trailing '_' (from "..._(x).py"-style stems) would only make an ugly folder name.
    return name[:MAX_NAME_LENGTH].rstrip("_") or "op"


def _render_field(path: FieldPath) -> str:
    """("inputs", 0, "dtypes") -> "inputs[0].dtypes"."""
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else step)
    return text


def _input_problems(inputs: Sequence[InputSpec] | None,
                   perf_shapes: Sequence[Sequence[int]] | None) -> list[Problem]:
    """The rules on inputs and perf shapes that the schema cannot express: (field, message)."""
    if inputs is None:
        if perf_shapes is not None:
            return [(("perf", "shapes"), "needs 'inputs': without them the tensor inputs, "
                     "and so the perf shapes they take, are unknown")]
        return []
    tensors = [(index, item) for index, item in enumerate(inputs) if item.is_tensor]
    if not tensors:
        return [(("inputs",), "at least one input must be a tensor (with dtypes and shapes)")]
    return [
        *_kind_problems(inputs),
        *_name_problems(inputs),
        *_shape_count_problems(tensors),
        *_dtype_name_problems(tensors),
        *_dtype_count_problems(tensors),
        *_range_problems(tensors),
        *_perf_problems(len(tensors), perf_shapes),
    ]


# --------------------------------------------------------------------------- cases


def _dtype_at(dtypes: tuple[str, ...], index: int) -> str:
    return dtypes[index] if len(dtypes) > 1 else dtypes[0]


def _dtype_label(tensors: Sequence[InputSpec], dtype_index: int) -> str:
    # One name when all tensors agree, else each tensor's dtype in order: names stay distinct
    # because the dtypes lists hold no repeats.
    used = [_dtype_at(item.dtypes, dtype_index) for item in tensors]
    return used[0] if len(set(used)) == 1 else "-".join(used)


def _case_inputs(inputs: Sequence[InputSpec], tensor_shapes: Sequence[Sequence[int]],
                 dtype_index: int) -> list[InputCase]:
    shapes = iter(tensor_shapes)
    result: list[InputCase] = []
    for item in inputs:
        if item.is_tensor:
            result.append(InputCase(kind="tensor", shape=list(next(shapes)),
                                    dtype=_dtype_at(item.dtypes, dtype_index), init=item.init,
                                    low=item.low, high=item.high))
        else:
            result.append(InputCase(kind="value", value=_thaw(item.value)))
    return result


def _backend_name(backend: str) -> BackendName:
    if backend not in BACKENDS:
        raise BadInputError(f"unknown backend {backend!r}; choose one of: {', '.join(BACKENDS)}")
    return cast(BackendName, backend)


# Lists become tuples so a spec is immutable and its parts compare and hash by value; the
# request and the YAML get lists back.
def _freeze(value: Any) -> Any:
    return tuple(_freeze(item) for item in value) if isinstance(value, list | tuple) else value


def _thaw(value: Any) -> Any:
    return [_thaw(item) for item in value] if isinstance(value, list | tuple) else value


def _thaw_list(values: Iterable[Any]) -> list[Any]:
    return [_thaw(item) for item in values]


def _normalized_input(item: InputSpec) -> InputSpec:
    return dataclasses.replace(
        item,
        dtypes=tuple(item.dtypes),
        shapes=tuple(tuple(int(dim) for dim in shape) for shape in item.shapes),
        value=_freeze(item.value),
    )


# --------------------------------------------------------------------------- semantic rules


def _kind_problems(inputs: Sequence[InputSpec]) -> list[Problem]:
    problems: list[Problem] = []
    for index, item in enumerate(inputs):
        if item.is_tensor and item.value is not None:
            problems.append((("inputs", index, "value"),
                             "an input has either a value or dtypes and shapes, not both"))
        elif item.is_tensor and not item.shapes:
            problems.append((("inputs", index, "shapes"), "a tensor input needs shapes"))
        elif not item.is_tensor and item.shapes:
            problems.append((("inputs", index, "dtypes"), "a tensor input needs dtypes"))
    return problems


def _name_problems(inputs: Sequence[InputSpec]) -> list[Problem]:
    first_use: dict[str, int] = {}
    problems: list[Problem] = []
    for index, item in enumerate(inputs):
        if item.name in first_use:
            problems.append((("inputs", index, "name"), f"{item.name!r} is already the name of "
                             f"inputs[{first_use[item.name]}]"))
        first_use.setdefault(item.name, index)
    return problems


def _shape_count_problems(tensors: Sequence[tuple[int, InputSpec]]) -> list[Problem]:
    first_index, first = tensors[0]
    expected = len(first.shapes)
    return [
        (("inputs", index, "shapes"),
         f"has {_count(len(item.shapes), 'shape case')} but inputs[{first_index}].shapes has "
         f"{expected}; every tensor input needs one shape per shape case")
        for index, item in tensors[1:] if len(item.shapes) != expected
    ]


def _dtype_name_problems(tensors: Sequence[tuple[int, InputSpec]]) -> list[Problem]:
    # The schema checks these in an op.yaml; inputs inferred by the harness arrive unchecked.
    problems: list[Problem] = []
    for index, item in tensors:
        unknown = [dtype for dtype in item.dtypes if dtype not in DTYPES]
        if unknown:
            problems.append((("inputs", index, "dtypes"), f"unknown dtype {unknown[0]!r}; "
                             f"choose from: {', '.join(DTYPES)}"))
        elif len(set(item.dtypes)) != len(item.dtypes):
            problems.append((("inputs", index, "dtypes"), "lists a dtype more than once"))
    return problems


def _dtype_count_problems(tensors: Sequence[tuple[int, InputSpec]]) -> list[Problem]:
    problems: list[Problem] = []
    common: tuple[int, int] | None = None  # (input index, length) of the first list longer than 1
    for index, item in tensors:
        count = len(item.dtypes)
        if count == 1:
            continue
        if common is None:
            common = (index, count)
        elif count != common[1]:
            problems.append((("inputs", index, "dtypes"),
                             f"has {count} dtypes but inputs[{common[0]}].dtypes has "
                             f"{common[1]}; each dtypes list has 1 entry or the same number "
                             "as the others"))
    return problems


def _range_problems(tensors: Sequence[tuple[int, InputSpec]]) -> list[Problem]:
    problems: list[Problem] = []
    for index, item in tensors:
        if item.init not in INIT_KINDS:
            problems.append((("inputs", index, "init"), f"unknown init {item.init!r}; choose one "
                             f"of: {', '.join(INIT_KINDS)}"))
        for bound in ("low", "high"):
            if getattr(item, bound) is not None and item.init not in _BOUNDED_INITS:
                problems.append((("inputs", index, bound), f"applies only to init rand or "
                                 f"randint, not {item.init}"))
        if item.low is not None and item.high is not None and item.low >= item.high:
            problems.append((("inputs", index, "high"),
                             f"must be greater than low ({item.low} >= {item.high})"))
    return problems


def _perf_problems(tensor_count: int,
                   perf_shapes: Sequence[Sequence[int]] | None) -> list[Problem]:
    if perf_shapes is None or len(perf_shapes) == tensor_count:
        return []
    return [(("perf", "shapes"), f"has {_count(len(perf_shapes), 'shape')} for "
             f"{_count(tensor_count, 'tensor input')}; give one shape per tensor input")]


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _loose_tolerances(tolerances: dict[str, Tolerance]) -> tuple[str, ...]:
    loose = []
    for dtype, given in tolerances.items():
        default = DEFAULT_TOLERANCES[dtype]
        if given.atol > default.atol or given.rtol > default.rtol:
            loose.append(dtype)
    return tuple(loose)


# --------------------------------------------------------------------------- reading files


def _read_text(path: Path, *, limit: int, what: str) -> str:
    """The file's text, or a SpecError that says why not (never a hang on a FIFO or a device)."""
    try:
        if not path.exists():
            raise SpecError("file not found", file=str(path))
        if path.is_dir():
            raise SpecError(f"is a directory, not {what}{_op_yaml_hint(path)}", file=str(path))
        if not path.is_file():
            raise SpecError(f"not a regular file, so not {what}", file=str(path))
        with path.open("rb") as handle:
            raw = handle.read(limit + 1)  # never more than the cap, even if the size lied
    except OSError as error:
        raise SpecError(f"cannot read {what}: {error.strerror or error}",
                        file=str(path)) from None
    if len(raw) > limit:
        raise SpecError(f"larger than {limit // 1024} KiB, too big for {what}", file=str(path))
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        raise SpecError(f"not UTF-8 text (byte 0x{raw[error.start]:02x} at offset {error.start})",
                        file=str(path), line=line) from None


def _op_yaml_hint(path: Path) -> str:
    candidate = path / "op.yaml"
    return f"; did you mean {candidate}?" if candidate.is_file() else ""


# --------------------------------------------------------------------------- YAML


class _SpecLoader(yaml.SafeLoader):
    """SafeLoader that also reads 1e-3 as a float, as YAML 1.2 and JSON do."""


class _SpecDumper(yaml.SafeDumper):
    """SafeDumper that quotes strings _SpecLoader would read as floats, and indents lists."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        # PyYAML puts "- item" flush with its parent key; indented lists read better.
        super().increase_indent(flow, False)


_EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")
_SpecLoader.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT_FLOAT,
                                  list("-+.0123456789"))
_SpecDumper.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT_FLOAT,
                                  list("-+.0123456789"))


@dataclass(frozen=True)
class _Document:
    """The parsed op.yaml: its data and its node tree, to point errors at lines."""

    file: str
    root: yaml.Node
    data: dict[str, Any]

    def line_of(self, path: FieldPath) -> int:
        """The line of the field: its key for a mapping entry, else the closest existing node."""
        marker, _ = self._find(path)
        return marker.start_mark.line + 1

    def value_node(self, path: FieldPath) -> yaml.Node:
        _, node = self._find(path)
        return node

    def error(self, path: FieldPath, message: str) -> SpecError:
        return SpecError(message, file=self.file, line=self.line_of(path),
                         field=_render_field(path) or None)

    def _find(self, path: FieldPath) -> tuple[yaml.Node, yaml.Node]:
        marker = node = self.root
        for step in path:
            found = _child(node, step)
            if found is None:
                break  # a missing key: the mapping that lacks it is the best place to point
            key, node = found
            marker = key if key is not None else node
        return marker, node


def _child(node: yaml.Node, step: str | int) -> tuple[yaml.Node | None, yaml.Node] | None:
    if isinstance(node, yaml.MappingNode) and isinstance(step, str):
        matches = [(key, value) for key, value in node.value if key.value == step]
        return matches[-1] if matches else None  # merged keys come first; the last one wins
    if isinstance(node, yaml.SequenceNode) and isinstance(step, int) and step < len(node.value):
        return None, node.value[step]
    return None


def _parse_yaml(text: str, file: str) -> _Document:
    root, data = _compose_and_construct(text, file)
    if root is None or data is None:
        raise SpecError("the spec is empty; it needs at least 'name' and 'reference'", file=file)
    if not isinstance(data, dict):
        raise SpecError(f"the top level must be a mapping (name: ..., reference: ...), "
                        f"not {_kind(data)}", file=file, line=root.start_mark.line + 1)
    return _Document(file=file, root=root, data=data)


def _compose_and_construct(text: str, file: str) -> tuple[yaml.Node | None, Any]:
    try:
        loader = _SpecLoader(text)
        try:
            root = loader.get_single_node()
            if root is None:
                return None, None
            _NodeCheck(file).visit(root)
            return root, loader.construct_document(root)
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        # PyYAML's context reads as the start of the sentence: "while parsing a block mapping,
        # expected <block end>, but found '-'".
        detail = ", ".join(part for part in (error.context, error.problem) if part)
        raise SpecError(f"invalid YAML: {detail}", file=file,
                        line=mark.line + 1 if mark else None) from None
    except ReaderError as error:
        line = text.count("\n", 0, error.position) + 1
        character = error.character
        code = f"#x{character:04x}" if isinstance(character, int) else repr(character)
        raise SpecError(f"invalid YAML: {error.reason} (character {code})",
                        file=file, line=line) from None
    except yaml.YAMLError as error:
        raise SpecError(f"invalid YAML: {error}", file=file) from None
    except RecursionError:
        raise SpecError("invalid YAML: nested too deeply", file=file) from None


class _NodeCheck:
    """Checks the node tree before it is built into data: string keys, no duplicates, bounded
    size and depth with aliases expanded, and no alias inside the node it names."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.measured: dict[int, tuple[int, int]] = {}  # id(node) -> (size, height)
        self.open: set[int] = set()

    def visit(self, node: yaml.Node) -> tuple[int, int]:
        ident = id(node)
        if ident in self.measured:  # an alias: measured once, counted at every use
            return self.measured[ident]
        if ident in self.open:
            raise self._error(node, "a YAML alias refers to a node that contains it")
        self.open.add(ident)
        parts = [self.visit(child) for child in self._children(node)]
        self.open.discard(ident)
        size = 1 + sum(part[0] for part in parts)
        height = 1 + max((part[1] for part in parts), default=0)
        if size > MAX_YAML_NODES:
            raise self._error(node, f"more than {MAX_YAML_NODES} YAML nodes (aliases expanded); "
                              "too big for an op spec")
        # Schema validation recurses per level; a spec never nests this deep.
        if height > MAX_YAML_DEPTH:
            raise self._error(node, f"nested more than {MAX_YAML_DEPTH} levels deep")
        self.measured[ident] = (size, height)
        return size, height

    def _children(self, node: yaml.Node) -> list[yaml.Node]:
        if isinstance(node, yaml.MappingNode):
            self._check_keys(node)
            return [part for pair in node.value for part in pair]
        if isinstance(node, yaml.SequenceNode):
            return list(node.value)
        return []

    def _check_keys(self, node: yaml.MappingNode) -> None:
        seen: set[str] = set()
        for key, _ in node.value:
            if key.tag == _MERGE_TAG:
                continue
            if not isinstance(key, yaml.ScalarNode) or key.tag != _STR_TAG:
                raise self._error(key, "keys must be plain names (a key that YAML reads as a "
                                  "number, a boolean, null or a collection is not one)")
            if key.value in seen:
                raise self._error(key, f"duplicate key '{key.value}'")
            seen.add(key.value)

    def _error(self, node: yaml.Node, message: str) -> SpecError:
        return SpecError(message, file=self.file, line=node.start_mark.line + 1)


# --------------------------------------------------------------------------- the JSON Schema


@lru_cache(maxsize=1)
def _validator() -> jsonschema.Draft202012Validator:
    import jsonschema  # ~0.1 s: only where a spec is read, not at every command's start

    resource = resources.files("bot") / "schemas" / "op-spec.schema.json"
    schema = json.loads(resource.read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(schema)


def _validate_schema(document: _Document) -> None:
    errors = list(_validator().iter_errors(document.data))
    if not errors:
        return
    first = min(errors, key=lambda error: _error_rank(error, document))
    raise document.error(*_describe(first))


def _error_rank(error: ValidationError, document: _Document) -> tuple[bool, int, str]:
    # Unknown keys first: a misspelt key also shows up as a missing one, and the typo is the
    # real problem. Then the earliest line, so the user fixes the file top to bottom.
    path, _ = _describe(error)
    return (error.validator != "additionalProperties", document.line_of(path),
            _render_field(path))


def _describe(error: ValidationError) -> Problem:
    """The field and a readable message for one schema error."""
    path: FieldPath = tuple(error.absolute_path)
    describe = _DESCRIBERS.get(str(error.validator))
    if describe is None:
        return path, _truncate(error.message, 200)
    return describe(error, path)


def _describe_additional(error: ValidationError, path: FieldPath) -> Problem:
    allowed = list(cast(dict[str, Any], error.schema).get("properties", {}))
    instance: Any = error.instance  # jsonschema types it as "maybe unset"; here it is a dict
    key = next(str(name) for name in instance if name not in allowed)
    return (*path, key), (f"unknown key '{key}'{_did_you_mean(key, allowed)}; "
                          f"allowed here: {', '.join(allowed)}")


def _describe_required(error: ValidationError, path: FieldPath) -> Problem:
    instance: Any = error.instance
    missing = next(str(key) for key in cast(list[str], error.validator_value)
                   if key not in instance)
    return (*path, missing), f"missing required key '{missing}'{_hint(error)}"


def _describe_type(error: ValidationError, path: FieldPath) -> Problem:
    expected: Any = error.validator_value
    names: list[str] = [expected] if isinstance(expected, str) else list(expected)
    message = (f"expected {' or '.join(_TYPE_NAMES.get(name, name) for name in names)}, "
               f"got {_kind(error.instance)} {_preview(error.instance)}")
    if names == ["array"] and isinstance(error.instance, str | int | float):
        message += f" (write a list: [{_truncate(str(error.instance))}])"
    return path, message


def _describe_enum(error: ValidationError, path: FieldPath) -> Problem:
    options = [str(option) for option in cast(list[Any], error.validator_value)]
    hint = _did_you_mean(error.instance, options) if isinstance(error.instance, str) else ""
    return path, f"{_preview(error.instance)} is not one of: {', '.join(options)}{hint}"


def _describe_pattern(error: ValidationError, path: FieldPath) -> Problem:
    return path, f"{_preview(error.instance)} is not allowed{_hint(error)}"


def _describe_not(error: ValidationError, path: FieldPath) -> Problem:
    return path, f"not allowed here{_hint(error)}"


def _describe_size(error: ValidationError, path: FieldPath) -> Problem:
    limit: Any = error.validator_value
    instance: Any = error.instance
    if error.validator == "maxLength":
        return path, f"is {len(instance)} characters long; at most {limit} are allowed"
    if error.validator == "minimum":
        return path, f"{_preview(instance)} is below the minimum, {limit}"
    # minItems, minLength, minProperties: every such limit in the schema is 1.
    return path, "must not be empty"


def _describe_unique(error: ValidationError, path: FieldPath) -> Problem:
    seen: list[Any] = []
    instance: Any = error.instance
    for item in instance:
        if item in seen:
            return path, f"lists {_preview(item)} more than once"
        seen.append(item)
    return path, "has repeated entries"


_Describer = Callable[["ValidationError", FieldPath], Problem]
_DESCRIBERS: dict[str, _Describer] = {
    "additionalProperties": _describe_additional,
    "required": _describe_required,
    "type": _describe_type,
    "enum": _describe_enum,
    "pattern": _describe_pattern,
    "not": _describe_not,
    "minItems": _describe_size,
    "minLength": _describe_size,
    "maxLength": _describe_size,
    "minProperties": _describe_size,
    "minimum": _describe_size,
    "uniqueItems": _describe_unique,
}

_TYPE_NAMES = {
    "string": "a string", "integer": "an integer", "number": "a number", "array": "a list",
    "object": "a mapping", "boolean": "true or false", "null": "null",
}


def _hint(error: ValidationError) -> str:
    schema = error.schema if isinstance(error.schema, dict) else {}
    description = schema.get("description")
    return f": {description}" if description else ""


def _did_you_mean(word: str, choices: Sequence[str]) -> str:
    alias = _DTYPE_ALIASES.get(word.lower())
    close = [alias] if alias in choices else difflib.get_close_matches(word, choices, n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _kind(value: Any) -> str:
    kinds = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
             list: "a list", dict: "a mapping", type(None): "null"}
    return kinds.get(type(value), f"a {type(value).__name__}")


def _preview(value: Any) -> str:
    return _truncate(repr(value))


def _truncate(text: str, limit: int = 60) -> str:
    # Messages quote the user's values; a 100 KiB string must not become a 100 KiB message.
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --------------------------------------------------------------------------- op.yaml


def _load_op_yaml(spec_path: Path) -> OpSpec:
    text = _read_text(spec_path, limit=MAX_YAML_BYTES, what="an op spec")
    document = _parse_yaml(text, str(spec_path))
    _validate_schema(document)
    data = document.data
    inputs = None
    if "inputs" in data:
        inputs = tuple(_input_from_data(item) for item in data["inputs"])
    perf_shapes = _perf_shapes_from_data(data.get("perf", {}))
    problems = _input_problems(inputs, perf_shapes)
    if problems:
        raise document.error(*problems[0])
    reference_path, source = _load_reference(document, spec_path, needs_get_inputs=inputs is None)
    tolerances = _tolerances_from_data(data.get("tolerance", {}))
    return OpSpec(
        name=data["name"],
        description=data.get("description", ""),
        origin="op.yaml",
        spec_path=spec_path,
        reference_path=reference_path,
        reference_source=source,
        inputs=inputs,
        init_args=tuple(_freeze(arg) for arg in data["init_args"]) if "init_args" in data else None,
        tolerances=tolerances,
        targets=tuple(data.get("targets", DEFAULT_TARGETS)),
        socs=tuple(data.get("socs", ())),
        perf_shapes=perf_shapes,
        derive_tail_cases=data.get("derive_tail_cases", True),
        loose_tolerances=_loose_tolerances(tolerances),
    )


def _input_from_data(item: dict[str, Any]) -> InputSpec:
    if "value" in item:
        return InputSpec(name=item["name"], value=_freeze(item["value"]))
    return InputSpec(
        name=item["name"],
        dtypes=tuple(item["dtypes"]),
        shapes=tuple(tuple(shape) for shape in item["shapes"]),
        init=item.get("init", "randn"),
        low=item.get("low"),
        high=item.get("high"),
    )


def _perf_shapes_from_data(perf: dict[str, Any]) -> tuple[tuple[int, ...], ...] | None:
    shapes = perf.get("shapes")
    return None if shapes is None else tuple(tuple(shape) for shape in shapes)


def _tolerances_from_data(table: dict[str, dict[str, float]]) -> dict[str, Tolerance]:
    return {
        dtype: Tolerance(atol=given.get("atol", DEFAULT_TOLERANCES[dtype].atol),
                         rtol=given.get("rtol", DEFAULT_TOLERANCES[dtype].rtol))
        for dtype, given in table.items()
    }


def _load_reference(document: _Document, spec_path: Path, *,
                    needs_get_inputs: bool) -> tuple[Path | None, str]:
    reference = document.data["reference"]
    if isinstance(reference, dict):
        source = reference["source"]
        tree = _parse_python(source, document.file, _inline_line(document))
        _check_reference_tree(tree, document, "the inline reference", needs_get_inputs)
        return None, source
    path = _reference_file(document, spec_path, reference)
    source = _read_text(path, limit=MAX_SOURCE_BYTES, what="a reference")
    tree = _parse_python(source, str(path))
    _check_reference_tree(tree, document, str(path), needs_get_inputs)
    return path, source


def _reference_file(document: _Document, spec_path: Path, reference: str) -> Path:
    relative = Path(reference)
    # The reference's text goes into prompts and pull requests, so it must come from the op's
    # own folder, never from elsewhere on the runner.
    if relative.is_absolute() or ".." in relative.parts:
        raise document.error(("reference",), "must be a path inside the op's folder, relative "
                             "to the op.yaml (no '..', not absolute)")
    path = spec_path.parent / relative
    if not path.is_file():
        state = "is not a file" if path.exists() else "does not exist"
        raise document.error(("reference",), f"reference file {path} {state}")
    if not path.resolve().is_relative_to(spec_path.parent.resolve()):
        raise document.error(("reference",), f"reference file {path} links outside the op's "
                             "folder")
    return path


def _inline_line(document: _Document) -> Callable[[int], int]:
    node = document.value_node(("reference", "source"))
    start = node.start_mark.line + 1
    if isinstance(node, yaml.ScalarNode) and node.style == "|":
        # A literal block keeps its lines: source line n sits n lines below the '|'.
        return lambda line: start + line
    return lambda _line: start


def _check_reference_tree(tree: ast.Module, document: _Document, label: str,
                          needs_get_inputs: bool) -> None:
    if not _defines(tree, "Model", ast.ClassDef):
        raise document.error(("reference",), f"{label} defines no top-level `class Model`; a "
                             "reference is KernelBench-format: class Model(nn.Module), "
                             "get_inputs(), get_init_inputs()")
    if needs_get_inputs and not _defines(tree, "get_inputs", ast.FunctionDef):
        raise document.error(("reference",), f"{label} defines no get_inputs(); without "
                             "'inputs' in the op.yaml, get_inputs() decides the cases")


# --------------------------------------------------------------------------- Python sources


def _parse_python(source: str, file: str,
                  to_line: Callable[[int], int] | None = None) -> ast.Module:
    """The module's syntax tree; a SyntaxError names the file and line (mapped by `to_line`)."""
    try:
        with warnings.catch_warnings():
            # Invalid escapes and the like are the reference's business, not the user's output.
            warnings.simplefilter("ignore")
            return ast.parse(source, filename=file)
    except SyntaxError as error:
        line = error.lineno
        where = ""
        if to_line is not None and line is not None:
            where, line = f" (line {line} of the inline source)", to_line(line)
        raise SpecError(f"invalid Python syntax{where}: {error.msg}", file=file,
                        line=line) from None
    except (ValueError, RecursionError) as error:  # null bytes; absurd nesting
        raise SpecError(f"cannot parse as Python: {error}", file=file) from None


def _defines(tree: ast.Module, name: str, kind: type[ast.stmt]) -> bool:
    return any(isinstance(node, kind) and getattr(node, "name", None) == name
               for node in tree.body)


def _model_description(tree: ast.Module) -> str:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            docstring = ast.get_docstring(node) or ""
            return docstring.strip().splitlines()[0] if docstring.strip() else ""
    return ""


def _load_kernelbench(path: Path) -> OpSpec:
    source = _read_text(path, limit=MAX_SOURCE_BYTES, what="a KernelBench reference")
    tree = _parse_python(source, str(path))
    if not _defines(tree, "Model", ast.ClassDef):
        raise SpecError("defines no top-level `class Model`; a KernelBench-format reference "
                        "defines class Model(nn.Module), get_inputs(), get_init_inputs()",
                        file=str(path))
    if not _defines(tree, "get_inputs", ast.FunctionDef):
        raise SpecError("defines no top-level get_inputs(); the harness needs it to make the "
                        "input cases", file=str(path))
    return OpSpec(
        name=derive_op_name(path.stem),
        description=_model_description(tree),
        origin="kernelbench",
        spec_path=path,
        reference_path=path,
        reference_source=source,
        inputs=None,
        init_args=None,
        tolerances={},
        targets=DEFAULT_TARGETS,
        socs=(),
        perf_shapes=None,
        derive_tail_cases=True,
        loose_tolerances=(),
    )


# --------------------------------------------------------------------------- writing op.yaml


def _spec_document(spec: OpSpec, reference: str) -> dict[str, Any]:
    data: dict[str, Any] = {"name": spec.name}
    if spec.description:
        data["description"] = spec.description
    data["reference"] = reference
    if spec.inputs is not None:
        data["inputs"] = [_input_document(item) for item in spec.inputs]
    if spec.init_args is not None:
        data["init_args"] = _thaw_list(spec.init_args)
    if spec.tolerances:
        data["tolerance"] = {dtype: {"atol": given.atol, "rtol": given.rtol}
                             for dtype, given in spec.tolerances.items()}
    data["targets"] = list(spec.targets)
    if spec.socs:
        data["socs"] = list(spec.socs)
    if spec.perf_shapes is not None:
        data["perf"] = {"shapes": [list(shape) for shape in spec.perf_shapes]}
    data["derive_tail_cases"] = spec.derive_tail_cases
    return data


def _input_document(item: InputSpec) -> dict[str, Any]:
    if not item.is_tensor:
        return {"name": item.name, "value": _thaw(item.value)}
    data: dict[str, Any] = {
        "name": item.name,
        "dtypes": list(item.dtypes),
        "shapes": [list(shape) for shape in item.shapes],
    }
    if item.init != "randn":
        data["init"] = item.init
    for bound in ("low", "high"):
        if getattr(item, bound) is not None:
            data[bound] = getattr(item, bound)
    return data
