"""Publishing: branch `opbot/<op>`, one commit with the operator package, one PR per op.

State lives on the forge, as Renovate keeps it: the branch name is deterministic, the PR
body carries a hidden JSON marker (attempts, budget used, head SHA, toolchain), the status
comment is found by its own marker and edited in place. A redelivery or a second trigger
updates the PR; it never opens another. Before any push, the change is checked: only files
under ops/<name>/, no symlinks, no binaries, sizes capped.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.agent.transcript import Redactor
from bot.errors import OpbotError
from bot.forge.base import Comment, Forge, ForgeError, PullRequest, PullRequestDraft, Target

BRANCH_PREFIX = "opbot/"
COMMENT_LIMIT = 65_536  # GitHub's cap on a comment or PR body, in characters
STATUS_MARKER = "<!-- opbot:status -->"
_PR_MARKER = re.compile(r"<!-- opbot:marker (?P<json>\{.*?\}) -->", re.DOTALL)
MAX_FILE_BYTES = 2 * 1024 * 1024
MAX_CHANGE_BYTES = 8 * 1024 * 1024
# The bot's commit identity (an empty setting means the default, never an empty name).
BOT_NAME = os.environ.get("OPBOT_GIT_NAME") or "opbot"
BOT_EMAIL = os.environ.get("OPBOT_GIT_EMAIL") or "opbot@users.noreply.github.com"


# A credential helper is a shell snippet when it starts with `!`; it reads the values from
# the environment git was given, so the secret never appears in a command line.
_CREDENTIAL_HELPER = ('!f() { test "$1" = get || exit 0; '
                      'echo "username=$OPBOT_GIT_USERNAME"; echo "password=$OPBOT_GIT_PASSWORD"; '
                      '}; f')


class PublishError(OpbotError):
    """The change cannot be published (a check failed, or git refused)."""


def branch_for(op: str) -> str:
    return f"{BRANCH_PREFIX}{op}"


def trim(text: str, limit: int = COMMENT_LIMIT - 512) -> str:
    """Fit a forge's comment limit: keep the start and the end, say what was cut."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head - 80
    return (f"{text[:head]}\n\n... ({len(text) - head - tail} characters cut to fit the "
            f"forge's limit) ...\n\n{text[-tail:]}")


# -- markers -------------------------------------------------------------------------------


def marker(data: dict[str, Any]) -> str:
    # `--` cannot appear inside an HTML comment; JSON never needs it unescaped.
    text = json.dumps(data, sort_keys=True).replace("--", "-\\u002d")
    return f"<!-- opbot:marker {text} -->"


def read_marker(body: str) -> dict[str, Any] | None:
    match = _PR_MARKER.search(body or "")
    if match is None:
        return None
    try:
        data = json.loads(match.group("json"))
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def with_marker(body: str, data: dict[str, Any]) -> str:
    """`body` with its marker replaced by one holding `data` (added first if it had none)."""
    fresh = marker(data)
    if _PR_MARKER.search(body or ""):
        return _PR_MARKER.sub(lambda _match: fresh, body, count=1)
    return f"{fresh}\n{body}"


def _public(text: str) -> str:
    """What may be posted: known secrets redacted, within the forge's limit."""
    return trim(Redactor.from_environment().text(text))


def upsert_status(forge: Forge, target: Target, text: str, bot_login: str | None, *,
                  found: Comment | None = None) -> Comment:
    """Edit the bot's status comment in place; create it the first time. Only a comment
    the bot wrote is ever edited: anyone can paste the marker into theirs. With the bot's
    identity unknown, no comment is its own (a new one is posted). `found`: the status
    comment, already read; left as it is when it already says `text`."""
    body = _public(f"{STATUS_MARKER}\n{text}")
    found = found or status_comment(forge, target, bot_login)
    if found is not None:
        if found.body == body:
            return found
        return forge.update_comment(target, found.id, body)
    return forge.create_comment(target, body)


def status_comment(forge: Forge, target: Target, bot_login: str | None) -> Comment | None:
    for comment in forge.list_comments(target):
        if bot_login and comment.author == bot_login and comment.body.startswith(STATUS_MARKER):
            return comment
    return None


def answer_refusal(forge: Forge, target: Target, text: str, bot_login: str | None,
                   comment_id: int | None) -> None:
    """Say why a request was refused. The status comment is the bot's record of its work on
    the thread (a job's progress, a dispatch it gave up on): a refusal takes it only while
    there is none, as for a first request. Later, anyone's refused command would overwrite
    that record, so the command's comment gets a thumbs-down instead."""
    if status_comment(forge, target, bot_login) is None:
        forge.create_comment(target, _public(f"{STATUS_MARKER}\n{text}"))
    elif comment_id is not None:
        with contextlib.suppress(ForgeError):  # a courtesy: a deleted comment takes none
            forge.add_reaction(target, comment_id, "-1")


# -- the change ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ChangeLimits:
    forbidden: tuple[str, ...] = (".github/", ".gitlab-ci.yml", ".gitlab/", ".opbot.yaml")
    max_file_bytes: int = MAX_FILE_BYTES
    max_change_bytes: int = MAX_CHANGE_BYTES


def check_change(root: Path, allowed_prefix: str,
                 limits: ChangeLimits | None = None) -> list[str]:
    """The files under `root/allowed_prefix`, after the publisher's checks; raise on a breach."""
    rules = limits or ChangeLimits()
    if any(allowed_prefix.strip("/").startswith(item.strip("/")) for item in rules.forbidden):
        raise PublishError(f"{allowed_prefix} is a path the policy forbids the bot to write")
    base = (root / allowed_prefix).resolve()
    if not base.is_dir() or not base.is_relative_to(root.resolve()):
        raise PublishError(f"nothing to publish under {allowed_prefix}")
    files: list[str] = []
    total = 0
    for path in sorted(base.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if path.is_symlink():
            raise PublishError(f"{relative} is a symbolic link: not published")
        if path.is_dir():
            continue
        data = path.read_bytes()
        if len(data) > rules.max_file_bytes:
            raise PublishError(f"{relative} is larger than {rules.max_file_bytes // 1024} KiB")
        if b"\x00" in data:
            raise PublishError(f"{relative} is a binary file: not published")
        total += len(data)
        files.append(relative)
    if total > rules.max_change_bytes:
        raise PublishError(f"the change is larger than {rules.max_change_bytes} bytes")
    return files


@dataclass
class GitWorkspace:
    """A clone of the repository; git runs with an argument list and never a shell."""

    path: Path
    redactor: Redactor
    based_on: str = ""  # the bot branch's remote head when work began ("" when new)

    credentials: tuple[str, str] | None = None  # (username, password) for the remote

    @classmethod
    def clone(cls, url: str, path: Path, redactor: Redactor,
              credentials: tuple[str, str] | None = None) -> GitWorkspace:
        """A clone of `url`; `credentials` reach git through a credential helper that reads
        them from git's environment: never in a URL, an argument list or .git/config."""
        workspace = cls(path.parent, redactor, credentials=credentials)
        workspace.git("clone", "--quiet", url, str(path))
        workspace = cls(path, redactor, credentials=credentials)
        workspace.git("config", "user.name", BOT_NAME)
        workspace.git("config", "user.email", BOT_EMAIL)
        return workspace

    def _environment(self) -> dict[str, str]:
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
        if self.credentials is not None:
            username, password = self.credentials
            # git runs the helper with `get` and reads username=/password= lines; the values
            # stay in this process tree's environment.
            env.update(GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="credential.helper",
                       GIT_CONFIG_VALUE_0=_CREDENTIAL_HELPER, OPBOT_GIT_USERNAME=username,
                       OPBOT_GIT_PASSWORD=password)
        return env

    def git(self, *args: str, check: bool = True) -> str:
        completed = subprocess.run(["git", *args], cwd=self.path,  # noqa: S607 - git from PATH
                                   capture_output=True, text=True, timeout=300, check=False,
                                   env=self._environment())
        if check and completed.returncode != 0:
            detail = self.redactor.text((completed.stderr or completed.stdout).strip()[-2000:])
            raise PublishError(f"git {args[0]} failed: {detail}")
        return completed.stdout.strip()

    def remote_branch_exists(self, branch: str) -> bool:
        return bool(self.git("ls-remote", "--heads", "origin", branch))

    def start_branch(self, branch: str, base: str, *, from_base: bool = False) -> None:
        """Work on `branch` as the forge has it (or fresh from `base`). `from_base`: rebuild
        it from `base` (/regen --force): what others pushed to it is dropped, knowingly —
        the push's lease still names the head seen here, so nothing pushed since is lost."""
        if self.remote_branch_exists(branch):
            self.git("fetch", "--quiet", "origin", f"+refs/heads/{branch}:refs/remotes/origin/"
                     f"{branch}")
            self.based_on = self.git("rev-parse", f"origin/{branch}")
            start = f"origin/{base}" if from_base else f"origin/{branch}"
            self.git("checkout", "--quiet", "-B", branch, start)
        else:
            self.git("checkout", "--quiet", "-B", branch, f"origin/{base}")
            self.based_on = ""

    def replace_folder(self, relative: str, source: Path) -> None:
        target = self.path / relative
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(source, target, symlinks=True)

    def commit(self, message: str, folder: str) -> str | None:
        """Commit everything under `folder` as it now is — new, changed and removed files
        (a regeneration's stale files leave the branch); None when nothing changed."""
        self.git("add", "--all", "--", folder)
        if not self.git("status", "--porcelain", "--", folder):
            return None
        self.git("commit", "--quiet", "-m", message)
        return self.git("rev-parse", "HEAD")

    def changed_since(self, start: str) -> list[str]:
        """Paths that differ between `start` and HEAD."""
        if not start:
            return []
        return self.git("diff", "--name-only", start, "HEAD").splitlines()

    def push(self, branch: str) -> None:
        # The lease names the head the bot built on: a push someone made since is never lost.
        lease = f"--force-with-lease=refs/heads/{branch}:{self.based_on}"
        self.git("push", "--quiet", lease, "origin", f"{branch}:refs/heads/{branch}")


@dataclass(frozen=True)
class Published:
    """A generation as it landed: its pull request and the commit it pushed."""

    number: int
    url: str
    created: bool
    head_sha: str
    changed: tuple[str, ...]  # paths the new commit changed (empty: nothing was pushed)


# -- the pull request ----------------------------------------------------------------------


def publish_pull_request(forge: Forge, *, branch: str, base: str, title: str, body: str,
                         labels: Sequence[str] = ("opbot",)) -> tuple[PullRequest, bool]:
    """The PR for `branch`, created or updated; True when it was created."""
    existing = forge.find_pull_request(branch)
    if existing is not None:
        return forge.update_pull_request(existing.number, title=title, body=_public(body)), False
    created = forge.create_pull_request(PullRequestDraft(
        head_branch=branch, base_branch=base, title=title, body=_public(body),
        labels=list(labels)))
    if labels:
        forge.add_labels(Target("pull", created.number), list(labels))
    return created, True
