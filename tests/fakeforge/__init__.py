"""A fake GitHub + GitLab over real loopback HTTP, backed by real bare git repositories.

    server = FakeServer(require_spec())       # one per test module
    fake = FakeForge(server, tmp_path)        # a fresh state per test
    fake.add_repo("octo/kernels")
    Github(base_url=fake.github_url, ...)     # unpatched PyGithub
    gitlab.Gitlab(url=fake.gitlab_url, ...)   # unpatched python-gitlab
    ...
    fake.effect_log()                         # ["github:octo/kernels#1:comment:hi", ...]
    fake.subscribe("github", url, secret)     # webhooks for every later act (hooks.py)
    fake.hooks.settle()                       # until the event stream is quiet, and finite
    fake.assert_honest()                      # no OpenAPI violations, no fake crashes

See README.md beside this file for the endpoints each front end serves.
"""

from .forge import BOT, FakeForge
from .gitstore import git
from .model import Effect
from .server import FakeServer
from .spec import SPEC_PATH, load_spec, require_spec

__all__ = ["BOT", "SPEC_PATH", "Effect", "FakeForge", "FakeServer", "git", "load_spec",
           "require_spec"]
