"""What a forge package provides, inbound and outbound: the ForgePlugin protocol.

bot/forge/registry.py maps each forge's name to one of these; the webhook receiver, event
planning, the CLI and jobs reach a forge only through it, so a new forge is one folder
under bot/forge/ and one line in the registry. Each plugin imports its heavy parts (the
API client library, payload parsers) only when used, so listing forges stays cheap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from bot.forge.base import Forge
from bot.forge.inbound import Planner


@dataclass(frozen=True)
class CiInput:
    """What a CI job's environment says about the event that started it."""

    event: str | None = None
    payload_path: Path | None = None
    # The payload of a scheduled run that got no event file: the project is the CI's own.
    scheduled_payload: Mapping[str, Any] = field(default_factory=dict)
    # The CI that supplies the event and its file ("GitHub Actions"), named in messages;
    # None where the CI supplies neither (GitLab CI: the pipeline's job passes them).
    system: str | None = None


class ForgePlugin(Protocol):
    """One forge. `name` is its registry key, the `--forge` choice, the webhook route
    (/webhook/<name>) and `Plan.forge`. Header names passed in are case-insensitive."""

    @property
    def name(self) -> str: ...
    @property
    def title(self) -> str:
        """The forge as people write it ("GitHub"), for messages."""
        ...
    @property
    def token_variables(self) -> tuple[str, ...]:
        """Environment variables holding the API token, first set wins; messages name the
        first."""
        ...
    @property
    def url_variables(self) -> tuple[str, ...]:
        """Environment variables holding the API URL (none set: the public instance)."""
        ...
    @property
    def dispatch_event(self) -> str:
        """The event under which work `opbot serve --dispatch` handed to CI arrives: CI runs
        it, a server never does."""
        ...

    # -- inbound: webhooks -----------------------------------------------------------------
    @property
    def rejection(self) -> str:
        """Why an unauthenticated delivery was refused ("missing or wrong signature")."""
        ...
    @property
    def signs_body(self) -> bool:
        """Whether proof of the secret covers the body (GitHub's HMAC signature), or sits
        in a header alone (GitLab's token): then a delivery is checked before its body is
        read."""
        ...
    def authenticate(self, headers: Mapping[str, str], body: bytes,
                     secrets: Sequence[str]) -> bool:
        """Whether the delivery proves it knows one of `secrets`, in constant time."""
        ...
    def event_name(self, headers: Mapping[str, str]) -> str | None: ...
    def delivery_id(self, headers: Mapping[str, str]) -> str | None:
        """The id a redelivery repeats (None: the forge sends none)."""
        ...

    # -- inbound: payloads -----------------------------------------------------------------
    def planner(self, event: str) -> Planner | None:
        """The parser for `event`; None for events opbot does not act on."""
        ...
    def repo_of(self, payload: Any) -> str | None:
        """The repository a payload names, for plans that ignore it."""
        ...

    # -- the CI environment ----------------------------------------------------------------
    def detect(self, environ: Mapping[str, str]) -> bool:
        """Whether this process runs in the forge's CI."""
        ...
    def ci_input(self, environ: Mapping[str, str]) -> CiInput: ...

    # -- outbound --------------------------------------------------------------------------
    def connect(self, url: str | None, token: str, repo: str) -> Forge:
        """A Forge for `repo` (url None: the public instance), without retries."""
        ...
    def identity(self, url: str | None, token: str) -> str:
        """The login `token` acts as (`Forge.whoami()` without a repository): how the bot
        recognises its own comments and the events its own actions cause. Raises a
        ForgeError when the forge will not say."""
        ...
    def trusted_dispatch(self, payload: Any, environ: Mapping[str, str]) -> Any:
        """The payload of a dispatched plan (event `dispatch_event`) as the bot itself
        handed it over, before a CI job carries it out. GitHub: `payload` itself (the runner
        writes the event file, and the planner checks that the bot sent it). GitLab: read
        back from the API for the job the CI job token names, since whoever may start a
        pipeline may set any variable — the plan file's and the predefined ones
        (CI_PIPELINE_ID, GITLAB_USER_LOGIN) alike. Raises a ForgeError or BadInputError
        when the payload cannot be shown to be the bot's."""
        ...
