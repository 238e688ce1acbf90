"""Story tests: `opbot serve` subscribed to the fake forge's webhooks, driven by people.

A story arranges a repository, starts `opbot serve` as an operator would (a token, the
forge's URL, the webhook secret; no setting names the bot: it learns who it is from its
token), subscribes the server's /webhook/<forge> to the fake, then plays people: an issue
form, reviews, comments, pushes, CI failures. Everything the bot hears is what the real
service would deliver, its own actions included (tests/fakeforge/README.md, "Webhooks").
Each story ends with `settle()`: the stream must come to rest within a bounded number of
deliveries.

GitHub stories run the bot as a GitHub App (an installation token: `opbot[bot]`), GitLab
stories with a personal token (`opbot`).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runners.warm_broker import BROKER_VARIABLE
from tests.fake_llm import ScriptedLLM, Step, reply
from tests.fakeforge import FakeForge, FakeServer
from tests.fakeforge.gitstore import Push
from tests.fakeforge.hooks import Delivery, Front
from tests.fakeforge.model import Issue
from tests.support import CANDIDATES
from tests.support_serve import RunningServer, start_serve

SECRET = "story-webhook-secret-8c2f"
LLM_KEY = "sk-story-llm-key-31d0"
REPO = "octo/kernels"
BRANCH = "opbot/relu"
REFERENCE = ("import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
             "        return torch.relu(x)\n\n\ndef get_inputs():\n"
             "    return [torch.randn(33, 129)]\n")
FORM = (f"### Operator name\n\nrelu\n\n### Reference (PyTorch)\n\n```python\n{REFERENCE}```\n\n"
        "### Target backends\n\n- [X] triton\n- [ ] ascendc\n\n### Shapes and dtypes\n\n"
        "_No response_\n\n### Notes\n\n_No response_\n")
GOOD_KERNEL = (CANDIDATES / "relu__good_tutorial.py").read_text(encoding="utf-8")
STATUS_MARK = "<!-- opbot:status -->"
# Work the bot does on a pull request or an issue (anything else is `ignore`).
WORK = ("generate", "regen", "iterate-review", "iterate-ci", "scan")


KERNEL_PATH = "ops/relu/triton/relu.py"
REFERENCE_PATH = "ops/relu/reference.py"
# What the model answers after the first generation: the same kernel, revised (so that a
# new version touches the kernel file and nothing else the review named).
REVISED_KERNEL = GOOD_KERNEL.replace(
    "    pid = tl.program_id(axis=0)\n",
    "    pid = tl.program_id(axis=0).to(tl.int64)  # 64-bit offsets for large tensors\n")


def good_kernel_steps(n: int = 8) -> list[Step]:
    """An LLM whose kernels pass: the first answer is the kernel, the later ones revise it."""
    return [reply(GOOD_KERNEL)] + [reply(REVISED_KERNEL) for _ in range(n - 1)]


@dataclass
class Story:
    front: Front
    fake: FakeForge
    bot: RunningServer
    llm: ScriptedLLM | None
    log: Path

    # -- the cast ------------------------------------------------------------------------
    @property
    def bot_login(self) -> str:
        return self.fake.bot

    def request_op(self, author: str = "alice") -> Issue:
        """alice fills in the op request form (born with the op-request label)."""
        return self.fake.submit_issue_form(REPO, "[op] relu", FORM, ["op-request"],
                                           author=author)

    def settle(self, *, max_deliveries: int = 60, timeout: float = 420.0) -> list[Delivery]:
        """Until nothing is pending, the bot has no job queued or running, and nothing has
        moved for a while; fails on an unbounded chain."""
        return self.fake.hooks.settle(timeout, quiet=2.5, max_deliveries=max_deliveries,
                                      busy=self.busy)

    def busy(self) -> bool:
        jobs = self.bot.jobs()
        return bool(jobs.get("queued") or jobs.get("running"))

    # -- what happened -------------------------------------------------------------------
    def bot_pulls(self) -> list[Issue]:
        """Pull requests the bot opened."""
        return [i for i in self.fake.state.repos[REPO].issues.values()
                if i.pull is not None and i.author == self.bot_login]

    def pull(self) -> Issue:
        (found,) = self.bot_pulls()
        return found

    def status_comments(self, number: int) -> list[str]:
        issue = self.fake.state.repos[REPO].issues[number]
        return [c.body for c in issue.comments
                if c.author == self.bot_login and c.body.startswith(STATUS_MARK)]

    def pushes(self) -> list[Push]:
        """The bot's pushes (a person's and the fixture's are left out)."""
        return self.fake.pushes(REPO)

    def head(self) -> str:
        sha = self.fake.state.repos[REPO].git.resolve(BRANCH)
        assert sha is not None, f"{BRANCH} does not exist"
        return sha

    def effects(self, kind: str) -> list[str]:
        return [str(e) for e in self.fake.effects if e.kind == kind]

    def answers(self, made: list[Delivery] | None = None) -> list[dict[str, Any]]:
        """What the bot answered to each delivery (its JSON: action, reason, job)."""
        found = self.fake.hooks.deliveries if made is None else made
        return [d.answer for d in found if isinstance(d.answer, dict)]

    def jobs(self, made: list[Delivery] | None = None,
             actions: tuple[str, ...] = WORK) -> dict[int, str]:
        """Distinct jobs the deliveries started or joined: job id -> action."""
        return {a["job"]: a["action"] for a in self.answers(made)
                if a.get("job") is not None and a.get("action") in actions}

    def own_deliveries(self, made: list[Delivery] | None = None) -> list[Delivery]:
        found = self.fake.hooks.deliveries if made is None else made
        return [d for d in found if d.sender == self.bot_login]

    def log_lines(self, pattern: str) -> list[str]:
        text = self.log.read_text(encoding="utf-8", errors="replace")
        return [line for line in text.splitlines() if re.search(pattern, line)]

    def job_results(self) -> list[str]:
        """Each job's action, status and result, read from the server's queue (for a
        person reading a failure; the queue's layout is the bot's business)."""
        path = self.log.parent / "state" / "queue.sqlite3"
        try:
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
                rows = db.execute("SELECT id, plan, status, result FROM jobs ORDER BY id")
                return [f"job {ident} {json.loads(plan).get('action')} {status}: {result}"
                        for ident, plan, status, result in rows]
        except (sqlite3.Error, ValueError) as exc:
            return [f"(no job results: {exc})"]

    def summary(self) -> str:
        """The counts a failing story prints."""
        return (f"deliveries={len(self.fake.hooks.deliveries)} jobs={self.jobs()} "
                f"pulls={[p.number for p in self.bot_pulls()]} pushes={len(self.pushes())} "
                f"llm_requests={len(self.llm.requests) if self.llm else '-'}\n"
                + "\n".join(self.fake.hooks.log()[-40:]) + "\n--- jobs ---\n"
                + "\n".join(self.job_results()) + "\n--- serve log (tail) ---\n"
                + "\n".join(self.log_lines(r"^(?!INFO: .*/healthz)")[-60:]))


def serve_env(fake: FakeForge, llm: ScriptedLLM | None, *,
              own_warm_servers: bool = False) -> dict[str, str]:
    """`opbot serve`'s environment as an operator writes it: tokens and URLs, no login.
    Its generation steps borrow the test process's warm servers (tests/conftest.py
    warm_broker), as e2e's do; with `own_warm_servers`, serve starts its own broker, as in
    production (the op-request story keeps that path covered)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPBOT_")}
    if not own_warm_servers and os.environ.get(BROKER_VARIABLE):
        env[BROKER_VARIABLE] = os.environ[BROKER_VARIABLE]
    env.update({"OPBOT_GITHUB_URL": fake.github_url, "OPBOT_GITHUB_TOKEN": fake.token,
                "OPBOT_GITLAB_URL": fake.gitlab_url, "OPBOT_GITLAB_TOKEN": fake.token,
                "OPBOT_GIT_EMAIL": fake.state.users[fake.bot].email,
                "OPBOT_ALLOWED_REPOS": REPO})
    if llm is not None:
        env.update({"OPBOT_LLM_BASE_URL": llm.base_url, "OPBOT_LLM_MODEL": "scripted",
                    "OPBOT_LLM_API_KEY": LLM_KEY})
    return env


def arrange(fake: FakeForge, policy: str | None = None) -> None:
    """The repository, a maintainer (alice), a triager (bob), an outsider (mallory);
    `policy` becomes the default branch's .opbot.yaml."""
    files = {"README.md": "# kernels\n"}
    if policy is not None:
        files[".opbot.yaml"] = policy
    fake.add_repo(REPO, files=files)
    fake.add_user("alice", repo=REPO, role="maintain")
    fake.add_user("bob", repo=REPO, role="triage")
    fake.add_user("mallory")


@contextmanager
def story(server: FakeServer, tmp_path: Path, front: Front, *,
          llm_steps: list[Step] | None = None, policy: str | None = None,
          own_warm_servers: bool = False) -> Iterator[Story]:
    """A fresh fake (GitHub: the bot is an App), `opbot serve` subscribed to it; on the
    way out the stream must be quiet, and the fake honest."""
    fake = FakeForge(server, tmp_path / "forge", app="opbot" if front == "github" else None)
    arrange(fake, policy)
    llm = ScriptedLLM(llm_steps).__enter__() if llm_steps is not None else None
    log = tmp_path / "serve.log"
    env = serve_env(fake, llm, own_warm_servers=own_warm_servers)
    bot = start_serve("--state-dir", str(tmp_path / "state"), env=env, log=log, secret=SECRET)
    fake.subscribe(front, f"{bot.url}/webhook/{front}", SECRET)
    told = Story(front, fake, bot, llm, log)
    try:
        yield told
    finally:
        if os.environ.get("STORY_VERBOSE"):  # the whole conversation, for a person reading
            print(f"\n=== {front} story ===\n" + told.summary())
        bot.stop()
        fake.hooks.close()
        if llm is not None:
            llm.__exit__(None, None, None)
    fake.assert_honest()
