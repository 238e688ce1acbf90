"""The fake forge's own honesty: validation, auth, pagination, URLs, real git."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from werkzeug.datastructures import Headers

from tests.fakeforge import FakeForge, git, require_spec
from tests.fakeforge.github_render import GitHubRender
from tests.fakeforge.scenario import HEAD, REPO, World
from tests.fakeforge.spec import SpecRequest, SpecResponse, _allow_null_in_nullable_enums

ISSUE_PATH = "/repos/{owner}/{repo}/issues/{issue_number}"


def gh(fake: FakeForge, method: str, path: str, token: str | None = "", **kw: Any,
       ) -> requests.Response:
    headers = {"Accept": "application/vnd.github+json"}
    if token is not None:
        headers["Authorization"] = f"token {token or fake.token}"
    return requests.request(method, f"{fake.github_url}{path}", headers=headers, timeout=10,
                            allow_redirects=False, **kw)


def gl(fake: FakeForge, path: str, token: str | None = "", **kw: Any) -> requests.Response:
    headers = {} if token is None else {"PRIVATE-TOKEN": token or fake.token}
    return requests.get(f"{fake.gitlab_url}/api/v4{path}", headers=headers, timeout=10, **kw)


# -- OpenAPI validation --------------------------------------------------------------------
def test_malformed_request_is_caught(fake: FakeForge, world: World) -> None:
    reply = gh(fake, "POST", f"/repos/{REPO}/issues/1/comments", json={"text": "no body"})
    assert reply.status_code == 422
    (error,) = fake.validation_errors
    assert error.startswith(f"POST /repos/{REPO}/issues/1/comments request")
    assert "body" in error
    assert fake.effect_log() == []  # the handler never ran
    fake.state.validation_errors.clear()  # caught on purpose; teardown checks the rest


def test_bad_query_parameter_is_caught(fake: FakeForge, world: World) -> None:
    reply = gh(fake, "GET", f"/repos/{REPO}/issues/1/comments", params={"per_page": "lots"})
    assert reply.status_code == 422
    assert "per_page" in fake.validation_errors[0]
    fake.state.validation_errors.clear()


def test_malformed_reply_is_caught(fake: FakeForge, world: World,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    good = GitHubRender.issue

    def broken(self: GitHubRender, *args: Any) -> dict[str, Any]:
        value = good(self, *args)
        del value["title"]
        value["number"] = "one"
        return value

    monkeypatch.setattr(GitHubRender, "issue", broken)
    reply = gh(fake, "GET", f"/repos/{REPO}/issues/1")
    assert reply.status_code == 500
    (error,) = fake.validation_errors
    assert "response 200" in error
    assert "'title' is a required property" in error
    fake.state.validation_errors.clear()


def test_validator_on_hand_built_exchanges() -> None:
    spec = require_spec()
    request = SpecRequest("GET", "/repos/o/r/issues/1", ISSUE_PATH,
                          {"owner": "o", "repo": "r", "issue_number": "1"}, [], {}, None,
                          "application/json")
    assert spec.request_errors(request) == []
    issue = spec.example("issue")
    issue["state_reason"] = None  # nullable, and an enum: valid once the quirk is fixed

    def reply(value: Any, status: int = 200) -> SpecResponse:
        return SpecResponse(status, json.dumps(value).encode(),
                            Headers({"Content-Type": "application/json"}), "application/json")

    assert spec.response_errors(request, reply(issue)) == []
    assert spec.response_errors(request, reply({**issue, "state": 3}))
    assert spec.response_errors(request, reply(issue, status=201))  # undeclared status
    bad_path = SpecRequest("GET", "/repos/o/r/issues/x", ISSUE_PATH,
                           {"owner": "o", "repo": "r", "issue_number": "x"}, [], {}, None,
                           "application/json")
    assert spec.request_errors(bad_path)


def test_nullable_enum_quirk() -> None:
    schema = {"properties": {"a": {"type": "string", "nullable": True, "enum": ["x"]},
                             "b": {"type": "string", "enum": ["y"]}}}
    _allow_null_in_nullable_enums(schema)
    assert schema["properties"]["a"]["enum"] == ["x", None]
    assert schema["properties"]["b"]["enum"] == ["y"]


@pytest.mark.parametrize(("name", "template", "params"), [
    ("full-repository", "/repos/{owner}/{repo}", {}),
    ("pull-request", "/repos/{owner}/{repo}/pulls/{pull_number}", {"pull_number": "1"}),
    ("job", "/repos/{owner}/{repo}/actions/jobs/{job_id}", {"job_id": "1"}),
])
def test_examples_that_need_a_field(name: str, template: str, params: dict[str, str]) -> None:
    spec = require_spec()
    values = {"owner": "o", "repo": "r", **params}
    path = template.format(**values)
    request = SpecRequest("GET", path, template, values, [], {}, None, "application/json")

    def errors(value: Any) -> list[str]:
        body = json.dumps(value).encode()
        return spec.response_errors(request, SpecResponse(
            200, body, Headers({"Content-Type": "application/json"}), "application/json"))

    assert errors(spec.raw["components"]["examples"][name]["value"])  # as published
    assert errors(spec.example(name)) == []  # as the fake uses it


def test_every_github_route_is_in_the_description() -> None:
    from tests.fakeforge.github_api import router

    spec = require_spec()
    missing = [f"{r.method} {r.template}" for r in router.routes
               if r.method.lower() not in spec.raw["paths"].get(r.template, {})]
    assert missing == []


def test_missing_spec_skips_naming_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "github-rest-openapi.json.gz"
    with pytest.raises(pytest.skip.Exception, match=str(missing)):
        require_spec(missing)


def test_unknown_route_is_an_error(fake: FakeForge, world: World) -> None:
    assert gh(fake, "GET", f"/repos/{REPO}/no-such-thing").status_code == 404
    assert "no such route" in fake.validation_errors[0]
    fake.state.validation_errors.clear()


# -- authentication ------------------------------------------------------------------------
@pytest.mark.parametrize("token", [None, "wrong-token"])
def test_github_needs_the_token(fake: FakeForge, world: World, token: str | None) -> None:
    reply = gh(fake, "GET", f"/repos/{REPO}/issues/1", token=token)
    assert reply.status_code == 401
    assert reply.json()["message"] == "Bad credentials"


@pytest.mark.parametrize("token", [None, "wrong-token"])
def test_gitlab_needs_the_token(fake: FakeForge, world: World, token: str | None) -> None:
    assert gl(fake, "/projects/octo%2Fkernels", token=token).status_code == 401
    assert gl(fake, "/projects/octo%2Fkernels").status_code == 200


def test_token_is_recorded_nowhere(fake: FakeForge, world: World) -> None:
    gh(fake, "POST", f"/repos/{REPO}/issues/1/comments", json={"body": "hi"})
    gh(fake, "GET", f"/repos/{REPO}/issues/1", token="wrong-token")
    recorded = json.dumps([fake.effect_log(), fake.validation_errors, fake.state.requests])
    assert fake.token not in recorded
    assert "wrong-token" not in recorded


def test_log_downloads_need_the_signature(fake: FakeForge, world: World) -> None:
    run = fake.add_failed_run(REPO, world.head_sha, jobs={"build": "boom"})
    reply = gh(fake, "GET", f"/repos/{REPO}/actions/jobs/{run.jobs[0].id}/logs")
    assert reply.status_code == 302
    location = reply.headers["Location"]
    assert location.startswith(fake.github_url)
    assert requests.get(location, timeout=10).text == "boom"  # pre-signed: no token
    assert requests.get(location.split("?")[0], timeout=10).status_code == 403


# -- pagination and URLs -------------------------------------------------------------------
def test_github_link_headers(fake: FakeForge, world: World) -> None:
    for n in range(3):
        fake.add_comment(REPO, 1, f"c{n}", author="bob")  # 5 comments in all
    first = gh(fake, "GET", f"/repos/{REPO}/issues/1/comments", params={"per_page": 2})
    assert len(first.json()) == 2
    assert set(first.links) == {"next", "last"}
    assert first.links["next"]["url"].startswith(fake.github_url)
    last = requests.get(first.links["last"]["url"], timeout=10,
                        headers={"Authorization": f"token {fake.token}"})
    assert [c["body"] for c in last.json()] == ["c2"]
    assert set(last.links) == {"first", "prev"}


def test_gitlab_pagination_headers(fake: FakeForge, world: World) -> None:
    for n in range(3):
        fake.add_comment(REPO, 1, f"c{n}", author="bob")
    reply = gl(fake, "/projects/octo%2Fkernels/issues/1/notes",
               params={"per_page": 2, "page": 2, "sort": "asc"})
    assert [n["body"] for n in reply.json()] == ["c0", "c1"]
    assert (reply.headers["X-Page"], reply.headers["X-Total"], reply.headers["X-Total-Pages"],
            reply.headers["X-Next-Page"], reply.headers["X-Prev-Page"]) == ("2", "5", "3", "3",
                                                                            "1")
    assert reply.links["next"]["url"].startswith(f"{fake.gitlab_url}/api/v4/")


def _urls(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for v in value.values():
            yield from _urls(v)
    elif isinstance(value, list):
        for v in value:
            yield from _urls(v)
    elif isinstance(value, str) and value.startswith(("http://", "https://")):
        yield value


@pytest.mark.parametrize("path", [
    f"/repos/{REPO}", f"/repos/{REPO}/issues/1", f"/repos/{REPO}/pulls/2",
    f"/repos/{REPO}/pulls/2/comments", f"/repos/{REPO}/branches/{HEAD}",
    f"/repos/{REPO}/compare/main...{HEAD}", f"/repos/{REPO}/contents/README.md?ref=main"])
def test_github_urls_point_back(fake: FakeForge, world: World, path: str) -> None:
    reply = gh(fake, "GET", path)
    assert reply.status_code == 200
    urls = list(_urls(reply.json()))
    assert urls
    assert [u for u in urls if not u.startswith(fake.github_url)] == []


@pytest.mark.parametrize("path", [
    "/projects/octo%2Fkernels", "/projects/octo%2Fkernels/issues/1",
    "/projects/octo%2Fkernels/merge_requests/2",
    "/projects/octo%2Fkernels/merge_requests/2/discussions"])
def test_gitlab_urls_point_back(fake: FakeForge, world: World, path: str) -> None:
    reply = gl(fake, path)
    assert reply.status_code == 200
    urls = list(_urls(reply.json()))
    assert urls
    assert [u for u in urls if not u.startswith(fake.gitlab_url)] == []


def test_web_urls_are_served(fake: FakeForge, world: World) -> None:
    html_url = gh(fake, "GET", f"/repos/{REPO}/issues/1").json()["html_url"]
    assert requests.get(html_url, timeout=10).status_code == 200


# -- real git behind the API ---------------------------------------------------------------
def test_push_shows_in_branches_and_compare(fake: FakeForge, world: World,
                                            tmp_path: Path) -> None:
    clone_url = gh(fake, "GET", f"/repos/{REPO}").json()["clone_url"]
    assert clone_url.startswith("file://")
    assert gl(fake, "/projects/octo%2Fkernels").json()["http_url_to_repo"] == clone_url
    work = tmp_path / "clone"
    git("clone", "--quiet", clone_url, str(work))
    git("checkout", "--quiet", "-b", "topic", cwd=work)
    (work / "a.txt").write_text("a\n")
    git("add", "a.txt", cwd=work)
    who = {"GIT_AUTHOR_NAME": "Alice", "GIT_AUTHOR_EMAIL": "alice@users.example.com",
           "GIT_COMMITTER_NAME": "Alice", "GIT_COMMITTER_EMAIL": "alice@users.example.com"}
    git("commit", "--quiet", "-m", "Add a", cwd=work, env=who)
    git("push", "--quiet", "origin", "topic", cwd=work)
    sha = git("rev-parse", "HEAD", cwd=work).strip()

    assert gh(fake, "GET", f"/repos/{REPO}/branches/topic").json()["commit"]["sha"] == sha
    compared = gh(fake, "GET", f"/repos/{REPO}/compare/main...topic").json()
    assert (compared["status"], compared["ahead_by"], compared["behind_by"]) == ("ahead", 1, 0)
    (commit,) = compared["commits"]
    assert (commit["sha"], commit["author"]["login"]) == (sha, "alice")
    assert gl(fake, "/projects/octo%2Fkernels/repository/branches/topic").json()["commit"][
        "id"] == sha
    assert [c["id"] for c in gl(fake, "/projects/octo%2Fkernels/repository/compare",
                                params={"from": "main", "to": "topic"}).json()["commits"]] \
        == [sha]
    assert fake.effect_log() == [f"git:octo/kernels:push:refs/heads/topic:{sha}"]


def test_contents_read_from_git(fake: FakeForge, world: World) -> None:
    import base64

    found = gh(fake, "GET", f"/repos/{REPO}/contents/README.md", params={"ref": "main"}).json()
    assert base64.b64decode(found["content"]) == b"# fake\n"
    assert gh(fake, "GET", f"/repos/{REPO}/contents/nope.md").status_code == 404


# -- canned failures -----------------------------------------------------------------------
def test_rate_limit_and_errors_are_served_once_each(fake: FakeForge, world: World) -> None:
    fake.rate_limit_next("github", 2, reset_in=30)
    fake.fail_next("github", status=503)
    for _ in range(2):
        limited = gh(fake, "GET", f"/repos/{REPO}/issues/1")
        assert (limited.status_code, limited.headers["X-RateLimit-Remaining"]) == (403, "0")
    assert gh(fake, "GET", f"/repos/{REPO}/issues/1").status_code == 503
    assert gh(fake, "GET", f"/repos/{REPO}/issues/1").status_code == 200
    fake.rate_limit_next("gitlab", retry_after=5)
    throttled = gl(fake, "/projects/octo%2Fkernels")
    assert (throttled.status_code, throttled.headers["Retry-After"]) == (429, "5")
