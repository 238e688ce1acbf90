"""A model's reply -> the Triton candidate's files (the file defining ModelNew is the main one)."""

from __future__ import annotations

from dataclasses import dataclass

from bot.agent.reply import FENCE, ReplyError, file_name

CANDIDATE_FILE = "model_new.py"


@dataclass(frozen=True)
class CandidateFiles:
    files: dict[str, str]
    main: str  # the file defining ModelNew

    @property
    def source(self) -> str:
        return self.files[self.main]



def parse_reply(text: str) -> CandidateFiles:
    """The files of a reply; ReplyError says what is missing."""
    blocks = [(match.group("info").strip(), match.group("body"))
              for match in FENCE.finditer(text)]
    code = [(info, body) for info, body in blocks
            if not info or info.split()[0].lower() in ("python", "py", "python3")
            or file_name(info)]
    if not code:
        raise ReplyError("the reply has no fenced code block: answer with the whole candidate "
                         f"in one ```python file={CANDIDATE_FILE} block")
    files: dict[str, str] = {}
    unnamed: list[str] = []
    for info, body in code:
        name = file_name(info)
        if name:
            files[name] = body
        else:
            unnamed.append(body)
    if not files and len(unnamed) == 1:
        files[CANDIDATE_FILE] = unnamed[0]
    elif not files:
        with_model = [body for body in unnamed if "class ModelNew" in body]
        if len(with_model) != 1:
            raise ReplyError("the reply has several code blocks without file names: put the "
                             f"whole candidate in one ```python file={CANDIDATE_FILE} block")
        files[CANDIDATE_FILE] = with_model[0]
    main = next((name for name, body in files.items() if "class ModelNew" in body), None)
    if main is None:
        raise ReplyError("no file of the reply defines class ModelNew (same constructor and "
                         "forward as the reference's Model)")
    return CandidateFiles(files=files, main=main)
