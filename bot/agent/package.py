"""The operator package's shared files: the spec beside every backend's folder.

    ops/<name>/op.yaml          the spec
    ops/<name>/reference.py     the PyTorch reference (KernelBench format)
    ops/<name>/PERF.md          verification and performance, every backend compared
    ops/<name>/<backend>/...    each backend's files (bot/agent/backends/<backend>/)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from bot.errors import BadInputError
from bot.spec import OpSpec

PERF_FILE = "PERF.md"


def _same_file(first: Path, second: Path | None) -> bool:
    try:
        return second is not None and first.resolve() == second.resolve()
    except OSError:
        return False


def write_spec_files(out: Path, spec: OpSpec) -> None:
    """op.yaml and reference.py under `out`, unless they are the spec's own files."""
    out.mkdir(parents=True, exist_ok=True)
    reference = out / "reference.py"
    if not _same_file(reference, spec.reference_path):
        reference.write_text(spec.reference_source, encoding="utf-8")
    op_yaml = out / "op.yaml"
    if not _same_file(op_yaml, spec.spec_path):
        op_yaml.write_text(spec.to_yaml("reference.py"), encoding="utf-8")


def write_files(out: Path, files: Mapping[str, str]) -> list[Path]:
    """Each file under `out`, checked to stay inside it (a drafter names the paths)."""
    root = out.resolve()
    written = []
    for relative, text in files.items():
        path = (out / relative).resolve()
        if not path.is_relative_to(root) or path == root:
            raise BadInputError(f"the generator named a file outside the package: {relative}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
