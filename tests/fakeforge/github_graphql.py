"""GitHub's GraphQL endpoint (`POST /graphql`), for what REST does not tell: whether a review
thread is resolved.

Queries are parsed, validated and executed by graphql-core against the part of GitHub's
public schema the bot reads (type and field names as GitHub documents them), so a query
that names a field GitHub lacks fails here as it would there. Connections follow GitHub's
rules: `first` or `last` is required, at most 100, cursors are opaque.
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

from graphql import GraphQLError, build_schema, extend_schema, graphql_sync, parse

from .acts import Act
from .wire import Call, Reply

if TYPE_CHECKING:
    from .model import Issue, Repo, ReviewThread, State
    from .server import FakeServer

SCHEMA = build_schema('''
type Query {
  repository(owner: String!, name: String!, followRenames: Boolean): Repository
}

type Repository {
  nameWithOwner: String!
  pullRequest(number: Int!): PullRequest
}

type PullRequest {
  number: Int!
  reviewThreads(first: Int, after: String, last: Int, before: String):
    PullRequestReviewThreadConnection!
}

type PageInfo {
  hasNextPage: Boolean!
  hasPreviousPage: Boolean!
  endCursor: String
  startCursor: String
}

type PullRequestReviewThreadConnection {
  nodes: [PullRequestReviewThread]
  pageInfo: PageInfo!
  totalCount: Int!
}

type PullRequestReviewThread {
  id: ID!
  isResolved: Boolean!
  isOutdated: Boolean!
  path: String!
  line: Int
  comments(first: Int, after: String, last: Int, before: String):
    PullRequestReviewCommentConnection!
}

type PullRequestReviewCommentConnection {
  nodes: [PullRequestReviewComment]
  pageInfo: PageInfo!
  totalCount: Int!
}

type PullRequestReviewComment {
  id: ID!
  databaseId: Int
  body: String!
}
''')


class _NotFound(GraphQLError):
    """GitHub answers a missing object with data null and an error of type NOT_FOUND."""

    def __init__(self, message: str) -> None:
        super().__init__(message, extensions={"type": "NOT_FOUND"})


def _cursor(index: int) -> str:
    return base64.b64encode(f"cursor:v2:{index}".encode()).decode()


def _page(items: list[Any], first: int | None = None, after: str | None = None,
          last: int | None = None, before: str | None = None) -> dict[str, Any]:
    if first is None and last is None:
        raise GraphQLError("You must provide a `first` or `last` value to properly paginate "
                           "the connection.")
    for name, value in (("first", first), ("last", last)):
        if value is not None and not 0 <= value <= 100:
            raise GraphQLError(f"Requesting {value} records on the connection exceeds the "
                               f"`{name}` limit of 100 records.")
    start = int(base64.b64decode(after).decode().rsplit(":", 1)[1]) + 1 if after else 0
    end = int(base64.b64decode(before).decode().rsplit(":", 1)[1]) if before else len(items)
    window = list(range(start, min(end, len(items))))
    if first is not None:
        window = window[:first]
    if last is not None:
        window = window[-last:] if last else []
    return {"nodes": [items[i] for i in window], "totalCount": len(items),
            "pageInfo": {"hasNextPage": bool(window) and window[-1] < len(items) - 1,
                         "hasPreviousPage": bool(window) and window[0] > 0,
                         "startCursor": _cursor(window[0]) if window else None,
                         "endCursor": _cursor(window[-1]) if window else None}}


def _thread(thread: ReviewThread) -> dict[str, Any]:
    comments = [{"id": f"PRRC_{c.id}", "databaseId": c.id, "body": c.body}
                for c in thread.comments]
    return {"id": f"PRRT_{thread.root.id}", "isResolved": thread.resolved, "isOutdated": False,
            "path": thread.path, "line": thread.line,
            "comments": lambda _info, **page: _page(comments, **page)}


class GitHubGraphQL:
    def __init__(self, server: FakeServer) -> None:
        self.server = server

    @property
    def state(self) -> State:
        return self.server.state  # each test's fresh state

    def handle(self, call: Call) -> Reply:
        if call.method != "POST" or call.path not in ("", "/"):
            return Reply.json(404, {"message": "Not Found"})
        scheme, _, token = call.headers.get("authorization", "").partition(" ")
        if scheme.lower() not in ("token", "bearer") or token not in self.state.tokens:
            return Reply.json(401, {"message": "This endpoint requires you to be "
                                    "authenticated."})
        injected = self.state.injected["github-graphql"]
        if injected:
            canned = injected.popleft()
            return Reply.json(canned.status, {"message": canned.message}, canned.headers)
        try:
            request = json.loads(call.body or b"{}")
            query, variables = request["query"], request.get("variables") or {}
        except (ValueError, KeyError, TypeError):
            return Reply.json(400, {"message": "Problems parsing JSON"})
        roots = {"repository": self._repository, **more_roots(self.state, token)}
        result = graphql_sync(SCHEMA, query, root_value=roots, variable_values=variables)
        lost = self.state.lost_answer("github-graphql", call.method)  # fail_after_next
        if lost is not None:
            return Reply.json(lost, {"message": "Server Error"})
        body: dict[str, Any] = {"data": result.data}
        if result.errors:
            body["errors"] = [_error_json(error) for error in result.errors]
            # An error with no path is the query's own (syntax, a field GitHub lacks): the
            # client is wrong, and the test that sent it fails.
            self.state.validation_errors.extend(
                f"POST /graphql: {error.message}" for error in result.errors
                if error.path is None)
        return Reply.json(200, body)

    def _repository(self, _info: Any, owner: str, name: str,
                    followRenames: bool = True) -> dict[str, Any]:  # GitHub's name
        repo = self.state.repos.get(f"{owner}/{name}")
        if repo is None:
            raise _NotFound(f"Could not resolve to a Repository with the name '{owner}/{name}'.")

        def pull_request(_info: Any, number: int) -> dict[str, Any]:
            pull = repo.issues.get(number)
            if pull is None or pull.pull is None:
                raise _NotFound(f"Could not resolve to a PullRequest with the number of "
                                f"{number}.")
            threads = [_thread(thread) for thread in pull.pull.threads]
            return {"number": number,
                    "reviewThreads": lambda _info, **page: _page(threads, **page)}

        return {"nameWithOwner": f"{owner}/{name}", "pullRequest": pull_request}


def _error_json(error: GraphQLError) -> dict[str, Any]:
    value: dict[str, Any] = {"message": error.message}
    if error.path is not None:
        value["path"] = list(error.path)
    if error.locations:
        value["locations"] = [{"line": loc.line, "column": loc.column}
                              for loc in error.locations]
    if error.extensions and "type" in error.extensions:
        value["type"] = error.extensions["type"]
    return value


# -- who the token is, and resolving review threads ------------------------------------------
# `viewer` answers an App installation token too, with its bot user `<slug>[bot]`
# (github.com/fullsend-ai/fullsend/pull/1953); `resolveReviewThread` takes the thread's
# node id, as GitHub's public schema declares.
SCHEMA = extend_schema(SCHEMA, parse('''
extend schema { mutation: Mutation }

extend type Query {
  viewer: User!
}

type User {
  login: String!
  databaseId: Int
  name: String
}

type Mutation {
  resolveReviewThread(input: ResolveReviewThreadInput!): ResolveReviewThreadPayload
}

input ResolveReviewThreadInput {
  clientMutationId: String
  threadId: ID!
}

type ResolveReviewThreadPayload {
  clientMutationId: String
  thread: PullRequestReviewThread
}
'''))


def more_roots(state: State, token: str) -> dict[str, Any]:
    """The root fields that need to know who asks."""
    login = state.tokens[token]

    def viewer(_info: Any) -> dict[str, Any]:
        user = state.users.get(login)
        return {"login": login, "databaseId": user.id if user else None,
                "name": user.name if user else login}

    def resolve_review_thread(_info: Any, input: dict[str, Any]) -> dict[str, Any]:
        found = _find_thread(state, str(input["threadId"]))
        if found is None:
            raise _NotFound(f"Could not resolve to a node with the global id of "
                            f"'{input['threadId']}'")
        repo, issue, thread = found
        member = repo.members.get(login)
        may = issue.author == login or (member is not None and member.role in (
            "write", "maintain", "admin"))
        if not may:
            raise GraphQLError(f"{login} does not have the correct permissions to execute "
                               "`ResolveReviewThread`", extensions={"type": "FORBIDDEN"})
        if not thread.resolved:
            thread.resolved = True
            state.record("github", repo.full_name, f"#{issue.number}", "resolve",
                         str(thread.root.id))
            state.announce(Act("thread-resolved", repo.full_name, login, issue=issue,
                               review_comments=tuple((thread, c) for c in thread.comments)))
        return {"clientMutationId": input.get("clientMutationId"), "thread": _thread(thread)}

    return {"viewer": viewer, "resolveReviewThread": resolve_review_thread}


def _find_thread(state: State, node: str) -> tuple[Repo, Issue, ReviewThread] | None:
    prefix, _, root = node.partition("_")
    if prefix != "PRRT" or not root.isdigit():
        return None
    for repo in state.repos.values():
        for issue in repo.pulls():
            assert issue.pull is not None
            for thread in issue.pull.threads:
                if thread.root.id == int(root):
                    return repo, issue, thread
    return None
