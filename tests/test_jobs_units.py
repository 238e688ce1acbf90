"""Small pieces of the job runner: CI log excerpts, PR markers, trimming."""

from __future__ import annotations

from bot.jobs import failing_part
from bot.publish import COMMENT_LIMIT, marker, read_marker, trim


def test_the_failing_part_of_a_ci_log() -> None:
    log = "\n".join([f"setup step {index}" for index in range(500)] +
                    ["FAILED tests/test_relu.py::test_big - AssertionError: mismatch"] +
                    [f"teardown {index}" for index in range(500)])
    excerpt = failing_part(log)
    assert "AssertionError: mismatch" in excerpt
    assert "setup step 480" in excerpt  # some context before it
    assert "setup step 10\n" not in excerpt
    assert failing_part("all good\n" * 10, limit=20) == ("all good\n" * 10)[-20:]


def test_markers_round_trip_and_cannot_end_the_comment() -> None:
    data = {"op": "gelu", "attempts": 3, "note": "a --> b -- c"}
    text = marker(data)
    assert text.count("-->") == 1
    assert read_marker(f"intro\n{text}\nrest") == data
    assert read_marker("no marker here") is None


def test_trimming_fits_the_forge_limit() -> None:
    long = "start\n" + "x" * 100_000 + "\nend"
    cut = trim(long)
    assert len(cut) < COMMENT_LIMIT
    assert cut.startswith("start")
    assert cut.endswith("end")
    assert "characters cut" in cut


def test_posted_text_never_carries_a_known_secret(monkeypatch: object) -> None:
    import pytest

    from bot.forge.base import Comment, Target
    from bot.publish import upsert_status

    patch = pytest.MonkeyPatch()
    patch.setenv("OPBOT_GITHUB_TOKEN", "ghp_do_not_post_me_123")
    posted: list[str] = []

    class Recorder:
        def list_comments(self, target: Target) -> list[Comment]:
            return []

        def create_comment(self, target: Target, body: str) -> Comment:
            posted.append(body)
            return Comment(1, body, "opbot")

    try:
        upsert_status(Recorder(), Target("issue", 1),  # type: ignore[arg-type]
                      "failed: git push https://x:ghp_do_not_post_me_123@host", "opbot")
    finally:
        patch.undo()
    assert "ghp_do_not_post_me_123" not in posted[0]
    assert "[REDACTED]" in posted[0]
