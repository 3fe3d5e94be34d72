"""The knowledge, access and preamble rules in milliseconds: the application's own operations over
the in-memory adapter (:mod:`noema.adapters.memory`), with the ``conflicts`` worker's decision
(:meth:`noema_conflicts.service.ConflictsHandler.decide`) reacting to each proposed fact in stream
order as the worker does. The same rules run against the real pipeline in tests/integration."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from noema.adapters.memory import InMemoryEventStream, InMemoryKnowledge
from noema.application.access import Caller, InsufficientMemoryPermission
from noema.application.knowledge import Knowledge
from noema.application.preamble import CLOSING, MAX_FACTS, build_preamble
from noema.errors import Conflict, InvalidQuery, NotFound, OperationError
from noema_conflicts.service import ConflictsHandler
from noema_events import ConflictRecorded, Event, FactProposed, PolicyProposed

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
ALICE = Caller("acme", "alice", "engineer")
BOB = Caller("acme", "bob", "engineer")
INTERN = Caller("acme", "ivy", "intern")
OPERATOR = Caller("acme", "root", operator=True)


@dataclass
class World:
    """The knowledge operations over an in-memory read model, and its stream."""

    k: Knowledge
    reads: InMemoryKnowledge
    stream: InMemoryEventStream
    clock: list[datetime]

    def status(self, memory_id: str) -> str:
        return str(self.reads.tables.memories[memory_id]["status"])


@pytest.fixture
def world() -> World:
    clock = [T0]
    reads = InMemoryKnowledge()
    stream = InMemoryEventStream(reads)
    worker = ConflictsHandler(None, stream, clock=lambda: clock[0], facts=reads)

    async def settle(ev: Event) -> Sequence[Event]:
        return await worker.decide(ev) if isinstance(ev, FactProposed) else ()

    stream.reactions.append(settle)
    return World(Knowledge(reads, stream, lambda: clock[0]), reads, stream, clock)


# -- facts: mention, contradiction, supersession, validity ---------------------------------------


async def test_a_repeated_fact_is_mentioned_again_instead_of_duplicated(world: World) -> None:
    first = await world.k.propose_fact(
        ALICE, "ops", "deploy", "The deploy key rotates on Fridays", veracity="inferred"
    )
    again = await world.k.propose_fact(BOB, "ops", "deploy", "the deploy keys rotate on Fridays.")
    assert (first.outcome, again.outcome, again.memory_id) == ("proposed", "mentioned", first.memory_id)
    (fact,) = await world.k.list_facts(ALICE)
    assert fact["mention_count"] == 2
    assert fact["confidence"] > 0.7


async def test_a_contradiction_supersedes_the_loser_and_records_both_sides(world: World) -> None:
    weak = await world.k.propose_fact(
        ALICE, "infra", "region", "Deploys happen on Fridays", veracity="inferred"
    )
    strong = await world.k.propose_fact(BOB, "infra", "region", "Deploys happen on Tuesdays")
    assert world.status(weak.memory_id) == "superseded"
    assert world.reads.tables.memories[weak.memory_id]["superseded_by"] == strong.memory_id
    (conflict,) = await world.k.list_conflicts(ALICE)
    assert (conflict["winner_id"], conflict["loser_id"], conflict["rule"]) == (
        strong.memory_id,
        weak.memory_id,
        "veracity",
    )
    assert conflict["loser_content"] == "Deploys happen on Fridays"
    assert [f["id"] for f in await world.k.list_facts(ALICE)] == [strong.memory_id]


async def test_two_facts_about_different_things_in_one_topic_both_stay_active(world: World) -> None:
    when = await world.k.propose_fact(ALICE, "ops", "backups", "Backups run nightly at 02:00")
    where = await world.k.propose_fact(BOB, "ops", "backups", "Backups are stored in S3")
    assert {world.status(when.memory_id), world.status(where.memory_id)} == {"active"}
    assert world.stream.of_type(ConflictRecorded) == []


async def test_an_explicit_supersession_wins_by_the_explicit_rule(world: World) -> None:
    old = await world.k.propose_fact(ALICE, "ops", "deploy", "Deploys run on Tuesdays")
    new = await world.k.supersede_fact(
        OPERATOR, old.memory_id[:8], "Deploys run on Wednesdays", reason="moved"
    )
    assert world.status(old.memory_id) == "superseded"
    (conflict,) = await world.k.list_conflicts(OPERATOR)
    assert (conflict["winner_id"], conflict["rule"]) == (new.memory_id, "explicit")
    with pytest.raises(Conflict, match="not active"):
        await world.k.supersede_fact(OPERATOR, old.memory_id, "again")


async def test_an_expired_fact_neither_absorbs_a_restatement_nor_wins_a_conflict(world: World) -> None:
    until = T0 + timedelta(hours=1)
    freeze = await world.k.propose_fact(ALICE, "ops", "freeze", "The release freeze holds", valid_until=until)
    deploys = await world.k.propose_fact(
        ALICE, "ops", "deploy-day", "Deploys happen on Fridays", valid_until=until
    )
    world.clock[0] += timedelta(hours=2)
    again = await world.k.propose_fact(BOB, "ops", "freeze", "the release freeze holds")
    weaker = await world.k.propose_fact(
        BOB, "ops", "deploy-day", "Deploys happen on Tuesdays", veracity="inferred"
    )
    assert again.outcome == "proposed"
    assert world.status(weaker.memory_id) == "active"
    assert world.status(deploys.memory_id) == "active"
    assert await world.k.list_conflicts(ALICE) == []
    every = {f["id"]: f["status"] for f in await world.k.list_facts(ALICE, include_inactive=True)}
    assert (every[freeze.memory_id], every[deploys.memory_id]) == ("expired", "expired")
    assert {f["id"] for f in await world.k.list_facts(ALICE)} == {again.memory_id, weaker.memory_id}


async def test_bad_fact_input_is_refused_before_anything_is_published(world: World) -> None:
    with pytest.raises(OperationError, match="blank"):
        await world.k.propose_fact(ALICE, "ops", "deploy", "   ")
    with pytest.raises(OperationError, match="veracity"):
        await world.k.propose_fact(ALICE, "ops", "deploy", "x", veracity="rumour")
    with pytest.raises(OperationError, match="time zone"):
        await world.k.propose_fact(ALICE, "ops", "deploy", "x", valid_until=datetime(2026, 1, 1))
    assert world.stream.events == []


async def test_an_unknown_or_ambiguous_fact_id_says_which(world: World) -> None:
    hot = await world.k.remember(ALICE, "s1", "an episodic item")
    with pytest.raises(NotFound, match="episodic memory, not a fact"):
        await world.k.resolve_fact_id(ALICE, hot.memory_id)
    with pytest.raises(InvalidQuery):
        await world.k.resolve_fact_id(ALICE, "abc")


# -- policies, grants, strict mode ----------------------------------------------------------------


async def test_a_policy_needs_write_and_a_refused_one_writes_nothing(world: World) -> None:
    await world.k.propose_policy(ALICE, "arch", "One database per service")
    await world.k.set_grant(OPERATOR, "intern", "arch", "read")
    published = len(world.stream.events)
    with pytest.raises(InsufficientMemoryPermission, match=r"intern.*read.*needs write"):
        await world.k.propose_policy(INTERN, "arch", "Anything goes")
    assert len(world.stream.events) == published
    assert [p["rule"] for p in await world.k.list_policies(INTERN)] == ["One database per service"]


async def test_strict_mode_hides_a_confidential_domain_from_facts_policies_and_the_preamble(
    world: World,
) -> None:
    await world.k.propose_fact(OPERATOR, "secrets", "vault", "The vault token rotates hourly")
    await world.k.propose_policy(OPERATOR, "secrets", "Never print the vault token")
    await world.k.propose_policy(OPERATOR, "arch", "One database per service")
    await world.k.set_access_mode(OPERATOR, "strict")
    await world.k.set_grant(OPERATOR, "engineer", "secrets", "read")
    await world.k.set_grant(OPERATOR, "*", "arch", "read")
    assert await world.k.readable_domains(INTERN) == ["arch"]
    assert await world.k.list_facts(INTERN) == []
    assert [p["domain"] for p in await world.k.list_policies(INTERN)] == ["arch"]
    task = "renew the vault token before the release"
    theirs = await build_preamble(world.reads, "acme", "ivy", task, readable_domains=["arch"], at=T0)
    mine = await build_preamble(
        world.reads, "acme", "alice", task, readable_domains=await world.k.readable_domains(ALICE), at=T0
    )
    assert "vault" not in theirs.text
    assert "- [secrets] The vault token rotates hourly" in mine.facts
    with pytest.raises(InsufficientMemoryPermission, match="writing a fact"):
        await world.k.propose_fact(INTERN, "arch", "db", "Two databases per service")


async def test_a_new_domain_in_strict_mode_is_an_operators_to_open(world: World) -> None:
    await world.k.set_access_mode(OPERATOR, "strict")
    with pytest.raises(InsufficientMemoryPermission, match="strict mode grants no access"):
        await world.k.propose_policy(ALICE, "fresh", "A rule")
    await world.k.propose_policy(OPERATOR, "fresh", "A rule")
    assert world.stream.of_type(PolicyProposed)


async def test_grants_are_for_operators_and_record_the_previous_access(world: World) -> None:
    with pytest.raises(InsufficientMemoryPermission, match="for operators"):
        await world.k.set_grant(ALICE, "engineer", "ops", "write")
    await world.k.set_grant(OPERATOR, "engineer", "ops", "read")
    changed = await world.k.set_grant(OPERATOR, "engineer", "ops", "none")
    assert changed["previous"] == "read"
    with pytest.raises(OperationError, match="access must be"):
        await world.k.set_grant(OPERATOR, "engineer", "ops", "admin")


async def test_access_control_gives_operators_write_and_compatible_mode_read(world: World) -> None:
    ac = world.k.access_control
    assert await ac.access(OPERATOR, "anything") == "write"
    assert await ac.access(ALICE, "unknown") == "read"
    assert await ac.readable_domains(ALICE) is None
    await world.k.set_access_mode(OPERATOR, "strict")
    assert await ac.access(ALICE, "unknown") == "none"
    assert await ac.writable(ALICE, ["a", "b"]) == set()


# -- notes ------------------------------------------------------------------------------------------


async def test_notes_are_private_to_their_agent_and_operators(world: World) -> None:
    await world.k.update_my_notes(ALICE, "halfway through the auth refactor")
    assert await world.k.get_notes(ALICE) == "halfway through the auth refactor"
    assert await world.k.get_notes(OPERATOR, "alice") == "halfway through the auth refactor"
    with pytest.raises(InsufficientMemoryPermission, match="private"):
        await world.k.get_notes(BOB, "alice")
    await world.k.set_notes(OPERATOR, "alice", "reset by ops")
    assert await world.k.get_notes(ALICE) == "reset by ops"


# -- the preamble -----------------------------------------------------------------------------------


async def test_the_preamble_holds_policies_notes_and_at_most_five_matching_facts(world: World) -> None:
    await world.k.propose_policy(OPERATOR, "ops", "Deploy from main only", repo="billing")
    await world.k.propose_policy(OPERATOR, "arch", "One database per service")
    await world.k.update_my_notes(ALICE, "halfway through the auth refactor")
    for n in range(7):
        await world.k.propose_fact(ALICE, "ops", f"deploy-{n}", f"Deploy step {n} needs the deploy key")
    p = await build_preamble(
        world.reads, "acme", "alice", "rotate the deploy key before the release", repo="billing", at=T0
    )
    assert p.policies == ["- [repo:billing/ops] Deploy from main only", "- [arch] One database per service"]
    assert p.notes == "halfway through the auth refactor"
    assert len(p.facts) == MAX_FACTS
    assert p.text.endswith(CLOSING)
    assert "Your notes:\nhalfway" in p.text
    short = await build_preamble(world.reads, "acme", "bob", "deploy key", at=T0)
    assert short.facts == [], "a task under 20 characters gets no facts"


async def test_the_preamble_takes_facts_current_at_the_application_clock(world: World) -> None:
    await world.k.propose_fact(
        ALICE, "ops", "freeze", "The release freeze holds", valid_until=T0 + timedelta(hours=1)
    )
    task = "is the release freeze still on today"
    now = await build_preamble(world.reads, "acme", "alice", task, at=T0)
    later = await build_preamble(world.reads, "acme", "alice", task, at=T0 + timedelta(hours=2))
    assert now.facts == ["- [ops] The release freeze holds"]
    assert later.facts == []
