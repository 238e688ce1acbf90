"""The real git repository behind each fake repo: a bare repo read with git commands."""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

# Pushes made by the fixture helpers carry this actor, so they are not reported as the
# client's pushes.
FIXTURE_ACTOR = "fakeforge-fixture"
PUSH_LOG = "fakeforge-pushes.log"
_SEP = "\x1f"
_END = "\x1e"

# Appends "actor old new ref" for every ref a push updates; the fake reads it as effects.
_POST_RECEIVE = f"""#!/bin/sh
while read old new ref; do
  echo "${{FAKEFORGE_ACTOR:-client}} $old $new $ref" >> "$GIT_DIR/{PUSH_LOG}"
done
"""


def git_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The caller's environment minus any user or system git config (hermetic runs)."""
    env = dict(os.environ)
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_TERMINAL_PROMPT="0")
    env.update(extra or {})
    return env


def git(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
        check: bool = True) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env=git_env(env), capture_output=True,
                          text=True, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


@dataclass(frozen=True)
class GitCommit:
    sha: str
    parents: tuple[str, ...]
    author_name: str
    author_email: str
    authored_at: str
    committer_name: str
    committer_email: str
    committed_at: str
    message: str

    @property
    def title(self) -> str:
        return self.message.split("\n", 1)[0]


@dataclass(frozen=True)
class Push:
    actor: str
    old: str
    new: str
    ref: str


_LOG_FORMAT = _SEP.join(["%H", "%P", "%an", "%ae", "%aI", "%cn", "%ce", "%cI", "%B"]) + _END


class BareRepo:
    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def create(cls, path: Path, default_branch: str, files: dict[str, str],
               author: tuple[str, str]) -> BareRepo:
        git("init", "--quiet", "--bare", f"--initial-branch={default_branch}", str(path))
        hook = path / "hooks" / "post-receive"
        hook.write_text(_POST_RECEIVE)
        hook.chmod(0o755)
        repo = cls(path)
        repo.commit(default_branch, files, "Initial commit", author, base=None)
        return repo

    @property
    def url(self) -> str:
        return self.path.as_uri()

    def _git(self, *args: str, check: bool = True) -> str:
        return git(*args, env={"GIT_DIR": str(self.path)}, check=check)

    def resolve(self, ref: str) -> str | None:
        """A branch name, tag or sha to a commit sha; None when it names nothing."""
        for candidate in (f"refs/heads/{ref}", ref):
            out = self._git("rev-parse", "--verify", "--quiet", f"{candidate}^{{commit}}",
                            check=False).strip()
            if out:
                return out
        return None

    def branches(self) -> dict[str, str]:
        out = self._git("for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads")
        return dict(line.split(" ", 1) for line in out.splitlines() if line)

    def log(self, spec: str, *extra: str) -> list[GitCommit]:
        out = self._git("log", f"--format={_LOG_FORMAT}", *extra, spec)
        return [_parse_commit(rec) for rec in out.split(_END) if rec.strip()]

    def commit_info(self, sha: str) -> GitCommit:
        return self.log(sha, "-1")[0]

    def between(self, base: str, head: str) -> list[GitCommit]:
        """Commits reachable from head but not from base, oldest first (`base...head`)."""
        return self.log(f"{base}..{head}", "--reverse", "--topo-order")

    def count(self, spec: str) -> int:
        return int(self._git("rev-list", "--count", spec).strip())

    def merge_base(self, a: str, b: str) -> str | None:
        return self._git("merge-base", a, b, check=False).strip() or None

    def blob(self, ref: str, path: str) -> tuple[str, bytes] | None:
        """(blob sha, content) of a file at ref; None when absent or not a file."""
        spec = f"{ref}:{path}"
        kind = self._git("cat-file", "-t", spec, check=False).strip()
        if kind != "blob":
            return None
        sha = self._git("rev-parse", spec).strip()
        done = subprocess.run(["git", "cat-file", "blob", sha], capture_output=True, check=True,
                              env=git_env({"GIT_DIR": str(self.path)}))
        return sha, done.stdout

    def pushes(self) -> list[Push]:
        log = self.path / PUSH_LOG
        if not log.exists():
            return []
        return [Push(*line.split(" ", 3)) for line in log.read_text().splitlines() if line]

    def commit(self, branch: str, files: dict[str, str], message: str,
               author: tuple[str, str], base: str | None = None,
               actor: str = FIXTURE_ACTOR) -> str:
        """A real commit, made in a temporary clone and pushed back (as the fixture, or as
        `actor` in the push log: "fakeforge-fixture:<login>" for a person a helper plays)."""
        with tempfile.TemporaryDirectory(prefix="fakeforge-clone-") as tmp:
            work = Path(tmp)
            git("init", "--quiet", str(work))
            # An existing branch grows; a new one starts at `base` (or as a root commit).
            start = branch if self.resolve(branch) else base
            if start is not None:
                git("fetch", "--quiet", self.url, f"refs/heads/{start}:refs/remotes/origin/start",
                    cwd=work)
                git("checkout", "--quiet", "-B", branch, "origin/start", cwd=work)
            else:
                git("checkout", "--quiet", "-b", branch, cwd=work)
            for rel, text in files.items():
                target = work / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
                git("add", rel, cwd=work)
            who = {"GIT_AUTHOR_NAME": author[0], "GIT_AUTHOR_EMAIL": author[1],
                   "GIT_COMMITTER_NAME": author[0], "GIT_COMMITTER_EMAIL": author[1]}
            git("commit", "--quiet", "--allow-empty", "-m", message, cwd=work, env=who)
            git("push", "--quiet", self.url, f"HEAD:refs/heads/{branch}", cwd=work,
                env={"FAKEFORGE_ACTOR": actor})
            return git("rev-parse", "HEAD", cwd=work).strip()


def _parse_commit(record: str) -> GitCommit:
    fields = record.lstrip("\n").split(_SEP)
    sha, parents, an, ae, at, cn, ce, ct, message = fields
    return GitCommit(sha, tuple(parents.split()), an, ae, at, cn, ce, ct, message.rstrip("\n"))
