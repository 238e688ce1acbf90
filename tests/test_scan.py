"""`opbot scan`: every operator of a checkout re-verified with today's toolchain; with
--forge, the nightly job on the fake forge: regenerate what broke, one PR each, and a
dashboard edited in place."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.fakeforge import FakeForge
from tests.support import REPO, run_opbot

EXAMPLES = REPO / "examples" / "ops"
REPOSITORY = "octo/kernels"


@pytest.fixture(scope="module")
def gelu_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gelu") / "gelu"
    run = run_opbot("generate", str(EXAMPLES / "gelu" / "op.yaml"), "--llm", "offline",
                    "--out", str(out), "--json")
    assert run.code == 0, run.stdout + run.stderr
    return out


def _copy(package: Path, ops: Path, name: str, *, broken: bool = False) -> None:
    """The same operator under another name; `broken`: its kernel off by a factor of two,
    what a toolchain upgrade that changed a numerics default would look like to the scan."""
    target = ops / name
    shutil.copytree(package, target)
    spec = target / "op.yaml"
    spec.write_text(spec.read_text().replace("name: gelu", f"name: {name}", 1))
    kernel = target / "triton" / f"{name}.py"
    (target / "triton" / "gelu.py").rename(kernel)
    if broken:
        source = kernel.read_text()
        assert "0.5 * " in source
        kernel.write_text(source.replace("0.5 * ", "0.25 * "))


@pytest.fixture(scope="module")
def checkout(gelu_package: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("checkout")
    ops = root / "ops"
    shutil.copytree(gelu_package, ops / "gelu")
    _copy(gelu_package, ops, "gelu_half", broken=True)
    (ops / "typo").mkdir()
    (ops / "typo" / "op.yaml").write_text("name: [typo\n")
    shutil.copytree(gelu_package, ops / "nokernel")
    shutil.rmtree(ops / "nokernel" / "triton")
    (ops / "nokernel" / "op.yaml").write_text(
        (ops / "nokernel" / "op.yaml").read_text().replace("name: gelu", "name: nokernel", 1))
    return root


def test_scan_reports_each_operator(checkout: Path) -> None:
    run = run_opbot("scan", str(checkout), "--json")
    assert run.code == 1, run.stderr
    result = run.json()
    rows = {row["op"]: row for row in result["ops"]}
    assert {key: (row["backend"], row["status"], row["action"]) for key, row in rows.items()} == {
        "gelu": ("triton", "passed", "none"), "gelu_half": ("triton", "failed", "regenerate"),
        "nokernel": ("triton", "missing", "skip"), "typo": ("-", "invalid", "skip")}
    assert rows["gelu_half"]["detail"] == "values"
    assert rows["gelu_half"]["breakage"] == "mismatch"
    assert rows["gelu_half"]["reason"].startswith("mismatch: ")
    assert rows["typo"]["reason"].startswith("ops/typo/op.yaml:")  # relative to the checkout
    assert "invalid YAML" in rows["typo"]["reason"]
    assert rows["nokernel"]["reason"] == "no triton/nokernel.py"
    assert (result["passed"], result["failed"]) == (1, 3)
    toolchain = result["toolchain"]
    assert toolchain["cann"] is None  # no CANN on this machine: recorded as absent
    assert toolchain["torch"]
    assert toolchain["triton"]


def test_three_operators_one_broken_by_an_edit(gelu_package: Path, tmp_path: Path) -> None:
    ops = tmp_path / "ops"
    shutil.copytree(gelu_package, ops / "gelu")
    _copy(gelu_package, ops, "gelu_copy")
    _copy(gelu_package, ops, "gelu_edited", broken=True)
    run = run_opbot("scan", str(tmp_path), "--json")
    assert run.code == 1, run.stderr
    result = run.json()
    assert [(row["op"], row["backend"], row["status"], row["action"])
            for row in result["ops"]] == [
        ("gelu", "triton", "passed", "none"), ("gelu_copy", "triton", "passed", "none"),
        ("gelu_edited", "triton", "failed", "regenerate")]
    assert set(result["ops"][2]) >= {"op", "backend", "status", "action", "reason"}
    assert result["toolchain"]["cann"] is None


def test_scan_of_a_healthy_checkout_passes(gelu_package: Path, tmp_path: Path) -> None:
    shutil.copytree(gelu_package, tmp_path / "ops" / "gelu")
    run = run_opbot("scan", "--json", cwd=tmp_path)  # the current directory by default
    assert run.code == 0, run.stderr
    assert [row["status"] for row in run.json()["ops"]] == ["passed"]


@pytest.mark.parametrize(("args", "message"), [
    (["scan", "{empty}"], "no operators"),
    (["scan", "{empty}/missing"], "no such folder"),
    (["scan", "--forge", "github"], "--forge and --repo go together"),
])
def test_scan_bad_input(tmp_path: Path, args: list[str], message: str) -> None:
    run = run_opbot(*[arg.format(empty=tmp_path) for arg in args], "--json")
    assert run.code == 2
    assert message in run.stderr
    assert "Traceback" not in run.stderr


def _files(root: Path) -> dict[str, str]:
    return {str(path.relative_to(root)): path.read_text() for path in sorted(root.rglob("*"))
            if path.is_file() and "__pycache__" not in path.parts}


def test_nightly_job_on_the_forge(fake: FakeForge, checkout: Path) -> None:
    files = {path: text for path, text in _files(checkout).items()
             if not path.startswith(("ops/typo", "ops/nokernel"))}
    fake.add_repo(REPOSITORY, files={"README.md": "# kernels\n", **files})
    dashboard = fake.open_issue(REPOSITORY, "opbot dashboard", author="alice")
    env = {"OPBOT_GITHUB_URL": fake.github_url, "OPBOT_GITHUB_TOKEN": fake.token,
           "OPBOT_BOT_LOGIN": fake.bot, "OPBOT_GIT_EMAIL": fake.state.users[fake.bot].email,
           "OPBOT_DASHBOARD_ISSUE": str(dashboard.number)}
    run = run_opbot("scan", "--forge", "github", "--repo", REPOSITORY, "--json", env=env)
    assert run.code == 0, run.stdout + run.stderr
    result = run.json()
    assert result["action"] == "scan"
    assert "2 operator(s), 2 verdict(s): 1 passed, 1 not (gelu_half/triton); 1 pull " \
        "request(s) opened" in result["summary"]
    assert {row["op"]: row["action"] for row in result["ops"]} == {
        "gelu": "none", "gelu_half": "regenerate"}
    log = fake.effect_log()
    opened = [entry for entry in log if ":pr-open:" in entry]
    assert len(opened) == 1
    assert "opbot/gelu_half->main" in opened[0]
    status = [entry for entry in log if entry.startswith(
        f"github:{REPOSITORY}#{dashboard.number}:comment:")]
    assert len(status) == 1
    assert "| gelu_half | triton | failed (" in status[0]
    assert re.search(r"\| \[#2\]\(http://[^)]+/pull/2\) \|", status[0])
    assert "| gelu | triton | passed (" in status[0]

    # The next night, same toolchain: the repository's kernel is still the broken one (the
    # PR is not merged), and the PR already proposes the fix: nothing is pushed, opened or
    # edited.
    again = run_opbot("scan", "--forge", "github", "--repo", REPOSITORY, "--json", env=env)
    assert again.code == 0, again.stdout + again.stderr
    assert {row["op"]: row["action"] for row in again.json()["ops"]} == {
        "gelu": "none", "gelu_half": "skip"}
    assert "already proposes the fix" in again.json()["ops"][1]["reason"]
    assert sorted(fake.effect_log()) == sorted(log)  # (pushes are listed last)


def test_nightly_job_on_gitlab_creates_its_dashboard_once(fake: FakeForge,
                                                          checkout: Path) -> None:
    """No dashboard issue named: the bot opens one, once, and finds it again the next
    night (a person's issue of the same title is not its own)."""
    files = {path: text for path, text in _files(checkout).items()
             if not path.startswith(("ops/typo", "ops/nokernel"))}
    fake.add_repo(REPOSITORY, files={"README.md": "# kernels\n", **files})
    fake.open_issue(REPOSITORY, "opbot dashboard", author="alice")  # not the bot's
    env = {"OPBOT_GITLAB_URL": fake.gitlab_url, "OPBOT_GITLAB_TOKEN": fake.token,
           "OPBOT_BOT_LOGIN": fake.bot, "OPBOT_GIT_EMAIL": fake.state.users[fake.bot].email}
    run = run_opbot("scan", "--forge", "gitlab", "--repo", REPOSITORY, "--json", env=env)
    assert run.code == 0, run.stdout + run.stderr
    assert run.json()["toolchain"]["cann"] is None
    log = fake.effect_log()
    created = [entry for entry in log if ":issue-open:" in entry]
    assert len(created) == 1
    assert len([entry for entry in log if ":pr-open:" in entry]) == 1
    boards = [entry for entry in log if ":comment:<!-- opbot:status -->" in entry]
    assert len(boards) == 1
    assert "| gelu_half | triton | failed (" in boards[0]

    again = run_opbot("scan", "--forge", "gitlab", "--repo", REPOSITORY, "--json", env=env)
    assert again.code == 0, again.stdout + again.stderr
    assert sorted(fake.effect_log()) == sorted(log)


def test_an_operator_is_its_folder_and_stays_inside_the_checkout(gelu_package: Path,
                                                                  tmp_path: Path) -> None:
    """A folder whose op.yaml names another operator, and links out of the checkout (an
    op.yaml whose values would be quoted on the public dashboard, a kernel that would run),
    are invalid, named by folder; nothing outside is quoted."""
    root, outside = tmp_path / "checkout", tmp_path / "outside"
    ops = root / "ops"
    shutil.copytree(gelu_package, ops / "gelu")
    shutil.copytree(gelu_package, ops / "gelu_old")  # still says `name: gelu`
    outside.mkdir()
    (outside / "secret.yaml").write_text("name: gho_SECRET_IN_NAME value!\n")
    (ops / "leak").mkdir()
    (ops / "leak" / "op.yaml").symlink_to(outside / "secret.yaml")
    _copy(gelu_package, ops, "linked")
    (outside / "kernel.py").write_text((ops / "linked" / "triton" / "linked.py").read_text())
    (ops / "linked" / "triton" / "linked.py").unlink()
    (ops / "linked" / "triton" / "linked.py").symlink_to(outside / "kernel.py")
    run = run_opbot("scan", str(root), "--json")
    assert run.code == 1, run.stderr
    rows = {row["op"]: row for row in run.json()["ops"]}
    assert {op: (row["backend"], row["status"]) for op, row in rows.items()} == {
        "gelu": ("triton", "passed"), "gelu_old": ("-", "invalid"),
        "leak": ("-", "invalid"), "linked": ("triton", "invalid")}
    assert "names the operator 'gelu'" in rows["gelu_old"]["reason"]
    assert rows["leak"]["reason"] == "ops/leak/op.yaml is a link out of the checkout: not read"
    assert "link out of the checkout" in rows["linked"]["reason"]
    assert "SECRET" not in run.stdout
    assert str(outside) not in run.stdout


def test_a_dashboard_issue_that_is_no_number_is_refused() -> None:
    run = run_opbot("scan", "--forge", "github", "--repo", "octo/kernels", "--json",
                    env={"OPBOT_GITHUB_TOKEN": "t0k", "OPBOT_DASHBOARD_ISSUE": "abc"})
    assert run.code == 2
    assert "OPBOT_DASHBOARD_ISSUE='abc' is not an issue number" in run.stderr
    assert "Traceback" not in run.stderr
