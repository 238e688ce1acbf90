"""The op request issue: the rendered issue form (### sections) or an op.yaml block -> a spec.

GitHub renders an issue form as `### <label>` headings, each followed by the answer
(`_No response_` when empty; checkboxes as `- [X] item`). A ```yaml block holding an
op.yaml is accepted too. Whatever comes in is text from a stranger: it is size-capped,
stripped of HTML comments and invisible or bidirectional characters, and validated as a
spec before anything uses it.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from bot.agent.backends import DEFAULT_BACKEND, backend_names
from bot.errors import BadInputError, SpecError
from bot.spec import OpSpec, derive_op_name, load_spec
from bot.text import clean_text, quoted

MAX_BODY_CHARS = 200_000
LABEL_NAME = "Operator name"
LABEL_REFERENCE = "Reference (PyTorch)"
LABEL_TARGETS = "Target backends"
LABEL_SHAPES = "Shapes and dtypes"
LABEL_NOTES = "Notes"
EMPTY_ANSWER = "_No response_"

_TARGET_BOXES = "\n".join(f"- [{'X' if name == DEFAULT_BACKEND else ' '}] {name}"
                          for name in backend_names())
EXPECTED_FORM = f"""The op request form expects these sections (the issue form fills them in):

### {LABEL_NAME}
gelu

### {LABEL_REFERENCE}
```python
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.nn.functional.gelu(x)

def get_inputs():
    return [torch.randn(4096, 4096)]

def get_init_inputs():
    return []
```

### {LABEL_TARGETS}
{_TARGET_BOXES}

### {LABEL_SHAPES}
_No response_ (or YAML: `x: {{dtypes: [float32], shapes: [[4096, 4096], [1000, 37]]}}`)

### {LABEL_NOTES}
_No response_

Instead of the form, a ```yaml block holding a whole op.yaml is accepted too."""

_HEADING = re.compile(r"^###[ \t]+(?P<label>.+?)[ \t]*$", re.MULTILINE)
_CODE_BLOCK = re.compile(r"^(?P<fence>```|~~~)(?P<info>[^\n]*)\n(?P<body>.*?)^(?P=fence)[ \t]*$",
                         re.DOTALL | re.MULTILINE)
_CHECKED = re.compile(r"^\s*[-*+]\s*\[[xX]\]\s*(?P<item>\S+)", re.MULTILINE)


class FormError(BadInputError):
    """The issue body is not a usable op request; the message says why and shows the form."""

    def __init__(self, problem: str, *, show_form: bool = True) -> None:
        self.problem = problem
        super().__init__(f"{problem}\n\n{EXPECTED_FORM}" if show_form else problem)


def sections(body: str) -> dict[str, str]:
    """`### label` -> answer, for a rendered issue form."""
    headings = list(_HEADING.finditer(body))
    found: dict[str, str] = {}
    for index, heading in enumerate(headings):
        end = headings[index + 1].start() if index + 1 < len(headings) else len(body)
        answer = body[heading.end():end].strip()
        found[heading.group("label").strip().lower()] = "" if answer == EMPTY_ANSWER else answer
    return found


def _code(answer: str, languages: tuple[str, ...]) -> str | None:
    for block in _CODE_BLOCK.finditer(answer):
        info = block.group("info").strip().lower()
        if not info or info.split()[0] in languages:
            return block.group("body")
    return None


@dataclass(frozen=True)
class OpRequest:
    """What an op request issue asks for, before it is validated as a spec."""

    name: str
    reference: str
    targets: tuple[str, ...]
    shapes_yaml: str
    notes: str
    op_yaml: str | None = None  # a whole op.yaml given in a ```yaml block


def op_name_from_body(body: str) -> str | None:
    """The operator's name from the form, normalised as a spec name; None if absent."""
    answer = sections(clean_text(body[:MAX_BODY_CHARS])).get(LABEL_NAME.lower(), "")
    first = answer.strip().splitlines()[0] if answer.strip() else ""
    if first:
        name = derive_op_name(first.strip("`* "))
        return name if name != "op" or first.strip().lower() == "op" else None
    block = _code(clean_text(body[:MAX_BODY_CHARS]), ("yaml", "yml"))
    if block:
        try:
            document = yaml.safe_load(block)
        except yaml.YAMLError:
            return None
        if isinstance(document, dict) and isinstance(document.get("name"), str):
            return derive_op_name(document["name"])
    return None


def parse_request(body: str) -> OpRequest:
    if len(body) > MAX_BODY_CHARS:
        raise FormError(f"the issue body is longer than {MAX_BODY_CHARS} characters",
                        show_form=False)
    text = clean_text(body)
    answers = sections(text)
    yaml_block = _code(text, ("yaml", "yml"))
    reference = _code(answers.get(LABEL_REFERENCE.lower(), ""), ("python", "py"))
    if yaml_block is not None and not answers.get(LABEL_NAME.lower()):
        return OpRequest(name="", reference=reference or "", targets=(), shapes_yaml="",
                         notes="", op_yaml=yaml_block)
    name = op_name_from_body(text)
    problems = []
    if not name:
        problems.append(f"the '{LABEL_NAME}' section is missing or empty")
    if reference is None:
        problems.append(f"the '{LABEL_REFERENCE}' section has no ```python block")
    targets = tuple(match.group("item").lower() for match in _CHECKED.finditer(
        answers.get(LABEL_TARGETS.lower(), ""))) or (DEFAULT_BACKEND,)
    unknown = [target for target in targets if target not in backend_names()]
    if unknown:
        problems.append(f"the '{LABEL_TARGETS}' section names "
                        f"{', '.join(quoted(name) for name in unknown[:5])}; the "
                        f"backends are {', '.join(backend_names())}")
    if problems:
        raise FormError("; ".join(problems) + ".")
    return OpRequest(name=name or "", reference=reference or "", targets=targets,
                     shapes_yaml=answers.get(LABEL_SHAPES.lower(), ""),
                     notes=answers.get(LABEL_NOTES.lower(), ""))


def _op_yaml(request: OpRequest) -> str:
    if request.op_yaml is not None:
        return request.op_yaml
    document: dict[str, object] = {"name": request.name, "reference": "reference.py",
                                   "targets": list(request.targets)}
    if request.notes:
        document["description"] = request.notes.splitlines()[0][:200]
    shapes = request.shapes_yaml.strip().strip("`").removeprefix("yaml").strip()
    if shapes:
        try:
            inputs = yaml.safe_load(shapes)
        except yaml.YAMLError as exc:
            raise FormError(f"the '{LABEL_SHAPES}' section is not YAML: {exc}") from None
        if not isinstance(inputs, dict):
            raise FormError(f"the '{LABEL_SHAPES}' section must map each input to its dtypes "
                            "and shapes, e.g. x: {dtypes: [float32], shapes: [[64, 64]]}")
        document["inputs"] = [{"name": key, **value} if isinstance(value, dict)
                              else {"name": key, "value": value}
                              for key, value in inputs.items()]
    return yaml.safe_dump(document, sort_keys=False)


def spec_from_issue(body: str, folder: Path) -> OpSpec:
    """Write the request as ops/<name>/ under `folder` and load it as a validated spec."""
    request = parse_request(body)
    op_dir = folder / "request"
    op_dir.mkdir(parents=True, exist_ok=True)
    (op_dir / "op.yaml").write_text(_op_yaml(request), encoding="utf-8")
    if request.reference:
        (op_dir / "reference.py").write_text(request.reference, encoding="utf-8")
    try:
        return load_spec(op_dir / "op.yaml")
    except SpecError as exc:
        raise FormError(f"the request is not a valid op spec: {exc.detail} (field "
                        f"{exc.field or '-'}).") from None


def validate_issue(body: str) -> OpSpec:
    """Validate an op request body in a scratch folder (nothing is kept)."""
    with tempfile.TemporaryDirectory(prefix="opbot-request-") as tmp:
        return spec_from_issue(body, Path(tmp))
