"""The short exception hierarchy of opbot; the CLI maps each to an exit code and a message."""

from __future__ import annotations


class OpbotError(Exception):
    """Base of every error opbot raises on purpose; its message is meant for the user."""


class BadInputError(OpbotError):
    """The user's input cannot be used: a missing file, an unreadable spec, a bad flag value."""


class SpecError(BadInputError):
    """An op spec (op.yaml or KernelBench-format .py) is malformed.

    The message names the file, the line and the field when they are known.
    """

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 field: str | None = None) -> None:
        self.file = file
        self.line = line
        self.field = field
        self.detail = message
        super().__init__(self._render())

    def _render(self) -> str:
        where = self.file or "<spec>"
        if self.line is not None:
            where += f":{self.line}"
        if self.field:
            return f"{where}: field '{self.field}': {self.detail}"
        return f"{where}: {self.detail}"


class BackendUnavailableError(OpbotError):
    """The chosen backend's toolchain or device is missing on this machine."""
