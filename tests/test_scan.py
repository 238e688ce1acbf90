"""`opbot scan`: every operator of a checkout re-verified with today's toolchain; with
--forge, the nightly job on the fake forge: regenerate what broke, one PR each, and a
dashboard edited in place."""

from __future__ import annotations

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


def _broken_copy(package: Path, ops: Path, name: str) -> None:
    """The same operator under another name, its kernel off by a factor of two: what a
    toolchain upgrade that changed a numerics default would look like to the scan."""
    target = ops / name
    shutil.copytree(package, target)
    spec = target / "op.yaml"
    spec.write_text(spec.read_text().replace("name: gelu", f"name: {name}", 1))
    kernel = target / "triton" / f"{name}.py"
    (target / "triton" / "gelu.py").rename(kernel)
    source = kernel.read_text()
    assert "0.5 * " in source
    kernel.write_text(source.replace("0.5 * ", "0.25 * "))


@pytest.fixture(scope="module")
def checkout(gelu_package: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("checkout")
    ops = root / "ops"
    shutil.copytree(gelu_package, ops / "gelu")
    _broken_copy(gelu_package, ops, "gelu_half")
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
    verdicts = {row["op"]: (row["status"], row["detail"]) for row in result["ops"]}
    assert verdicts["gelu"][0] == "passed"
    assert verdicts["gelu_half"] == ("failed", "values")
    assert verdicts["typo"][0] == "invalid"
    assert verdicts["typo"][1].startswith("ops/typo/op.yaml:")  # relative to the checkout
    assert "invalid YAML" in verdicts["typo"][1]
    assert verdicts["nokernel"] == ("missing", "no triton/nokernel.py")
    assert (result["passed"], result["failed"]) == (1, 3)
    assert "torch" in result["toolchain"]


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
    assert "2 operator(s): 1 passed, 1 not (gelu_half); 1 regenerated" in result["summary"]
    log = fake.effect_log()
    opened = [entry for entry in log if ":pr-open:" in entry]
    assert len(opened) == 1
    assert "opbot/gelu_half->main" in opened[0]
    status = [entry for entry in log if entry.startswith(
        f"github:{REPOSITORY}#{dashboard.number}:comment:")]
    assert len(status) == 1
    assert "| gelu_half | failed | values | regenerated in #" in status[0]
    assert "| gelu | passed |" in status[0]

    # The next night: the repository's kernel is still the broken one (the PR is not merged),
    # the PR is updated rather than duplicated, the dashboard edited in place.
    again = run_opbot("scan", "--forge", "github", "--repo", REPOSITORY, "--json", env=env)
    assert again.code == 0, again.stdout + again.stderr
    later = fake.effect_log()[len(log):]
    assert not [entry for entry in later if ":pr-open:" in entry]
    assert [entry for entry in later if ":comment-edit:" in entry]
    assert not [entry for entry in later if f"#{dashboard.number}:comment:" in entry]
