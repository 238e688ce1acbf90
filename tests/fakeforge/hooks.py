"""Webhook deliveries from the fake: subscriptions, a delivery thread, and a record of every
delivery and of what the receiver answered.

    fake.subscribe("github", url, secret)   # or "gitlab"; an App's token adds installation
    ...                                     # clients act; helpers play people
    fake.hooks.settle()                     # until the stream is quiet (and finite)
    fake.hooks.of("issue_comment", "created")

Every act announced on the state (`State.announce`, from the front ends' handlers and from
FakeForge's helpers) is rendered at once, under the state's lock, into one delivery per
event and subscription (github_hooks.py, gitlab_hooks.py): the payload shows the state as it
was when the act happened. A background thread sends them over real HTTP, one at a time,
signed the way each service signs them, and polls each bare repository's push log for
pushes (git pushes reach no handler). GitHub payloads are validated against GitHub's webhook
schemas; a payload that fails is recorded as a validation error (`assert_honest` fails).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import random
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from .acts import Act, ActKind
from .github_hooks import GitHubHooks
from .gitlab_hooks import GITLAB_VERSION, GitLabHooks
from .gitstore import FIXTURE_ACTOR, git

if TYPE_CHECKING:
    from .hook_spec import HookSpec
    from .model import State
    from .server import FakeServer

Front = Literal["github", "gitlab"]
Order = Literal["natural", "reversed", "shuffled"]
HOOKSHOT = "GitHub-Hookshot/7a3e9c1"
# A helper that plays a person pushes as "fakeforge-fixture:<login>" (gitstore.py); the
# fixture's own arrangement pushes as "fakeforge-fixture" and delivers nothing.
PERSON_PREFIX = f"{FIXTURE_ACTOR}:"
CLIENT_ACTOR = "client"  # the post-receive hook's name for a push with no actor set


@dataclass
class Subscription:
    id: int
    front: Front
    url: str
    secret: str
    installation: int | None = None  # a GitHub App's webhook: payloads name the installation
    uuid: str = field(default_factory=lambda: str(uuid.uuid4()))


@dataclass
class Delivery:
    """One POST to a subscriber, and its answer once sent."""

    id: str  # X-GitHub-Delivery (a GUID) / GitLab's Idempotency-Key
    subscription: Subscription
    event: str  # X-GitHub-Event / X-Gitlab-Event
    action: str | None  # the payload's action (GitLab: object_attributes.action or status)
    act: ActKind
    repo: str
    body: bytes
    headers: dict[str, str]
    redelivery: bool = False
    status: int | None = None  # the receiver's HTTP status; None until sent (or unreachable)
    answer: Any = None  # the receiver's JSON answer (text when it is not JSON)
    error: str | None = None  # why nothing was answered (connection refused ...)
    sent: bool = False

    @property
    def payload(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.body)
        return value

    @property
    def sender(self) -> str | None:
        """Who acted: GitHub's `sender.login`, GitLab's `user.username` (push: user_username)."""
        payload = self.payload
        if "sender" in payload:
            return str(payload["sender"]["login"])
        if "user" in payload:
            return str(payload["user"]["username"])
        return payload.get("user_username")

    def __str__(self) -> str:
        what = f"{self.event}.{self.action}" if self.action else self.event
        return f"{what} on {self.repo} by {self.sender} -> {self.status} {self.answer!r:.120}"


class UnboundedStream(AssertionError):
    """More deliveries than a story allows: the bot and the forge feed each other."""


class Hooks:
    def __init__(self, server: FakeServer, state: State, *, client_login: str) -> None:
        self.server = server
        self.state = state
        self.client_login = client_login  # who a client's `git push` is (no token travels)
        self.subscriptions: list[Subscription] = []
        self.order: Order = "natural"  # how one act's deliveries are queued
        self.random = random.Random(0)  # for "shuffled": seeded, so a failure replays
        self._deliveries: list[Delivery] = []
        self._pending: deque[Delivery] = deque()
        self._sending = False
        self._cv = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pushes_seen: dict[str, int] = {}
        self._settled = 0  # deliveries up to here were answered by an earlier settle()
        self._spec: HookSpec | None = None
        state.listeners.append(self.on_act)

    # -- subscribing ---------------------------------------------------------------------
    def subscribe(self, front: Front, url: str, secret: str, *,
                  installation: int | None = None) -> Subscription:
        """Deliver every later act to `url`, as `front` would (from now on, as a newly
        created webhook: nothing that happened before is sent)."""
        if front == "github" and self._spec is None:
            from .hook_spec import require_hook_spec

            self._spec = require_hook_spec()
        with self.state.lock:
            if not self.subscriptions:  # pushes made so far are history
                self._pushes_seen = {name: len(repo.git.pushes())
                                     for name, repo in self.state.repos.items()}
            found = Subscription(len(self.subscriptions) + 1, front, url, secret,
                                 installation)
            self.subscriptions.append(found)
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="fakeforge-hooks",
                                            daemon=True)
            self._thread.start()
        return found

    def close(self) -> None:
        self._stop.set()
        with self._cv:
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10)

    # -- what was delivered --------------------------------------------------------------
    @property
    def deliveries(self) -> list[Delivery]:
        with self._cv:
            return list(self._deliveries)

    def of(self, event: str, action: str | None = None, *,
           front: Front | None = None) -> list[Delivery]:
        return [d for d in self.deliveries if d.event == event
                and (action is None or d.action == action)
                and (front is None or d.subscription.front == front)]

    def log(self) -> list[str]:
        return [str(d) for d in self.deliveries]

    # -- acts become deliveries ----------------------------------------------------------
    def on_act(self, act: Act) -> None:
        """Render `act` for every subscription (called under the state's lock)."""
        made: list[Delivery] = []
        for subscription in self.subscriptions:
            if subscription.front == "github":
                rendered = GitHubHooks(self.state, self.server.root,
                                       installation=subscription.installation).render(act)
            else:
                rendered = GitLabHooks(self.state, self.server.gitlab_url).render(act)
            made += [self._delivery(subscription, act, event, payload)
                     for event, payload in rendered]
        if self.order == "reversed":
            made.reverse()
        elif self.order == "shuffled":
            self.random.shuffle(made)
        with self._cv:
            self._deliveries += made
            self._pending.extend(made)
            self._cv.notify_all()

    def _delivery(self, subscription: Subscription, act: Act, event: str,
                  payload: dict[str, Any]) -> Delivery:
        body = json.dumps(payload).encode()
        if subscription.front == "github":
            action = payload.get("action")
            ident = str(uuid.uuid4())
            headers = self._github_headers(subscription, act, event, ident, body)
            self._check(event, action, payload, headers)
        else:
            attributes = payload.get("object_attributes") or {}
            action = attributes.get("action") or attributes.get("status") or \
                payload.get("build_status")
            ident = str(uuid.uuid4())
            headers = self._gitlab_headers(subscription, event, ident)
        return Delivery(ident, subscription, event, action, act.kind, act.repo, body, headers)

    def _check(self, event: str, action: str | None, payload: dict[str, Any],
               headers: dict[str, str]) -> None:
        """The payload against its event's schema, the headers against those GitHub
        documents for it; problems are the test's validation errors."""
        assert self._spec is not None
        errors = [f"webhook {error}" for error in self._spec.errors(event, action, payload)]
        sent = {name.lower() for name in headers}
        errors += [f"webhook {event}.{action}: no {name} header"
                   for name in self._spec.required_headers(event, action)
                   if name.lower() not in sent]
        self.state.validation_errors.extend(errors)

    def _github_headers(self, subscription: Subscription, act: Act, event: str, ident: str,
                        body: bytes) -> dict[str, str]:
        """As GitHub's "Webhook events and payloads" lists them (delivery headers)."""
        secret = subscription.secret.encode()
        app = subscription.installation is not None
        target = subscription.installation if app else self.state.repos[act.repo].id
        headers = {
            "Content-Type": "application/json", "User-Agent": HOOKSHOT,
            "X-GitHub-Event": event, "X-GitHub-Delivery": ident,
            "X-GitHub-Hook-ID": str(subscription.id),
            "X-GitHub-Hook-Installation-Target-ID": str(target),
            "X-GitHub-Hook-Installation-Target-Type": "integration" if app else "repository"}
        if subscription.secret:
            headers["X-Hub-Signature"] = "sha1=" + hmac.new(secret, body, hashlib.sha1) \
                .hexdigest()
            headers["X-Hub-Signature-256"] = "sha256=" + hmac.new(secret, body,
                                                                  hashlib.sha256).hexdigest()
        return headers

    def _gitlab_headers(self, subscription: Subscription, event: str, ident: str,
                        ) -> dict[str, str]:
        """As GitLab's "Webhooks" page lists them (delivery headers)."""
        headers = {
            "Content-Type": "application/json", "User-Agent": f"GitLab/{GITLAB_VERSION}",
            "X-Gitlab-Event": event, "X-Gitlab-Instance": self.server.gitlab_url,
            "X-Gitlab-Webhook-UUID": subscription.uuid,
            "X-Gitlab-Event-UUID": str(uuid.uuid4()), "Idempotency-Key": ident}
        if subscription.secret:
            headers["X-Gitlab-Token"] = subscription.secret
        return headers

    # -- redelivery ----------------------------------------------------------------------
    def redeliver(self, delivery_id: str) -> Delivery:
        """The same delivery again, same id, headers and body (GitHub's "Redeliver";
        GitLab's "Resend request" keeps its Idempotency-Key)."""
        with self._cv:
            original = next((d for d in self._deliveries if d.id == delivery_id), None)
            if original is None:
                raise KeyError(f"no delivery {delivery_id}")
            again = replace(original, redelivery=True, status=None, answer=None, error=None,
                            sent=False)
            self._deliveries.append(again)
            self._pending.append(again)
            self._cv.notify_all()
        return again

    # -- the delivery thread -------------------------------------------------------------
    def _alive(self) -> bool:
        return not self._stop.is_set() and self.server.state is self.state

    def _run(self) -> None:
        import httpx

        with httpx.Client(timeout=30) as client:
            while self._alive():
                try:
                    self._poll_pushes()
                except Exception as exc:  # noqa: BLE001 - a bug in the fake: loud
                    self.state.validation_errors.append(f"webhook push poller crashed: {exc!r}")
                with self._cv:
                    if not self._pending:
                        self._cv.wait(0.05)
                    if not self._pending:
                        continue
                    delivery = self._pending.popleft()
                    self._sending = True
                try:
                    self._send(client, delivery)
                finally:
                    with self._cv:
                        self._sending = False
                        self._cv.notify_all()

    def _send(self, client: Any, delivery: Delivery) -> None:
        import httpx

        try:
            answer = client.post(delivery.subscription.url, content=delivery.body,
                                 headers=delivery.headers)
        except httpx.HTTPError as exc:
            delivery.error = f"{type(exc).__name__}: {exc}"
        else:
            delivery.status = answer.status_code
            try:
                delivery.answer = answer.json()
            except ValueError:
                delivery.answer = answer.text
        delivery.sent = True

    def _poll_pushes(self) -> None:
        with self.state.lock:
            repos = list(self.state.repos.items())
        for name, repo in repos:
            pushes = repo.git.pushes()
            seen = self._pushes_seen.get(name, 0)
            self._pushes_seen[name] = len(pushes)
            for push in pushes[seen:]:
                actor = self.pusher(push.actor)
                if actor is None or not push.ref.startswith("refs/heads/"):
                    continue
                with self.state.lock:
                    self._follow_forks(name, push.ref.removeprefix("refs/heads/"))
                    self.on_act(Act("push", name, actor, ref=push.ref, before=push.old,
                                    after=push.new))

    def pusher(self, actor: str) -> str | None:
        """The login behind a push log actor; None for the fixture's own pushes."""
        if actor == FIXTURE_ACTOR:
            return None
        if actor.startswith(PERSON_PREFIX):
            return actor.removeprefix(PERSON_PREFIX)
        return self.client_login if actor == CLIENT_ACTOR else actor

    def _follow_forks(self, fork: str, branch: str) -> None:
        """A push to a fork's branch moves the head of the PRs made from it (refs/pull/N/head
        in the base repository, as on GitHub)."""
        source = self.state.repos[fork]
        for base in self.state.repos.values():
            for pull in base.pulls():
                data = pull.pull
                assert data is not None
                if data.head_repo == fork and data.head == branch and pull.state == "open":
                    git("fetch", "--quiet", source.git.url,
                        f"+refs/heads/{branch}:refs/pull/{pull.number}/head",
                        env={"GIT_DIR": str(base.git.path)})

    # -- settling ------------------------------------------------------------------------
    def _activity(self) -> tuple[int, ...]:
        with self.state.lock:
            pushes = sum(len(r.git.pushes()) for r in self.state.repos.values())
            return (len(self.state.effects), len(self.state.requests), pushes,
                    len(self._deliveries))

    def settle(self, timeout: float = 180.0, *, quiet: float = 2.0, max_deliveries: int = 60,
               busy: Callable[[], bool] | None = None) -> list[Delivery]:
        """Wait until the stream is quiet: nothing pending, nothing being sent, `busy()`
        (e.g. "the bot has jobs queued or running") false, and no new request, effect,
        push or delivery for `quiet` seconds. Fails when more than `max_deliveries` are made
        since the last settle (an unbounded chain) or when it is not quiet within
        `timeout`. Answers the deliveries made since the last settle (or the start)."""
        with self._cv:
            start = self._settled
        deadline = time.monotonic() + timeout
        last: tuple[int, ...] = ()
        since = time.monotonic()
        while True:
            with self._cv:
                made = self._deliveries[start:]
                idle = not self._pending and not self._sending
            if len(made) > max_deliveries:
                lines = "\n".join(str(d) for d in made[-20:])
                raise UnboundedStream(f"{len(made)} deliveries (at most {max_deliveries} "
                                      f"allowed): the stream does not settle; the last:\n"
                                      f"{lines}")
            activity = self._activity()
            if activity != last or not idle or (busy is not None and busy()):
                last, since = activity, time.monotonic()
            elif time.monotonic() - since >= quiet:
                with self._cv:
                    made = self._deliveries[start:]
                    self._settled = len(self._deliveries)
                return made
            if time.monotonic() > deadline:
                raise AssertionError(f"the stream did not settle within {timeout:.0f} s "
                                     f"({len(made)} deliveries meanwhile)")
            time.sleep(0.1)
