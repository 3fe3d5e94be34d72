"""A second benchmark shape: agent workspaces rather than chit-chat.

    python -m bench.agent_workspace OUT_DIR [--workspaces 4] [--seed 7]
    python -m bench.recall OUT_DIR            # then scored as LoCoMo is, per category

Writes one LoCoMo-format conversation per workspace (``session_N``, ``session_N_date_time``, ``qa``
with evidence turn ids and a category), generated from a fixed seed, so the figures are reproducible
and nothing in it was ever tuned against. A workspace is what Noema is for: several agents and people
working across repositories over about three months of sessions — facts about services (port, owner,
language, database, which service each one calls), repository conventions, decisions with their
dates, incidents and fixes (episodes), some facts changed later ("billing moved to port 8450"),
and as many status lines, chit-chat and facts about other services as a real channel has around them.

Questions, in LoCoMo's category numbers so ``bench.recall`` reports them the same way:

- 4 single-hop: one fact, phrased otherwise than the turn that states it ("Which port does the
  billing service listen on?"); after a change, only the turn with the current value is evidence;
- 2 temporal: when a decision was taken (two services change their deploy day twice: the question
  names the day it moved to), and what went wrong with a service at a time the question names (a
  day, a month, "last week", "last month"), among three incidents of that service in other
  sessions — only the time tells them apart;
- 1 multi-hop: two facts joined ("Who owns the service that billing calls?": the turn saying what
  billing calls and the turn naming that service's owner);
- 3 conventions: what to do in a repository ("What must I do before pushing to ledger?").
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

SERVICES = [
    "billing",
    "ledger",
    "gateway",
    "search",
    "auth",
    "notifier",
    "reports",
    "scheduler",
    "catalog",
    "ingest",
]
PEOPLE = ["Ana", "Bilal", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hana", "Ivo", "Jun", "Kaia", "Luis"]
AGENTS = ["deploy-bot", "review-agent", "ops-agent", "triage-agent"]
LANGUAGES = ["Go", "Rust", "Python", "Kotlin", "TypeScript", "Elixir"]
DATABASES = ["PostgreSQL", "Redis", "SQLite", "ClickHouse", "Cassandra", "DynamoDB"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
CONVENTIONS = [
    ("run `make lint` and the unit tests before pushing", "What must I do before pushing to {repo}?"),
    ("only squash merges are allowed, no merge commits", "How are pull requests merged in {repo}?"),
    (
        "commit messages follow Conventional Commits (feat:, fix:, chore:)",
        "How should commit messages look in {repo}?",
    ),
    (
        "every migration needs a rollback script next to it",
        "What has to come with a database migration in {repo}?",
    ),
    (
        "feature flags are removed within two sprints of full rollout",
        "How long may a feature flag stay in {repo}?",
    ),
    (
        "two approvals are required, one from the owning team",
        "How many reviews does a change in {repo} need?",
    ),
    ("secrets go through the vault CLI, never into .env files", "Where do secrets for {repo} go?"),
    (
        "public endpoints need an OpenAPI entry before they ship",
        "What does a new public endpoint in {repo} need first?",
    ),
]
INCIDENTS = [
    ("ran out of database connections after the pool size was halved", "the connection pool exhausted"),
    ("returned 502s for twenty minutes because a TLS certificate expired", "the expired certificate"),
    ("lost its queue consumer when the broker restarted and nobody noticed for an hour", "the lost consumer"),
    ("filled its disk with debug logs left on after a hotfix", "the full disk"),
    ("served stale prices because a cache key ignored the currency", "the stale cache"),
]
CHATTER = [
    "Standup moves to 10:30 tomorrow, the design review runs long.",
    "Looking at the dashboards now, nothing stands out yet.",
    "I'll be out Friday afternoon, ping {p} if something breaks.",
    "Coffee machine on the third floor is fixed, finally.",
    "Can someone review my PR when they get a minute?",
    "The CI queue is slow today, builds take about twenty minutes.",
    "Reminder: the quarterly planning doc is due next week.",
    "Pairing with {p} on the flaky integration tests this afternoon.",
    "Does anyone know why the staging cluster restarted overnight?",
    "Nice work on the release notes, they read well.",
    "I'm updating my local toolchain, back in ten minutes.",
    "The on-call handover is in the usual channel.",
]


@dataclass
class Service:
    name: str
    port: int
    owner: str
    language: str
    database: str
    calls: str
    deploy_day: str


@dataclass
class Workspace:
    """Turns by session, and the questions with the turns that answer them."""

    rng: random.Random
    dates: list[datetime]
    sessions: list[list[dict[str, str]]] = field(default_factory=list)
    qa: list[dict[str, Any]] = field(default_factory=list)

    def say(self, session: int, speaker: str, text: str) -> str:
        while len(self.sessions) <= session:
            self.sessions.append([])
        turn_id = f"D{session + 1}:{len(self.sessions[session]) + 1}"
        self.sessions[session].append({"speaker": speaker, "dia_id": turn_id, "text": text})
        return turn_id

    def ask(self, question: str, answer: str, evidence: list[str], category: int) -> None:
        self.qa.append({"question": question, "answer": answer, "evidence": evidence, "category": category})

    def when(self, session: int) -> str:
        """The session's time as LoCoMo writes it ("2:05 pm on 12 January, 2026")."""
        return self.dates[session].strftime("%I:%M %p on %d %B, %Y").lstrip("0").lower()


def _services(rng: random.Random, count: int) -> list[Service]:
    names = rng.sample(SERVICES, count)
    return [
        Service(
            name=n,
            port=rng.randint(8000, 8999),
            owner=rng.choice(PEOPLE),
            language=rng.choice(LANGUAGES),
            database=rng.choice(DATABASES),
            calls=rng.choice([m for m in names if m != n]),
            deploy_day=rng.choice(DAYS),
        )
        for n in names
    ]


def workspace(rng: random.Random, start: datetime, sessions: int = 12) -> dict[str, Any]:
    """One agent workspace as a LoCoMo conversation."""
    dates = [
        start + timedelta(days=7 * n + rng.randint(0, 2), hours=rng.randint(0, 7)) for n in range(sessions)
    ]
    ws = Workspace(rng, dates)
    team = rng.sample(PEOPLE, 4) + rng.sample(AGENTS, 2)
    services = _services(rng, 6)

    def speaker() -> str:
        return rng.choice(team)

    def early() -> int:
        return rng.randint(0, sessions // 3)

    def later() -> int:
        return rng.randint(sessions // 2, sessions - 1)

    facts: dict[tuple[str, str], str] = {}
    for s in services:
        facts[(s.name, "port")] = ws.say(early(), speaker(), rng.choice([
            f"{s.name} is served on port {s.port} behind the gateway.",
            f"FYI the {s.name} container exposes {s.port}, not the default.",
        ]))  # fmt: skip
        facts[(s.name, "owner")] = ws.say(early(), speaker(), rng.choice([
            f"{s.owner}'s team is responsible for {s.name}; page them for anything there.",
            f"Ownership of {s.name} sits with {s.owner} now.",
        ]))  # fmt: skip
        facts[(s.name, "language")] = ws.say(
            early(), speaker(), f"{s.name} was rewritten in {s.language} last year."
        )
        facts[(s.name, "database")] = ws.say(early(), speaker(), rng.choice([
            f"{s.name} keeps its state in {s.database}.",
            f"The {s.name} data lives in a {s.database} instance of its own.",
        ]))  # fmt: skip
        facts[(s.name, "calls")] = ws.say(
            early(), speaker(), f"Every request to {s.name} ends up calling {s.calls} synchronously."
        )
    # Some facts change later: only the newer turn answers.
    for s in rng.sample(services, 2):
        old, s.port = s.port, s.port + rng.randint(1, 40)
        facts[(s.name, "port")] = ws.say(
            later(), speaker(), f"Heads-up: {s.name} moved to port {s.port} (it was {old})."
        )
    for s in services:
        ws.ask(f"Which port does the {s.name} service listen on?", str(s.port), [facts[(s.name, "port")]], 4)
        ws.ask(f"What storage does {s.name} use?", s.database, [facts[(s.name, "database")]], 4)
        ws.ask(f"Who should I contact about problems with {s.name}?", s.owner, [facts[(s.name, "owner")]], 4)
        callee = next(c for c in services if c.name == s.calls)
        ws.ask(
            f"Who owns the service that {s.name} depends on?",
            callee.owner,
            [facts[(s.name, "calls")], facts[(callee.name, "owner")]],
            1,
        )
        ws.ask(
            f"In which language is the service written that {s.name} calls?",
            callee.language,
            [facts[(s.name, "calls")], facts[(callee.name, "language")]],
            1,
        )
    # Decisions, dated by their session; two services change their deploy day twice, so "when did
    # we decide…" is answered by the turn naming the right day, not by any deploy decision.
    for i, s in enumerate(rng.sample(services, 4)):
        first, second = sorted(rng.sample(range(1, sessions), 2))
        for session in (first, second) if i < 2 else (first,):
            new_day = rng.choice([d for d in DAYS if d != s.deploy_day])
            turn = ws.say(
                session,
                speaker(),
                f"Decision: {s.name} deploys move from {s.deploy_day} to {new_day}, starting next week.",
            )
            s.deploy_day = new_day
            ws.ask(f"When did we decide to move {s.name} deploys to {new_day}?", ws.when(session), [turn], 2)
    # Incidents: two services have three each, in three sessions. A question names the time (a day,
    # a month, "last week", "last month") and asks what went wrong: the service's other incidents
    # match its words as well, only the time tells them apart.
    for s in rng.sample(services, 2):
        happened = sorted(rng.sample(range(1, sessions), 3))
        if rng.random() < 0.5 and sessions - 2 not in happened:
            happened[-1] = sessions - 2  # one in the week before the newest session, now and then
        incidents = list(zip(happened, rng.sample(INCIDENTS, 3), strict=True))
        for session, (what, _) in incidents:
            turn = ws.say(session, speaker(), f"Incident write-up: {s.name} {what}.")
            for question in _dated_questions(s.name, session, [n for n, _ in incidents], ws.dates):
                ws.ask(question, what, [turn], 2)
    # Conventions per repository.
    for s, (rule, question) in zip(rng.sample(services, 4), rng.sample(CONVENTIONS, 4), strict=True):
        turn = ws.say(early(), speaker(), f"Convention for the {s.name} repo: {rule}.")
        ws.ask(question.format(repo=s.name), rule, [turn], 3)
    # What surrounds them in a real channel.
    for session in range(sessions):
        for _ in range(rng.randint(6, 10)):
            other = rng.choice(services)
            line = rng.choice([
                rng.choice(CHATTER).format(p=rng.choice(PEOPLE)),
                f"Restarting {other.name} on staging to pick up the new config.",
                f"The {other.name} dashboards show p99 latency around {rng.randint(40, 400)} ms today.",
                f"Opened a ticket about {other.name}'s error budget, nothing urgent.",
            ])  # fmt: skip
            ws.say(session, speaker(), line)
    conversation: dict[str, Any] = {"speaker_a": team[0], "speaker_b": team[1]}
    for n, turns in enumerate(ws.sessions):
        rng.shuffle(turns)  # facts, decisions and chatter interleaved; ids renumbered in order
        renamed = _renumbered(turns, n, ws.qa)
        conversation[f"session_{n + 1}_date_time"] = ws.when(n)
        conversation[f"session_{n + 1}"] = renamed
    return {"conversation": conversation, "qa": ws.qa}


def _dated_questions(service: str, session: int, sessions: list[int], dates: list[datetime]) -> list[str]:
    """Questions about what went wrong with ``service`` in ``session``, each naming a time that holds
    that session's incident and none of its other ``sessions``' ones: its day; its month, when no
    other incident of the service happened that month; "last week" / "last month", read against the
    newest session (the workspace's present) as the product reads them (Monday-based weeks)."""
    when = dates[session]
    others = [dates[n] for n in sessions if n != session]
    out = [f"What went wrong with {service} on {when.day} {when:%B}, {when.year}?"]
    if all((d.year, d.month) != (when.year, when.month) for d in others):
        out.append(f"Which incident did {service} have in {when:%B} {when.year}?")
    today = dates[-1].replace(hour=0, minute=0)
    week = today - timedelta(days=7 + today.weekday()), today - timedelta(days=today.weekday())
    if week[0] <= when < week[1] and not any(week[0] <= d < week[1] for d in others):
        out.append(f"What went wrong with {service} last week?")
    month_end = today.replace(day=1)
    month = (month_end - timedelta(days=1)).replace(day=1), month_end
    if month[0] <= when < month[1] and not any(month[0] <= d < month[1] for d in others):
        out.append(f"Which incident did {service} have last month?")
    return out


def _renumbered(turns: list[dict[str, str]], session: int, qa: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The session's turns with ids in their new order, the questions' evidence following them."""
    new_ids = {t["dia_id"]: f"D{session + 1}:{i}" for i, t in enumerate(turns, 1)}
    for q in qa:
        q["evidence"] = [new_ids.get(e, e) if e.startswith(f"D{session + 1}:") else e for e in q["evidence"]]
    return [{**t, "dia_id": new_ids[t["dia_id"]]} for t in turns]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("out", type=Path, help="folder to write the conversations into")
    parser.add_argument("--workspaces", type=int, default=4)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    if args.workspaces < 1:
        parser.error("--workspaces must be at least 1")
    args.out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    for i in range(args.workspaces):
        data = workspace(rng, datetime(2026, 1, 5, 9, 0) + timedelta(days=3 * i))
        (args.out / f"agents-{i + 1}.json").write_text(json.dumps(data, indent=1))
    questions = sum(len(json.loads(p.read_text())["qa"]) for p in args.out.glob("agents-*.json"))
    print(
        json.dumps(
            {"workspaces": args.workspaces, "seed": args.seed, "questions": questions, "out": str(args.out)}
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
