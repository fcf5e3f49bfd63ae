"""A generated, deterministic GitHub dataset: repositories, their issues (pull requests
among them) and the issues' comments, as the test API server serves them.

    data = GitHubDataset.generate(repos=3, issues=10_002, comments=30_000, seed=31)
    data.repos["octo/repo-0"].issues[0].number      # 1
    data.update_issues(500)                          # new updated_at and title on 500 issues

The same seed gives the same records, byte for byte. Timestamps are whole seconds in
2023-2024; `update_issues` moves the dataset's clock forward, so every changed issue is
newer than anything before it (what `since` must return).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Comment", "GitHubDataset", "Issue", "Repository", "iso", "label", "parse_iso", "user"]

_START = 1_672_531_200  # 2023-01-01T00:00:00Z
_LABELS = ("bug", "enhancement", "documentation", "question", "good first issue", "wontfix")
_USERS = 40


def iso(epoch: int) -> str:
    """GitHub's timestamp form: 2023-01-01T00:00:00Z."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def parse_iso(text: str) -> int:
    """Epoch seconds of an ISO 8601 timestamp (`Z` or an offset); ValueError if it is none."""
    from datetime import datetime

    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())


def user(k: int) -> dict[str, Any]:
    """The k-th user of the dataset, as GitHub shows a user inside a record."""
    return {"login": f"user-{k}", "id": 1000 + k, "type": "User", "site_admin": False}


def label(k: int) -> dict[str, Any]:
    return {"id": 700 + k, "name": _LABELS[k], "color": f"{(k * 0x2F5A3) % 0xFFFFFF:06x}"}


@dataclass
class Issue:
    """One issue or pull request (GitHub numbers both in one sequence per repository)."""

    id: int
    number: int
    title: str
    state: str
    user: int
    labels: tuple[int, ...]
    created_at: int
    updated_at: int
    closed_at: int | None
    body: str
    pull_id: int | None  # set when the issue is a pull request
    comments: int = 0
    merged: bool = False

    @property
    def is_pull(self) -> bool:
        return self.pull_id is not None


@dataclass
class Comment:
    id: int
    issue_number: int
    user: int
    body: str
    created_at: int
    updated_at: int


@dataclass
class Repository:
    owner: str
    name: str
    id: int
    issues: list[Issue] = field(default_factory=list)  # by number
    comments: list[Comment] = field(default_factory=list)  # by id

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    def issue(self, number: int) -> Issue | None:
        if 1 <= number <= len(self.issues):
            return self.issues[number - 1]
        return None


@dataclass
class GitHubDataset:
    repos: dict[str, Repository]  # by full name, "owner/name"
    clock: int  # the dataset's "now": later than every timestamp in it
    seed: int
    version: int = 0  # bumped by every change, so servers can cache sorted views

    @classmethod
    def generate(
        cls, *, repos: int = 3, issues: int = 10_002, comments: int = 30_000, seed: int = 31
    ) -> GitHubDataset:
        """`issues` and `comments` in total, spread over `repos` repositories."""
        rng = random.Random(seed)
        repositories = [
            Repository(owner="octo", name=f"repo-{r}", id=500 + r) for r in range(repos)
        ]
        clock = _START + issues * 600 + 86_400
        for k in range(issues):
            repo = repositories[k % repos]
            created = _START + k * 600 + rng.randint(0, 300)
            number = len(repo.issues) + 1
            is_pull = rng.random() < 0.3
            closed = rng.random() < 0.6
            closed_at = created + rng.randint(60, 30 * 86_400) if closed else None
            if closed_at is not None and closed_at >= clock:
                closed_at = clock - 1
            updated = max(closed_at or created, created + rng.randint(0, 10 * 86_400))
            kind = "pull request" if is_pull else "issue"
            repo.issues.append(
                Issue(
                    id=10_000_000 + k,
                    number=number,
                    title=f"{kind} {number} of {repo.name}: {rng.choice(_LABELS)}",
                    state="closed" if closed else "open",
                    user=rng.randrange(_USERS),
                    labels=tuple(sorted(rng.sample(range(len(_LABELS)), rng.randint(0, 2)))),
                    created_at=created,
                    updated_at=min(updated, clock - 1),
                    closed_at=closed_at,
                    body=f"Body of {kind} {number}.\n\nSeed {seed}, line {rng.randint(0, 9999)}.",
                    pull_id=20_000_000 + k if is_pull else None,
                    merged=is_pull and closed and rng.random() < 0.7,
                )
            )
        stamps = []
        for c in range(comments):
            repo = repositories[c % repos]
            issue = repo.issues[rng.randrange(len(repo.issues))]
            created = rng.randint(issue.created_at + 1, clock - 1)
            stamps.append((created, c, repo, issue))
        # Comment ids grow with creation time, as GitHub's do.
        for n, (created, _, repo, issue) in enumerate(sorted(stamps, key=lambda s: s[:2])):
            issue.comments += 1
            edited = rng.random() < 0.2
            repo.comments.append(
                Comment(
                    id=30_000_000 + n,
                    issue_number=issue.number,
                    user=rng.randrange(_USERS),
                    body=f"Comment {n} on #{issue.number}: {rng.randint(0, 99_999)}",
                    created_at=created,
                    updated_at=min(clock - 1, created + rng.randint(1, 86_400))
                    if edited
                    else created,
                )
            )
        return cls(repos={r.full_name: r for r in repositories}, clock=clock, seed=seed)

    @property
    def issue_count(self) -> int:
        return sum(len(r.issues) for r in self.repos.values())

    @property
    def comment_count(self) -> int:
        return sum(len(r.comments) for r in self.repos.values())

    def update_issues(
        self, n: int, *, repo: str | None = None, at: int | None = None
    ) -> list[tuple[str, int]]:
        """Change `n` issues (a seeded choice): a new title and an updated_at later than any
        before, or `at` (epoch seconds) for all of them, as a live API stamps changes with
        the time they happened. Returns (repository, number) of each, in the order they
        were changed."""
        candidates = [
            (r.full_name, issue)
            for r in self.repos.values()
            if repo is None or r.full_name == repo
            for issue in r.issues
        ]
        rng = random.Random(self.seed * 7919 + self.version)
        changed = []
        for name, issue in rng.sample(candidates, n):
            self.clock = max(self.clock + 1, at or 0)
            issue.updated_at = at if at is not None else self.clock
            issue.title = f"{issue.title.split(' (edited')[0]} (edited at {iso(self.clock)})"
            changed.append((name, issue.number))
        self.clock += 1
        self.version += 1
        return changed
