"""Import user code from a file, and turn its exceptions into located, readable failures."""

from __future__ import annotations

import importlib.util
import linecache
import sys
import traceback
from pathlib import Path
from types import ModuleType, TracebackType

from runners.base import SourceLocation


class UserCodeError(Exception):
    """User code (reference or candidate) raised; carries a location in that code if any."""

    def __init__(self, message: str, location: SourceLocation | None, log: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.location = location
        self.log = log


def load_module(path: Path, module_name: str) -> ModuleType:
    """Execute a Python file as a module named `module_name`."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise UserCodeError(f"cannot import {path.name}: not a Python file", None)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        sys.modules.pop(module_name, None)
        location = SourceLocation(file=str(path), line=exc.lineno or 0,
                                  source_line=(exc.text or "").rstrip("\n"))
        raise UserCodeError(f"SyntaxError: {exc.msg}", location) from None
    except BaseException as exc:  # noqa: BLE001 - user code may raise anything, even SystemExit
        sys.modules.pop(module_name, None)
        raise as_user_error(exc, path) from None
    return module


def _exception_chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain and len(chain) < 10:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _last_frame_in(tb: TracebackType | None, path: Path) -> SourceLocation | None:
    found: SourceLocation | None = None
    target = str(path.resolve())
    for frame, lineno in traceback.walk_tb(tb):
        filename = frame.f_code.co_filename
        try:
            same = str(Path(filename).resolve()) == target
        except (OSError, ValueError):
            same = False
        if same:
            found = SourceLocation(file=str(path), line=lineno,
                                   source_line=linecache.getline(filename, lineno).rstrip("\n"))
    return found


def _compilation_error_location(exc: BaseException, path: Path) -> SourceLocation | None:
    """Triton's CompilationError counts lines from the kernel's `def`; map them to the file."""
    node = getattr(exc, "node", None)
    src = getattr(exc, "src", None)
    lineno = getattr(node, "lineno", None)
    if not isinstance(src, str) or not isinstance(lineno, int):
        return None
    first = src.lstrip().splitlines()[0].strip() if src.strip() else ""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for index, line in enumerate(lines):
        if first and line.strip() == first:
            file_line = index + lineno
            text = lines[file_line - 1] if 0 < file_line <= len(lines) else ""
            return SourceLocation(file=str(path), line=file_line, source_line=text)
    return None


def _message(exc: BaseException) -> str:
    text = str(exc).strip()
    if type(exc).__name__ == "CompilationError" and getattr(exc, "error_message", None):
        text = str(exc.error_message).strip()  # type: ignore[attr-defined]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def as_user_error(exc: BaseException, path: Path) -> UserCodeError:
    """The innermost located exception of the chain: the user's line, not the interpreter's."""
    chain = _exception_chain(exc)
    location: SourceLocation | None = None
    message = _message(exc)
    for item in chain:
        located = _compilation_error_location(item, path) or _last_frame_in(item.__traceback__,
                                                                               path)
        if located is not None:
            location = located
            message = _message(item)
    log = "".join(traceback.format_exception(exc))[-4000:]
    return UserCodeError(message, location, log)
