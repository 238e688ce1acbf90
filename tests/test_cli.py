"""The command-line contract: exit codes, JSON fields, and clear errors for bad input."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import (
    CANDIDATES,
    EXAMPLES,
    REFS,
    REPO,
    CliRun,
    reference_source,
    run_opbot,
)

RELU_REF = CANDIDATES / "refs" / "relu.py"
RELU_GOOD = CANDIDATES / "relu__good_tutorial.py"


def _assert_clean_error(run: CliRun, *fragments: str) -> None:
    assert run.code == 2
    stderr = run.stderr
    assert "Traceback" not in stderr
    assert "error:" in stderr
    for fragment in fragments:
        assert fragment in stderr, stderr


def test_version() -> None:
    run = run_opbot("--version")
    assert run.code == 0
    assert "opbot" in run.stdout


def test_a_command_loads_the_schema_validator_and_rich_only_when_it_needs_them() -> None:
    """Every opbot process starts with bot.cli (a CI job runs hundreds): jsonschema and rich
    (~0.15 s together) load with the first spec read or the first human-readable line."""
    probe = ("import sys, bot.cli; print(sorted({n.split('.')[0] for n in sys.modules} "
             "& {'jsonschema', 'rich'}))")
    started = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                             text=True, timeout=120, check=False)
    assert started.returncode == 0, started.stderr[-2000:]
    assert started.stdout.strip() == "[]"
    bad = run_opbot("verify", str(REPO / "no-such-spec.yaml"), str(RELU_GOOD))
    _assert_clean_error(bad, "no-such-spec.yaml")  # the error still shows, through rich


def test_verify_missing_reference(tmp_path: Path) -> None:
    _assert_clean_error(run_opbot("verify", str(tmp_path / "nope.py"), str(RELU_GOOD), "--json"),
                        "nope.py")


def test_verify_unparsable_reference(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("import torch\nclass Model(:\n    pass\n", encoding="utf-8")
    _assert_clean_error(run_opbot("verify", str(broken), str(RELU_GOOD), "--json"),
                        "broken.py", "2")


def test_verify_reference_that_raises_on_import(tmp_path: Path) -> None:
    reference = tmp_path / "raises.py"
    reference.write_text(reference_source("x", "torch.randn(4)",
                                          prelude="raise RuntimeError('boom at import')"),
                         encoding="utf-8")
    _assert_clean_error(run_opbot("verify", str(reference), str(RELU_GOOD), "--json"),
                        "boom at import")


def test_verify_missing_candidate(tmp_path: Path) -> None:
    _assert_clean_error(run_opbot("verify", str(RELU_REF), str(tmp_path / "missing.py")),
                        "missing.py")


def test_verify_ascendc_without_cann() -> None:
    _assert_clean_error(run_opbot("verify", str(RELU_REF), str(RELU_GOOD), "--backend",
                                  "ascendc"), "CANN")


def test_verify_malformed_op_yaml(tmp_path: Path) -> None:
    spec = tmp_path / "op.yaml"
    spec.write_text("name: relu\nreference: reference.py\ninputs:\n  - name: x\n"
                    "    dtypes: [float33]\n    shapes: [[4]]\n", encoding="utf-8")
    (tmp_path / "reference.py").write_text(RELU_REF.read_text(encoding="utf-8"),
                                           encoding="utf-8")
    _assert_clean_error(run_opbot("verify", str(spec), str(RELU_GOOD)), "op.yaml:5",
                        "inputs[0].dtypes")


def test_relative_paths_work_from_any_folder(tmp_path: Path) -> None:
    out = tmp_path / "softmax"
    run = run_opbot("generate", "examples/ops/softmax/op.yaml", "--llm", "offline", "--out",
                    str(out), "--json", cwd=REPO)
    assert run.code == 0, run.stderr
    relative = run_opbot("verify", "tests/data/candidates/refs/relu.py",
                         "tests/data/candidates/relu__good_tutorial.py", "--json", cwd=REPO)
    assert relative.code == 0, relative.stderr


def test_verify_operator_package_folder(tmp_path: Path) -> None:
    package = tmp_path / "relu"
    (package / "triton").mkdir(parents=True)
    shutil.copy(RELU_GOOD, package / "triton" / "relu.py")
    run = run_opbot("verify", str(RELU_REF), str(package), "--json")
    assert run.code == 0, run.stdout + run.stderr
    assert run.json()["status"] == "passed"


def test_verify_op_yaml_with_inline_reference(tmp_path: Path) -> None:
    source = RELU_REF.read_text(encoding="utf-8")
    indented = "\n".join("    " + line for line in source.splitlines())
    spec = tmp_path / "op.yaml"
    spec.write_text("name: relu\nreference:\n  source: |\n" + indented + "\n"
                    "inputs:\n  - name: x\n    dtypes: [float32]\n    shapes: [[37, 129], [3]]\n",
                    encoding="utf-8")
    run = run_opbot("verify", str(spec), str(RELU_GOOD), "--json")
    result = run.json()
    assert run.code == 0, result
    names = [case["name"] for case in result["cases"]]
    assert "shape0-float32" in names
    assert "shape1-float32" in names
    # A fresh-valued repeat of the smallest case catches cached results.
    assert any(name.endswith("-fresh") for name in names)


def test_generate_missing_reference(tmp_path: Path) -> None:
    _assert_clean_error(run_opbot("generate", str(tmp_path / "absent.yaml"), "--json"),
                        "absent.yaml")


def test_generate_reference_whose_forward_raises(tmp_path: Path) -> None:
    reference = tmp_path / "bad_forward.py"
    reference.write_text(reference_source("broken(x)", "torch.randn(4)",
                                          prelude="def broken(x):\n"
                                          "    raise ValueError('forward is broken')\n"),
                         encoding="utf-8")
    _assert_clean_error(run_opbot("generate", str(reference), "--out", str(tmp_path / "o"),
                                  "--json"), "forward is broken")


def test_generate_ascendc_off_runner_writes_an_unverified_package(tmp_path: Path) -> None:
    # No CANN here: the package is written, and never called passed.
    run = run_opbot("generate", str(REFS / "kb_01_relu.py"), "--backend", "ascendc",
                    "--out", str(tmp_path / "o"), "--json")
    assert run.code == 1
    result = run.json()
    assert (result["status"], result["stopped_because"]) == ("failed", "unverified")
    assert result["backend"] == "ascendc"
    assert "opbot verify" in result["message"]
    assert (tmp_path / "o" / "ascendc" / "CMakeLists.txt").is_file()


@pytest.fixture(scope="module")
def gelu_package(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    out = tmp_path_factory.mktemp("gelu") / "gelu"
    run = run_opbot("generate", str(EXAMPLES / "gelu" / "op.yaml"), "--out", str(out), "--json")
    assert run.code == 0, run.stdout + run.stderr
    return out, run.json()


def test_generate_writes_the_operator_package(gelu_package: tuple[Path, dict[str, object]]
                                              ) -> None:
    out, result = gelu_package
    assert result["status"] == "passed"
    for relative in ("op.yaml", "reference.py", "triton/gelu.py", "tests/test_gelu.py",
                     "PERF.md"):
        assert (out / relative).is_file(), relative
    perf = (out / "PERF.md").read_text(encoding="utf-8")
    assert "say nothing about speed" in perf
    assert "shape2-float16" in perf
    kernel = (out / "triton" / "gelu.py").read_text(encoding="utf-8")
    for section in ("# Reference", "# Kernels", "# Launcher", "class ModelNew(Model)"):
        assert section in kernel


def test_generated_package_test_runs_in_a_user_repo(
        gelu_package: tuple[Path, dict[str, object]]) -> None:
    out, _ = gelu_package
    completed = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                str(out / "tests")], capture_output=True, text=True,
                               cwd=out, timeout=600, check=False)
    assert completed.returncode == 0, completed.stdout[-3000:]
    assert "6 passed" in completed.stdout


def test_generated_kernel_file_imports_without_running_anything(
        gelu_package: tuple[Path, dict[str, object]]) -> None:
    out, _ = gelu_package
    kernel = str(out / "triton" / "gelu.py")
    code = ("import importlib.util, sys\n"
            f"spec = importlib.util.spec_from_file_location('k', {kernel!r})\n"
            "module = importlib.util.module_from_spec(spec)\n"
            "spec.loader.exec_module(module)\n"
            "print(sorted(name for name in dir(module) if name.startswith('_kernel')))\n")
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               timeout=300, check=False)
    assert completed.returncode == 0, completed.stderr
    assert "_kernel" in completed.stdout


@pytest.mark.parametrize("args", [
    ("--backend", "[/]"),
    ("--backend", "triton,[bold]x"),
    ("--out", "FILE"),
    ("--out", "FILE/below"),
])
def test_bad_generate_arguments_are_exit_2_before_any_work(tmp_path: Path,
                                                          args: tuple[str, str]) -> None:
    afile = tmp_path / "afile.json"
    afile.write_text("{}", encoding="utf-8")
    value = args[1].replace("FILE", str(afile))
    run = run_opbot("generate", str(EXAMPLES / "gelu" / "op.yaml"), "--llm", "offline",
                    args[0], value, "--json")
    assert run.code == 2, run.stderr
    assert "Traceback" not in run.stderr
    assert run.stderr.startswith("error:")
    assert afile.read_text(encoding="utf-8") == "{}"


def test_markup_in_a_path_is_printed_not_interpreted(tmp_path: Path) -> None:
    run = run_opbot("verify", str(tmp_path / "[/]op.yaml"), str(tmp_path / "x.py"))
    assert run.code == 2
    assert "Traceback" not in run.stderr
    assert "[/]op.yaml" in run.stderr
