"""GET /repos/{owner}/{repo}/compare/{basehead}: commits read from the bare repo."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .model import Repo
from .wire import ApiError, Call, Reply, link_header, paginate

if TYPE_CHECKING:
    from .github_api import GitHubApi


def _side(repo: Repo, spec: str) -> str:
    """`branch`, `sha` or `owner:branch` to a sha; 404 when git knows no such ref."""
    ref = spec.split(":", 1)[1] if ":" in spec else spec
    sha = repo.git.resolve(ref)
    if sha is None:
        raise ApiError(404, "Not Found")
    return sha


def _status(ahead: int, behind: int) -> str:
    if ahead and behind:
        return "diverged"
    if ahead:
        return "ahead"
    return "behind" if behind else "identical"


def comparison(api: GitHubApi, call: Call, repo: Repo, basehead: str) -> Reply:
    if "..." not in basehead:
        raise ApiError(404, "Not Found")
    base_spec, head_spec = basehead.split("...", 1)
    base, head = _side(repo, base_spec), _side(repo, head_spec)
    merge_base = repo.git.merge_base(base, head)
    if merge_base is None:
        raise ApiError(404, "No common ancestor between the two refs")
    commits = repo.git.between(merge_base, head)
    behind = repo.git.count(f"{head}..{base}")
    page = paginate(call, commits, default=250, maximum=1000)
    render = api.render(call)
    value = api.spec.example("commit-comparison")
    web = f"/{repo.full_name}/compare/{basehead}"
    value.update(
        url=render.api(f"/repos/{repo.full_name}/compare/{basehead}"), html_url=render.web(web),
        permalink_url=render.web(f"/{repo.full_name}/compare/{base}...{head}"),
        diff_url=render.web(f"{web}.diff"), patch_url=render.web(f"{web}.patch"),
        base_commit=render.commit(repo, repo.git.commit_info(base)),
        merge_base_commit=render.commit(repo, repo.git.commit_info(merge_base)),
        status=_status(len(commits), behind), ahead_by=len(commits), behind_by=behind,
        total_commits=len(commits), commits=[render.commit(repo, c) for c in page.items],
        files=[],
    )
    return Reply.json(200, render.point_home(value), link_header(call, page))
