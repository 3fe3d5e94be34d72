"""`noemactl memory list|timeline|show|add` and `noemactl audit` over the in-memory composition
(tests/unit/cli_in_memory.py: the commands in process, on the facade the in-memory API is built on)
answer what the HTTP API answers (one implementation behind both), and refuse bad input the same way.
Moved from tests/integration/test_cli_reads.py with their assertions kept (the servers' rows and
messages read from the in-memory stream instead); two stay there too, with noemactl run as a process
against the real servers: the decay tick and `observe -`. The listings against the API run over both
compositions in tests/contract/test_cli_reads.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from noema_events import ObservationRecorded, RelationshipAdded
from tests.contract.cli_backends import at_about_the_same_time, from_api
from tests.integration.api_harness import memory, relationship
from tests.unit.api_in_memory import InMemoryApi as ApiHarness
from tests.unit.cli_in_memory import api, ctl, ctl_json

__all__ = ["api"]  # the fixture, imported for pytest

JANUARY = datetime(2024, 1, 15, tzinfo=UTC)


async def test_show_gives_the_api_detail_with_citing_events_and_source_decisions(api: ApiHarness) -> None:
    a, b = await api.given(
        memory("Bob keeps the vault credentials", source_observation_ids=["obs-1"]),
        memory("the vault is in room 4"),
    )
    await api.given(relationship(a, b))

    shown = await ctl_json(api, "memory", "show", a[:8])
    assert shown == await from_api(api, f"/v1/memories/{a}")
    assert shown["source_observations"] == [{"id": "obs-1", "decision": None}]
    assert {e["id"] for e in shown["citing_events"]} >= {"rel-event"}

    human = await ctl(api, "memory", "show", a)
    assert human.code == 0, human.stderr
    for part in (
        "Bob keeps the vault credentials",
        "origin event memory.created.v1",
        "source observations",
        "obs-1",
        "related_to",
        "events citing it",
        "relationship.added.v1",
    ):
        assert part in human.stdout, part


async def test_add_enters_knowledge_like_the_api_and_the_audit_log_agrees(api: ApiHarness) -> None:
    receipt = await ctl_json(
        api,
        "memory",
        "add",
        "the on-call phone is 555-0100",
        "-w",
        "acme",
        "-d",
        "ops",
        "--reason",
        "runbook",
    )
    await api.caught_up()
    entered = (await ctl_json(api, "memory", "show", receipt["memory_id"]))["memory"]
    assert (entered["content"], entered["channel"], entered["credibility"], entered["domain"]) == (
        "the on-call phone is 555-0100",
        "operator",
        1.0,
        "ops",
    )

    audit = await ctl_json(api, "audit", "--type", "operator.action", "-w", "acme")
    assert audit == await from_api(api, "/v1/audit", type="operator.action", workspace="acme")
    [action] = audit["items"]
    assert (action["id"], action["actor"], action["payload"]["action"], action["payload"]["reason"]) == (
        receipt["action_event_id"],
        "operator:carol",
        "create",
        "runbook",
    )
    first = await ctl_json(api, "audit", "--limit", "1")
    assert [e["seq"] for e in first["items"]] == [first["next_before"]]
    older = await ctl_json(api, "audit", "--before", str(first["next_before"]))
    assert older["items"]
    assert all(e["seq"] < first["next_before"] for e in older["items"])

    human = await ctl(api, "audit", "-w", "acme")
    assert human.code == 0, human.stderr
    assert "operator.action.v1" in human.stdout
    assert "runbook" in human.stdout


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["audit", "--type", "memory.imagined"], "unknown event type 'memory.imagined'; one of:"),
        (["audit", "--type", "memory.created.v9"], "unknown event type"),
        (["memory", "list", "--kind", "dream"], "one of: autobiographical, episodic"),
        (["memory", "list", "--since", "yesterday"], "since"),
        (["memory", "list", "--limit", "0"], "limit"),
        (["memory", "timeline", "-w", "acme", "--order", "sideways"], "one of: asc, desc"),
        (["memory", "add", "x", "-w", "no spaces", "--reason", "y"], "workspace"),
        (["memory", "add", "x", "-w", "acme", "--reason", "   "], "reason"),
        (["memory", "add", "x", "-w", "acme", "--reason", "y", "--importance", "2"], "importance"),
    ],
)
async def test_bad_input_is_refused_with_a_message_and_exit_code_2(
    api: ApiHarness, args: list[str], fragment: str
) -> None:
    ran = await ctl(api, *args)
    assert ran.code == 2, (ran.stdout, ran.stderr)
    assert fragment in " ".join(ran.stderr.split())
    assert "Traceback" not in ran.stderr


@pytest.mark.parametrize(
    ("since", "accepted"),
    [
        ("2020-01-01", True),
        ("2020-01-01T00:00:00", True),
        ("2020-01-01T00:00:00Z", True),
        ("2020-01-01T01:00:00+01:00", True),
        ("yesterday", False),
        ("2020-13-01", False),
        ("2020", False),
    ],
)
async def test_dates_are_accepted_and_refused_alike_by_the_cli_and_the_api(
    api: ApiHarness, since: str, accepted: bool
) -> None:
    await api.given(memory("a fact", happened_at=JANUARY))
    res = await api.admin.get("/v1/memories", params={"since": since})
    ran = await ctl(api, "memory", "list", "--since", since, "--json")
    timeline = await ctl(api, "memory", "timeline", "-w", "acme", "--since", since, "--json")
    if accepted:
        assert res.status_code == 200, res.text
        assert ran.code == 0, ran.stderr
        assert json.loads(ran.stdout) == at_about_the_same_time(res.json())
        assert timeline.code == 0, timeline.stderr
        assert [m["content"] for m in res.json()["items"]] == ["a fact"]
    else:
        assert res.status_code == 400
        message = res.json()["error"].removeprefix("invalid query parameter: ")
        assert message.startswith(f"since: {since!r} is not a date or time; give an RFC 3339 timestamp")
        assert (ran.code, timeline.code) == (2, 2)
        assert message in " ".join(ran.stderr.split())
        assert message in " ".join(timeline.stderr.split())


async def test_blank_content_and_bad_names_are_refused_in_words_by_the_cli_and_the_api(
    api: ApiHarness,
) -> None:
    for content, workspace, said in [
        ("   ", "acme", "content must not be blank"),
        ("x", "bad ws!", "workspace 'bad ws!' is not a valid name: 1-64 letters, digits, '_' or '-'"),
    ]:
        res = await api.admin.post(
            "/v1/memories", json={"workspace": workspace, "content": content, "reason": "r"}
        )
        assert res.status_code == 422
        assert res.json()["error"] == f"invalid body: {said}"
        ran = await ctl(api, "memory", "add", content, "-w", workspace, "--reason", "r")
        assert ran.code == 2
        assert said in " ".join(ran.stderr.split())


async def test_relate_takes_short_ids_names_the_operator_and_refuses_unknown_ids_with_exit_2(
    api: ApiHarness,
) -> None:
    first, second = await api.given(memory("the deploy key rotates"), memory("rotation is on Fridays"))
    made = await ctl_json(api, "memory", "relate", first[:8], second[:8], "--relation", "supports")
    await api.caught_up()
    [row] = [
        {"actor": e.actor, "a": e.payload.from_id, "b": e.payload.to_id}
        for e in api.pipeline.stream.events
        if isinstance(e, RelationshipAdded) and e.payload.relationship_id == made["relationship_id"]
    ]
    assert (row["actor"], row["a"], row["b"]) == ("operator:carol", first, second)
    again = await ctl(api, "memory", "relate", first[:8], second[:8], "--relation", "supports")
    assert again.code == 5, "an edge is added once (a second one is a conflict)"
    assert "already supports" in again.stderr
    unknown = await ctl(api, "memory", "relate", first, "abcdef12", "--relation", "supports")
    assert unknown.code == 4  # not_found
    assert "no memory abcdef12" in unknown.stderr
    assert "Traceback" not in unknown.stderr


async def test_an_already_past_valid_until_is_recorded_with_a_note(api: ApiHarness) -> None:
    added = await ctl(
        api, "memory", "add", "old news", "-w", "acme", "--valid-until", "2020-01-01", "--reason", "r"
    )
    assert added.code == 0, added.stderr
    assert "already past" in added.stderr
    proposed = await ctl(
        api, "fact", "propose", "The freeze held", "-w", "acme", "-d", "ops", "-t", "freeze",
        "--valid-until", "2020-01-01",
    )  # fmt: skip
    assert proposed.code == 0, proposed.stderr
    assert "already past" in proposed.stderr
    await api.caught_up()
    listed = await ctl_json(api, "fact", "list", "-w", "acme", "--all")
    # (an operator entry is a semantic memory too, so it lists among the facts)
    assert sorted((f["content"], f["status"]) for f in listed) == [
        ("The freeze held", "expired"),
        ("old news", "expired"),
    ]
    assert await ctl_json(api, "fact", "list", "-w", "acme") == []


async def test_superseding_a_memory_that_is_not_a_fact_says_so(api: ApiHarness) -> None:
    [episode] = await api.given(memory("we shipped", kind="episodic", epistemic_kind="observation"))
    ran = await ctl(api, "fact", "supersede", episode[:8], "we shipped twice", "-w", "acme")
    assert ran.code == 4  # not_found (docs/errors.md)
    assert f"{episode} is an episodic memory, not a fact" in " ".join(ran.stderr.split())
    empty = await ctl(api, "memory", "timeline", "-w", "nosuchws")
    assert empty.code == 0
    assert "no memories in workspace nosuchws" in empty.stdout


async def test_an_empty_answer_says_when_the_workspace_never_had_anything(api: ApiHarness) -> None:
    await api.given(memory("the deploy key rotates on Fridays"))
    listings = (
        ["memory", "list"], ["memory", "timeline"], ["fact", "list"], ["policy", "list"], ["grant", "list"],
        ["domains"], ["conflicts"], ["notes", "show", "-a", "ops-agent"], ["wm", "show", "-m", "ops"],
    )  # fmt: skip
    for args in listings:
        typo = await ctl(api, *args, "-w", "acmee")
        assert typo.code == 0, typo.stderr
        assert "nothing was ever recorded in workspace acmee: is the name right?" in typo.stdout, args
    searched = await ctl(api, "memory", "search", "deploy key", "-w", "acmee")
    assert "nothing was ever recorded in workspace acmee" in searched.stdout
    # A real workspace with nothing matching is just empty.
    known = await ctl(api, "memory", "list", "-w", "acme", "--kind", "procedural")
    assert "no matching memories" in known.stdout
    assert "nothing was ever recorded" not in known.stdout
    policies = await ctl(api, "policy", "list", "-w", "acme")
    assert "no policies" in policies.stdout
    assert "nothing was ever recorded" not in policies.stdout


async def test_decay_tick_publishes_one_tick_per_workspace_through_the_facade(api: ApiHarness) -> None:
    await api.given(memory("a fact"), memory("another", workspace="globex"))
    ticked = await ctl_json(api, "decay-tick", "-w", "acme")
    assert ticked == {"workspaces": ["acme"]}
    await api.caught_up()
    rows = [
        {"workspace": e.workspace} for e in api.pipeline.stream.events if e.type == "activation.decayed.v2"
    ]
    assert [r["workspace"] for r in rows] == ["acme"]
    no_embedder = await ctl(api, "memory", "embed-missing")
    assert no_embedder.code == 2
    assert "no embedder configured" in no_embedder.stderr


async def test_observe_dash_stores_what_standard_input_says(api: ApiHarness) -> None:
    text = "the deploy failed:\n  step 3 timed out — retried twice"
    ran = await ctl(api, "observe", "-", "-w", "acme", "-m", "ops", "--json", stdin=text.encode() + b"\n")
    assert ran.code == 0, ran.stderr
    observation = api.pipeline.candidates[json.loads(ran.stdout)["seq"] - 1]
    assert isinstance(observation, ObservationRecorded)
    assert observation.payload.content == text  # the final newline dropped, nothing else

    # At the limit it is stored; one character more is refused with what to do, before any publish.
    limit = await ctl(api, "observe", "-", "-w", "acme", "-m", "ops", "--json", stdin=b"x" * 32_000)
    assert limit.code == 0, limit.stderr
    over = await ctl(api, "observe", "-", "-w", "acme", "-m", "ops", stdin=b"x" * 32_001)
    assert over.code == 2
    assert "at most 32,000 are accepted" in over.stderr
    assert "Traceback" not in over.stderr
