"""`opbot event --gate`: the light job in front of the accelerator runner decides, reading
the forge only, whether the event needs the heavy job.

End to end, `opbot event --gate` runs in its own process against the fake forge (GitHub
traffic checked against GitHub's OpenAPI description): the forge's effects show that the
gate touches nothing unless it is asked to answer a refusal, and then only once, in the
words the job itself uses. In process: the decision without a forge, the read-only forge,
the outputs file.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import pytest

from bot.events import Plan
from bot.forge import registry
from bot.forge.base import Target
from bot.gate import ReadOnlyForge, Verdict, WriteRefusedError, decide, output_lines
from bot.job_settings import JobSettings
from bot.policy import default_policy, load_policy
from tests.fakeforge import FakeForge
from tests.fakeforge.scenario import HEAD, REPO, World
from tests.support import DATA, CliRun, run_opbot
from tests.support_forge import KINDS

GITHUB = KINDS["github"]
REFUSAL_OPENING = "Thanks for the request, but opbot will not act on it: "


def _regen_comment(fake: FakeForge, number: int, author: str) -> dict[str, Any]:
    """GitHub's issue_comment for `/regen` on pull request `number`: it names the pull
    request, not whose it is (the gate reads that, as the job does)."""
    payload: dict[str, Any] = json.loads(
        (DATA / "webhooks" / "github" / "issue_comment" / "created.1.json").read_text(
            encoding="utf-8"))
    payload["repository"]["full_name"] = REPO
    payload["issue"]["number"] = number
    payload["issue"]["pull_request"] = {"url": "u", "html_url": "h", "diff_url": "d",
                                        "patch_url": "p", "merged_at": None}
    payload["comment"].update(body="/regen", author_association="COLLABORATOR")
    payload["comment"]["user"]["login"] = author
    payload["sender"] = {**payload["sender"], "login": author, "type": "User"}
    return payload


def _env(fake: FakeForge, outputs: Path | None = None) -> dict[str, str]:
    """The gate job's environment: the bot's token, no login override (the gate learns it
    from the token), and GITHUB_OUTPUT only where the test reads it."""
    plugin = registry.plugin("github")
    return {plugin.token_variables[0]: fake.token, plugin.url_variables[0]: fake.github_url,
            "OPBOT_BOT_LOGIN": "", "GITHUB_OUTPUT": str(outputs) if outputs else ""}


def _gate(payload: dict[str, Any], tmp_path: Path, env: dict[str, str], *extra: str,
          event: str = "issue_comment") -> CliRun:
    path = tmp_path / f"{event}.json"
    path.write_text(json.dumps(payload), encoding="utf-8")
    return run_opbot("event", "--forge", "github", "--event", event, "--payload", str(path),
                     "--gate", "--json", *extra, env=env, timeout=120)


def _verdict(run: CliRun) -> dict[str, Any]:
    assert run.code == 0, run.stderr
    data: dict[str, Any] = json.loads(run.stdout)
    return data


@pytest.fixture
def reader(fake: FakeForge, world: World) -> str:
    """A collaborator with read permission only: below the default `write`."""
    fake.add_user("carol", repo=REPO, role="read")
    return "carol"


# -- a person's command ---------------------------------------------------------------------

def test_a_read_only_collaborators_regen_is_refused_and_nothing_is_posted(
        fake: FakeForge, world: World, reader: str, tmp_path: Path) -> None:
    outputs = tmp_path / "github-output"
    verdict = _verdict(_gate(_regen_comment(fake, world.pull.number, reader), tmp_path,
                             _env(fake, outputs)))
    assert verdict["run"] is False
    assert verdict["reason"] == ("refused: @carol has read permission here; opbot acts for "
                                 "people with write permission or above")
    assert (verdict["action"], verdict["op"], verdict["checked"]) == ("regen", "relu", True)
    assert verdict["answered"] is False
    assert fake.effects == []
    assert outputs.read_text(encoding="utf-8") == "run=false\naction=regen\nop=relu\n"


def test_a_refusal_is_answered_once_in_the_jobs_words(
        fake: FakeForge, world: World, reader: str, tmp_path: Path) -> None:
    payload = _regen_comment(fake, world.pull.number, reader)
    # The person's comment exists on the forge, as a delivered one does.
    payload["comment"]["id"] = fake.add_comment(REPO, world.pull.number, "/regen",
                                                author=reader).id
    verdict = _verdict(_gate(payload, tmp_path, _env(fake), "--answer-refusals"))
    assert (verdict["run"], verdict["answered"]) == (False, True)
    posted = fake.effect_log()
    assert len(posted) == 1
    assert posted[0].startswith(f"github:{REPO}#{world.pull.number}:comment:")
    assert f"{REFUSAL_OPENING}@carol has read permission here" in posted[0]
    # The job, were it run on the same event, finds that status comment its own and
    # says the very same in it: the two never disagree, nor answer twice.
    path = tmp_path / "job.json"
    path.write_text(json.dumps(payload), encoding="utf-8")
    job = run_opbot("event", "--forge", "github", "--event", "issue_comment", "--payload",
                    str(path), "--json", env=_env(fake), timeout=120)
    assert job.code == 0, job.stderr
    assert json.loads(job.stdout)["summary"] == verdict["reason"]
    # The status comment is the bot's record of its work on the thread: a second answer to
    # a refused command is a thumbs-down on that command, never an edit of the record.
    later = fake.effect_log()[1:]
    assert [effect for effect in later
            if ":comment:" in effect or ":comment-edit:" in effect] == []
    assert f"github:{REPO}#{world.pull.number}:reaction:comment-{payload['comment']['id']}:-1" \
        in later


def _command(fake: FakeForge, number: int, author: str, body: str) -> dict[str, Any]:
    payload = _regen_comment(fake, number, author)
    payload["comment"]["body"] = body
    payload["comment"]["id"] = fake.add_comment(REPO, number, body, author=author).id
    return payload


def test_help_and_cancel_are_answered_by_the_gate_never_on_an_npu(
        fake: FakeForge, world: World, tmp_path: Path) -> None:
    """Listing the commands, or saying that a CI run is cancelled in the CI system, needs no
    accelerator: the gate's hosted job answers, and the NPU job does not start."""
    outputs = tmp_path / "github-output"
    helped = _verdict(_gate(_command(fake, world.pull.number, "alice", "/help"), tmp_path,
                            _env(fake, outputs), "--answer-refusals"))
    assert (helped["run"], helped["answered"]) == (False, True)
    assert helped["reason"].startswith("answered by the gate: ")
    assert outputs.read_text(encoding="utf-8").startswith("run=false\naction=help\n")
    posted = [effect for effect in fake.effect_log() if ":comment:" in effect]
    assert len(posted) == 1
    assert "/regen" in posted[0]  # the list of commands
    cancelled = _verdict(_gate(_command(fake, world.pull.number, "alice", "/cancel"), tmp_path,
                               _env(fake), "--answer-refusals"))
    assert (cancelled["run"], cancelled["answered"]) == (False, True)


def test_a_strangers_help_takes_no_runner_and_gets_no_answer(
        fake: FakeForge, world: World, reader: str, tmp_path: Path) -> None:
    """/help is answered for people the bot works for: anyone else's burst of /help would
    otherwise be a burst of comments (or of NPU jobs)."""
    for _ in range(3):
        verdict = _verdict(_gate(_command(fake, world.pull.number, reader, "/help"), tmp_path,
                                 _env(fake), "--answer-refusals"))
        assert verdict["run"] is False
        assert "has read permission" in verdict["reason"]
    assert fake.effects == []


def test_a_maintainers_regen_runs(fake: FakeForge, world: World, tmp_path: Path) -> None:
    outputs = tmp_path / "github-output"
    verdict = _verdict(_gate(_regen_comment(fake, world.pull.number, "alice"), tmp_path,
                             _env(fake, outputs), "--answer-refusals"))
    assert (verdict["run"], verdict["checked"], verdict["answered"]) == (True, True, False)
    assert verdict["reason"] == "authorized: /regen on a pull request"
    assert verdict["plan_reason"] == "/regen on a pull request"
    assert (verdict["head_branch"], verdict["actor"]) == (HEAD, "alice")
    assert fake.effects == []
    assert outputs.read_text(encoding="utf-8") == "run=true\naction=regen\nop=relu\n"


def test_a_regen_on_a_forks_pull_request_is_not_run(
        fake: FakeForge, world: World, tmp_path: Path) -> None:
    fake.add_user("mallory")
    number = fake.open_fork_pull(REPO, "mallory", HEAD, {"ops/relu/kernel.py": "x = 1\n"},
                                 author="mallory", title="relu: faster").number
    outputs = tmp_path / "github-output"
    verdict = _verdict(_gate(_regen_comment(fake, number, "alice"), tmp_path,
                             _env(fake, outputs), "--answer-refusals"))
    assert (verdict["run"], verdict["action"]) == (False, "ignore")
    assert "fork" in verdict["reason"]
    assert fake.effects == []  # an ignored event is never answered
    assert outputs.read_text(encoding="utf-8") == "run=false\naction=ignore\nop=\n"


def test_the_bots_own_comment_is_not_run(fake: FakeForge, world: World,
                                         tmp_path: Path) -> None:
    # A personal token's bot is an ordinary "User": only its login, learnt from the token,
    # tells its comments from people's.
    verdict = _verdict(_gate(_regen_comment(fake, world.pull.number, fake.bot), tmp_path,
                             _env(fake), "--answer-refusals"))
    assert (verdict["run"], verdict["action"]) == (False, "ignore")
    assert verdict["reason"] == "the comment is the bot's own"
    assert fake.effects == []


def test_without_a_token_the_gate_says_so_and_lets_the_job_check(
        fake: FakeForge, world: World, reader: str, tmp_path: Path) -> None:
    env = {**_env(fake), "OPBOT_GITHUB_TOKEN": "", "GITHUB_TOKEN": "", "GH_TOKEN": ""}
    verdict = _verdict(_gate(_regen_comment(fake, world.pull.number, reader), tmp_path, env,
                             "--answer-refusals"))
    assert (verdict["run"], verdict["checked"], verdict["answered"]) == (True, False, False)
    assert "not checked here: no github token" in verdict["reason"]
    assert "the job checks" in verdict["reason"]
    assert fake.effects == []


def test_the_human_summary_is_one_line(fake: FakeForge, world: World, reader: str,
                                       tmp_path: Path) -> None:
    path = tmp_path / "comment.json"
    path.write_text(json.dumps(_regen_comment(fake, world.pull.number, reader)),
                    encoding="utf-8")
    run = run_opbot("event", "--forge", "github", "--event", "issue_comment", "--payload",
                    str(path), "--gate", env=_env(fake), timeout=120)
    assert run.code == 0, run.stderr
    assert run.stdout.strip().splitlines() == [
        f"skip regen: refused: @carol has read permission here; opbot acts for people with "
        f"write permission or above ({REPO}#{world.pull.number}, op relu)"]


# -- what passes: schedules and the bot's own dispatches ------------------------------------

def test_a_schedule_passes(fake: FakeForge, world: World, tmp_path: Path) -> None:
    outputs = tmp_path / "github-output"
    payload = {"schedule": "17 3 * * *", "repository": {"full_name": REPO}}
    verdict = _verdict(_gate(payload, tmp_path, _env(fake, outputs), event="schedule"))
    assert (verdict["run"], verdict["action"], verdict["checked"]) == (True, "scan", True)
    assert outputs.read_text(encoding="utf-8") == "run=true\naction=scan\nop=\n"


def _dispatch(fake: FakeForge, actor: str, sender: str) -> dict[str, Any]:
    plan = Plan(action="generate", reason="an issue labelled op-request", forge="github",
                event="issues", repo=REPO, number=1, op="relu", actor=actor, target="issue")
    return {"action": "opbot", "client_payload": {"plan": plan.to_json()},
            "repository": {"full_name": REPO}, "sender": {"login": sender, "type": "User"}}


@pytest.mark.parametrize(("actor", "sender", "run", "reason"), [
    ("alice", "opbot", True, "authorized: an issue labelled op-request"),
    ("carol", "opbot", False, "refused: @carol has read permission here"),
    ("alice", "mallory", False, "an opbot dispatch sent by mallory, not by the bot"),
])
def test_a_dispatched_plan_is_checked_as_the_job_checks_it(
        fake: FakeForge, world: World, reader: str, tmp_path: Path, actor: str, sender: str,
        run: bool, reason: str) -> None:
    fake.add_user("mallory", repo=REPO, role="write")
    verdict = _verdict(_gate(_dispatch(fake, actor, sender), tmp_path, _env(fake),
                             event="repository_dispatch"))
    assert verdict["run"] is run
    assert verdict["reason"].startswith(reason)
    assert fake.effects == []


# -- bad input ------------------------------------------------------------------------------

def test_a_bad_payload_is_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text("{not json", encoding="utf-8")
    run = run_opbot("event", "--forge", "github", "--event", "issue_comment", "--payload",
                    str(path), "--gate", "--json", env={"GITHUB_OUTPUT": ""}, timeout=120)
    assert run.code == 2
    assert run.stdout == ""


@pytest.mark.parametrize("flags", [("--gate", "--dry-run"), ("--answer-refusals",)])
def test_flags_that_do_not_go_together(tmp_path: Path, flags: tuple[str, ...]) -> None:
    path = tmp_path / "schedule.json"
    path.write_text(json.dumps({"repository": {"full_name": REPO}}), encoding="utf-8")
    run = run_opbot("event", "--forge", "github", "--event", "schedule", "--payload",
                    str(path), *flags, env={"GITHUB_OUTPUT": ""}, timeout=120)
    assert run.code == 2
    assert "--gate" in run.stderr


# -- in process -----------------------------------------------------------------------------

def _plan(**changes: Any) -> Plan:
    values: dict[str, Any] = {"action": "regen", "reason": "/regen on an op request issue",
                              "forge": "github", "event": "issue_comment", "repo": REPO,
                              "number": 1, "actor": "alice", "target": "issue"}
    return Plan(**{**values, **changes})


def test_without_a_forge_the_operators_list_still_refuses() -> None:
    """A repository's .opbot.yaml may only tighten the operator's policy: a repository off
    the operator's list is refused with no token to read anything."""
    policy = load_policy("version: 1\nrepositories: [octo/other]\n")
    verdict = decide(_plan(), None, JobSettings(policy=policy), "no github token")
    assert (verdict.run, verdict.checked) == (False, True)
    assert verdict.reason == ("refused: the repository octo/kernels is not on the policy's "
                              "list of repositories")
    allowed = decide(_plan(), None, JobSettings(policy=default_policy()), "no github token")
    assert (allowed.run, allowed.checked) == (True, False)


def test_the_bots_own_request_is_not_run() -> None:
    """An op request the bot itself labelled: planned `generate`, but the job would ignore
    it as an echo of its own action."""
    settings = JobSettings(bot_login="opbot[bot]")
    verdict = decide(_plan(action="generate", actor="opbot[bot]"), None, settings)
    assert (verdict.run, verdict.reason) == (False, "ignored: the bot's own event")
    other = decide(_plan(action="generate", actor="alice"), None, settings)
    assert other.run is True


def test_the_gates_forge_refuses_every_write(fake: FakeForge, world: World) -> None:
    forge = ReadOnlyForge(GITHUB.forge(fake))
    assert forge.default_branch() == "main"
    assert forge.permission("alice") == "maintain"
    with pytest.raises(WriteRefusedError, match="create_comment"):
        forge.create_comment(Target("issue", 1), "hello")
    with pytest.raises(WriteRefusedError):
        forge.add_reaction(Target("issue", 1), None, "eyes")
    assert fake.effects == []


def test_an_output_value_is_always_one_line() -> None:
    """A payload's text can never end an output line and forge one of its own."""
    plan = _plan(op="relu\nrun=true\r\u2028x")
    lines = output_lines(Verdict(plan, False, "refused")).splitlines()
    assert lines == ["run=false", "action=regen", "op=relu run=true x"]
    data = Verdict(copy.copy(plan), True, "authorized").to_json()
    assert (data["run"], data["reason"], data["plan_reason"]) == (
        True, "authorized", "/regen on an op request issue")


def test_a_rate_limited_forge_makes_the_gate_run_unchecked_not_hang(
        fake: FakeForge, world: World, tmp_path: Path) -> None:
    """Its job has a time limit: a forge that asks for a long wait must not let the gate
    time out (which would skip the work and tell no one)."""
    fake.rate_limit_next("github", 40, retry_after=3000)
    started = time.monotonic()
    verdict = _verdict(_gate(_regen_comment(fake, world.pull.number, "alice"), tmp_path,
                             _env(fake)))
    assert time.monotonic() - started < 60
    assert (verdict["run"], verdict["checked"]) == (True, False)
    assert "not checked here" in verdict["reason"]


def test_a_strangers_commands_never_make_the_bot_post_notes_or_comments(
        fake: FakeForge, world: World, reader: str, tmp_path: Path) -> None:
    """With an invalid .opbot.yaml, every refused command used to bring the note about it:
    a way for anyone to make the bot post. Now: one status comment at most, then a
    thumbs-down on each refused command (a /cancel too), and the note only with work."""
    fake.human_commit(REPO, "main", {".opbot.yaml": "trigger: {min_permission: [\n"},
                      "break the policy", author="alice")
    commands = [_command(fake, world.pull.number, reader, body)
                for body in ("/regen", "/cancel", "/regen")]
    for payload in commands:
        verdict = _verdict(_gate(payload, tmp_path, _env(fake), "--answer-refusals"))
        assert verdict["run"] is False
    comments = [effect for effect in fake.effect_log()
                if ":comment:" in effect or ":comment-edit:" in effect]
    assert len(comments) == 1  # the first refusal: no status comment was there yet
    assert ".opbot.yaml" not in comments[0]
    reactions = [effect for effect in fake.effect_log() if ":reaction:" in effect]
    assert reactions == [
        f"github:{REPO}#{world.pull.number}:reaction:comment-{payload['comment']['id']}:-1"
        for payload in commands[1:]]
