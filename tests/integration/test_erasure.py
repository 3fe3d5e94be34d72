"""Erasure on real servers (docs/privacy.md): content observed about a subject becomes a memory, a
recall and a dead letter; its text is sealed in the event stream from the start; ``noemactl erase
--subject`` then leaves no readable copy in the read model, the events, the observation stream or the
dead letters, keeps the audit record, leaves the rest of the workspace as it was, and a replay still
matches the live read model."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Sequence
from contextlib import AsyncExitStack
from pathlib import Path

import msgspec
import pytest
from mcp import ClientSession

from noema.adapters.erasure_streams import scan
from noema.adapters.jetstream import EventPublisher, stream_last_seq
from noema.adapters.postgres.keyring import PostgresKeyring
from noema.adapters.postgres.knowledge import PostgresKnowledge
from noema.application.knowledge import Caller, Knowledge
from noema.application.sealing import KeyringSealer
from noema.client import publish_observation
from noema.composition.instance import connected_knowledge
from noema.domain.attention import memory_id_for
from noema.domain.sealed_events import KeyRequest
from noema.ids import new_id
from noema.ports import ConcurrentWrite
from noema.runtime.wiring import sealer
from noema_attend.service import build as build_attend
from noema_events import Event, NotesUpdated, NotesUpdatedPayload
from noema_retrieve.service import build as build_retrieve
from tests.integration.api_harness import ApiHarness, api, memory
from tests.integration.cli_process import ctl, ctl_json
from tests.integration.test_mcp import over_stdio
from tests.mcp_results import ok
from tests.support import assert_eventually, envelope

pytestmark = [pytest.mark.integration, pytest.mark.slow]
__all__ = ["api"]

MARKER = "zqxmarker4711"
PERSON = "person:4711"


async def _stream_holds(api: ApiHarness, stream: str, subjects: str, needle: bytes) -> int:
    return sum([needle in m.data async for m in scan(api.h.nc, stream, subjects)])


async def observe_the_person(api: ApiHarness) -> str:
    """Publish an observation tagged with ``PERSON`` whose text holds ``MARKER``; returns its id."""
    about = new_id()
    await publish_observation(
        api.h.js, f"{MARKER}: Ann's phone number is 555-0199", workspace="acme", mind="ops",
        observation_id=about, subjects=[PERSON], topology=api.h.topology,
    )  # fmt: skip
    return about


async def _why(mcp: ClientSession, item: str) -> str:
    return json.dumps(ok(await mcp.call_tool("why", {"id": item})))


async def _memory_count(api: ApiHarness, where: str, *args: object) -> int:
    return int(await api.h.pool.fetchval(f"SELECT count(*) FROM memories WHERE {where}", *args))


async def test_erasing_a_subject_leaves_no_readable_copy_and_keeps_the_record(
    api: ApiHarness, tmp_path: Path
) -> None:
    async with AsyncExitStack() as stack:  # the MCP server, once started
        await _erase_a_subject(api, tmp_path, stack)


async def _erase_a_subject(api: ApiHarness, tmp_path: Path, stack: AsyncExitStack) -> None:
    h = api.h
    await h.start(build_attend)
    about = await observe_the_person(api)
    other = new_id()
    await publish_observation(
        h.js, "the deploy key rotates on Fridays", workspace="acme", mind="ops",
        observation_id=other, topology=h.topology,
    )  # fmt: skip
    memory, kept = memory_id_for(about), memory_id_for(other)
    await assert_eventually(lambda: _memory_count(api, "id = ANY($1::text[])", [memory, kept]), timeout=90)
    await h.start(build_retrieve)
    await publish_observation(
        h.js, f"what is the {MARKER} phone number again", workspace="acme", mind="ops",
        subjects=[PERSON], topology=h.topology,
    )  # fmt: skip
    await assert_eventually(lambda: _memory_count(api, "id = $1 AND recall_count = 1", memory), timeout=90)
    # Broken bytes that name the subject: attend dead-letters them as they are.
    await h.nc.publish(f"{h.topology.prefix}.obs.acme.ops", f'{{"broken": "{MARKER} {PERSON}'.encode())
    await h.nc.flush()
    dead = h.topology.dead_letter_stream, h.topology.dead_letter_subjects
    await assert_eventually(lambda: _stream_holds(api, *dead, MARKER.encode()), timeout=90)
    fact = {"workspace": "acme", "domain": "people", "topic": "ann-phone", "reason": "from the call"}
    proposed = await api.admin.post(
        "/v1/facts", json={**fact, "content": f"Ann ({MARKER}) is on 555-0199", "subjects": [PERSON]}
    )
    assert proposed.status_code in (200, 202), proposed.text
    fact_id = proposed.json()["memory_id"]
    await api.caught_up()

    # Sealed from the start: the events (stream and table) never held the text in the clear.
    events = h.topology.event_stream, h.topology.event_subjects
    assert await _stream_holds(api, *events, MARKER.encode()) == 0
    assert (
        await h.pool.fetchval("SELECT count(*) FROM events WHERE payload::text LIKE $1", f"%{MARKER}%") == 0
    )
    sealed = await h.pool.fetchval(
        "SELECT payload->>'content' FROM events WHERE type = 'memory.created.v1' "
        "AND payload->>'memory_id' = $1",
        memory,
    )
    assert sealed.startswith(f"nsl1:{memory}:")
    # … while the read model has it, readable, and so does the API.
    assert await _memory_count(api, "content LIKE $1", f"%{MARKER}%") >= 1
    before = (await api.admin.get(f"/v1/memories/{kept}")).json()
    search = {"q": MARKER, "workspace": "acme"}
    assert memory in [
        r["id"] for r in (await api.admin.get("/v1/memories/search", params=search)).json()["results"]
    ]

    # Operators read the audit trail and `why` with the content opened (the keyring's keys).
    audit = {"workspace": "acme", "limit": "100"}
    assert MARKER in (await api.admin.get("/v1/audit", params=audit)).text
    why = await api.admin.get(f"/v1/why/{memory}", params={"workspace": "acme"})
    assert MARKER in why.text
    # An agent's MCP server (running across the erasure, as a host keeps it) finds it too.
    mcp = await stack.enter_async_context(over_stdio(h, tmp_path / "mcp.log"))
    assert MARKER in json.dumps(ok(await mcp.call_tool("search_memory", {"query": MARKER})))
    assert MARKER in await _why(mcp, memory)

    before_erasure = await stream_last_seq(h.js, h.topology.event_stream)
    kept_replay = await ctl(api, "replay", "--keep")  # a frozen copy of the read model
    # Another instance's copy in the same database (its own live schema) is none of this erasure's.
    other = f"replay_other{new_id().replace('-', '')[:12]}_1_1"
    await h.pool.execute(f"CREATE SCHEMA {other}")
    for table in ("memories", "memory_embeddings", "working_memory", "memory_terms"):
        await h.pool.execute(f"CREATE TABLE {other}.{table} (LIKE {h.settings.db_schema}.{table})")
    await h.pool.execute(f"INSERT INTO {other}.memories SELECT * FROM memories WHERE id = $1", memory)
    assert kept_replay.code == 0, kept_replay.stderr

    erased = await ctl_json(api, "erase", "-w", "acme", "--subject", PERSON, "--reason", "GDPR request 812")

    assert erased["keys_destroyed"] is True
    assert memory in erased["memory_ids"]
    assert fact_id in erased["memory_ids"]
    assert kept not in erased["memory_ids"]
    assert erased["observations_deleted"] == 3  # the two tagged, and the broken bytes naming the subject
    assert erased["dead_letters_deleted"] == 1
    await api.caught_up()
    assert await _memory_count(api, "content LIKE $1", f"%{MARKER}%") == 0
    [copy] = erased["copies_blanked"]
    assert MARKER in await h.pool.fetchval(f"SELECT content FROM {other}.memories")
    await h.pool.execute(f"DROP SCHEMA {other} CASCADE")
    assert copy.startswith("replay_")
    assert (
        await h.pool.fetchval(f"SELECT count(*) FROM {copy}.memories WHERE content LIKE $1", f"%{MARKER}%")
        == 0
    )
    assert await h.pool.fetchval(f"SELECT count(*) FROM {copy}.memories WHERE erased_at IS NOT NULL") >= 2
    assert await _memory_count(api, "id = $1 AND erased_at IS NOT NULL AND content = ''", memory) == 1
    for stream, subjects in (
        events,
        dead,
        (h.topology.observation_stream, h.topology.observation_subjects),
    ):
        assert await _stream_holds(api, stream, subjects, MARKER.encode()) == 0, stream
    assert (
        await h.pool.fetchval(
            "SELECT count(*) FROM memory_terms WHERE workspace = 'acme' AND lexeme LIKE 'zqx%'"
        )
        == 0
    )
    # Every surface: search finds nothing, show says erased, the kept memory is as it was.
    found = (await api.admin.get("/v1/memories/search", params=search)).json()
    assert found["results"] == []
    facts = await api.admin.get("/v1/facts", params={"workspace": "acme"})
    assert facts.status_code == 200
    assert MARKER not in facts.text
    shown = await api.admin.get(f"/v1/memories/{memory}")
    assert shown.status_code == 200
    assert MARKER not in shown.text
    # (the events citing it may also hold the erased memory's gist: that part is gone from them)
    assert (await api.admin.get(f"/v1/memories/{kept}")).json()["memory"] == before["memory"]
    after = await api.admin.get("/v1/audit", params=audit)
    assert after.status_code == 200
    assert MARKER not in after.text
    assert "content.erased.v1" in after.text
    why = await api.admin.get(f"/v1/why/{memory}", params={"workspace": "acme"})
    assert why.status_code == 200
    assert MARKER not in why.text
    assert ok(await mcp.call_tool("search_memory", {"query": MARKER}))["results"] == []
    assert MARKER not in await _why(mcp, memory)
    assert "memory.created.v1" in why.text  # the chain is still there, its text gone
    # The record stays: who, why, what — without the content.
    [record] = await h.pool.fetch("SELECT actor, payload FROM events WHERE type = 'content.erased.v1'")
    payload = json.loads(record["payload"])
    assert (record["actor"], payload["scope"], payload["target"], payload["reason"]) == (
        "operator:carol",
        "subject",
        PERSON,
        "GDPR request 812",
    )
    assert MARKER not in record["payload"]
    # As of a point before the erasure, the memory was there; now it reads as erased even then.
    then = await ctl_json(api, "memory", "show", memory, "--as-of", str(before_erasure))
    assert then["memory"]["content"] == ""
    assert then["memory"]["erased_at"] is not None
    assert then["memory"]["status"] == "erased"
    # Working memory still holds it until it decays out: marked erased, not shown as empty.
    wm = await ctl_json(api, "wm", "show", "-w", "acme", "-m", "ops")
    [held] = [i for i in wm["items"] if i["memory_id"] == memory]
    assert (held["content"], held["erased_at"] is not None) == ("", True)
    wm_api = await api.admin.get("/v1/working-memory", params={"workspace": "acme", "mind": "ops"})
    assert [i["erased_at"] is not None for i in wm_api.json()["items"] if i["memory_id"] == memory] == [True]
    assert "(content erased at" in (await ctl(api, "wm", "show", "-w", "acme", "-m", "ops")).stdout
    assert MARKER not in json.dumps(then)
    logged = await ctl_json(api, "audit", "--type", "content.erased", "-w", "acme")
    assert [e["payload"]["target"] for e in logged["items"]] == [PERSON]
    # Replay opens what it still can and reads the rest as erased: the same read model.
    replayed = await ctl(api, "replay")
    assert replayed.code == 0, replayed.stdout + replayed.stderr
    # A second erasure of the same subject finds nothing left to delete, and says so.
    again = await ctl(api, "erase", "-w", "acme", "--subject", "person:nobody", "--reason", "x")
    assert again.code == 4, again.stderr


async def test_erase_refuses_to_guess_what_to_erase(api: ApiHarness) -> None:
    for args in ([], ["--subject", "a", "--memory", "b"]):
        ran = await ctl(api, "erase", "-w", "acme", *args, "--reason", "x")
        assert ran.code == 2, ran.stderr
        assert "exactly one of --subject" in ran.stderr
    spaced = await ctl(api, "erase", "-w", "acme", "--subject", "Ann Smith", "--reason", "x")
    assert spaced.code == 2, spaced.stderr
    assert "letters, digits" in spaced.stderr


async def test_operators_erase_through_the_api_within_their_workspace(api: ApiHarness) -> None:
    [secret, kept] = await api.given(
        memory(f"the staging password is {MARKER}"), memory("the deploy key rotates on Fridays")
    )
    [elsewhere] = await api.given(memory("a globex memory", workspace="globex"))
    body = {"workspace": "acme", "scope": "memory", "target": secret, "reason": "leaked credential"}

    assert (await api.acme.post("/v1/erasures", json={**body, "workspace": "globex"})).status_code == 403
    unknown = await api.admin.post("/v1/erasures", json={**body, "scope": "everything"})
    assert unknown.status_code in (400, 422)
    assert "scope" in unknown.text
    missing = await api.admin.post("/v1/erasures", json={**body, "target": "no-such-memory"})
    assert missing.status_code == 404
    erased = await api.acme.post("/v1/erasures", json=body)

    assert erased.status_code == 200, erased.text
    assert (erased.json()["memory_ids"], erased.json()["keys_destroyed"]) == ([secret], True)
    await api.caught_up()
    shown = (await api.admin.get(f"/v1/memories/{secret}")).json()["memory"]
    assert shown["content"] == ""
    assert MARKER not in json.dumps(shown)
    kept_shown = (await api.admin.get(f"/v1/memories/{kept}")).json()["memory"]
    assert kept_shown["content"].endswith("Fridays")
    # Erased, not an active memory that happens to be empty: every view says when, and text says so.
    assert shown["erased_at"] is not None
    assert kept_shown["erased_at"] is None
    listed = (await api.admin.get("/v1/memories", params={"workspace": "acme"})).json()["items"]
    assert {m["id"]: m["erased_at"] for m in listed} == {secret: shown["erased_at"], kept: None}
    assert (await ctl_json(api, "memory", "show", secret))["memory"]["erased_at"] == shown["erased_at"]
    [row] = [m for m in (await ctl_json(api, "memory", "list", "-w", "acme"))["items"] if m["id"] == secret]
    assert row["erased_at"] == shown["erased_at"]
    text = await ctl(api, "memory", "show", secret)
    assert f"(content erased at {shown['erased_at'][:19]}" in text.stdout, text.stdout
    assert "None" not in text.stdout  # absent domain, topic, repo show as "-"
    assert "(content erased at" in (await ctl(api, "memory", "list", "-w", "acme")).stdout
    assert (await api.admin.get(f"/v1/memories/{elsewhere}")).json()["memory"]["content"] == "a globex memory"


class _RewrittenAfterFirstRead:
    """The publisher, with another session's write of the notes landing right after the first read."""

    def __init__(self, inner: EventPublisher, rewrite: Awaitable[None]) -> None:
        self._inner = inner
        self._rewrite = rewrite
        self.reads = 0
        self.refused: list[str] = []

    async def publish(self, events: Sequence[Event]) -> int:
        return await self._inner.publish(events)

    async def last_on_subject(self, like: Event) -> tuple[int, Event] | None:
        last = await self._inner.last_on_subject(like)
        self.reads += 1
        if self.reads == 1:
            await self._rewrite
        return last

    async def publish_expecting(self, event: Event, expected_last: int) -> int:
        try:
            return await self._inner.publish_expecting(event, expected_last)
        except ConcurrentWrite:
            self.refused.append(event.id)
            raise


async def test_erasing_an_agents_notes_removes_every_version_and_they_start_afresh(api: ApiHarness) -> None:
    h = api.h
    # The keyring is one per database, shared by every test's schema: an agent name of this test's own.
    name = f"ops-{new_id()[:8]}"
    k = connected_knowledge(h.pool, h.nc, h.topology)
    agent, other = Caller("acme", name), Caller("acme", "dev-agent")
    await k.update_my_notes(agent, f"call {MARKER} back about 555-0199")
    # A third version, appended while another session rewrote the notes (a second one): the append's
    # first attempt is refused; its key (of an id never stored) is linked to the notes all the same.
    publisher = EventPublisher(h.nc, h.topology, sealer(h.pool))
    rewrite = k.update_my_notes(agent, f"call {MARKER} back about 555-0199 today")
    contended = _RewrittenAfterFirstRead(publisher, rewrite)
    appending = Knowledge(PostgresKnowledge(h.pool), publisher, appends=contended)
    await appending.record_observation(agent, f"{MARKER} asked for the invoice")
    assert contended.reads == 2, "refused once, then appended"
    await k.update_my_notes(other, "halfway through the auth refactor")
    await api.caught_up()
    versions = await h.pool.fetch("SELECT id FROM events WHERE type = 'notes.updated.v1' AND mind = $1", name)
    notes = {"workspace": "acme", "agent": name}
    assert MARKER in (await api.admin.get("/v1/notes", params=notes)).json()["notes"]
    events = h.topology.event_stream, h.topology.event_subjects
    assert await _stream_holds(api, *events, MARKER.encode()) == 0  # sealed from the start
    assert (
        await h.pool.fetchval("SELECT count(*) FROM events WHERE payload::text LIKE $1", f"%{MARKER}%") == 0
    )

    # Notes written before sealing existed (plain in the stream, where they stay: docs/privacy.md's
    # limits): blanked in the read model all the same.
    plain = NotesUpdated(
        **envelope("acme", "old-agent", actor="old-agent"),
        payload=NotesUpdatedPayload(agent="old-agent", notes="notes from an older release"),
    )
    await EventPublisher(h.nc, h.topology).publish([plain])
    # An append that read the notes before the erasure (to add a line) must not publish them again.
    probe = NotesUpdated(**envelope("acme", name), payload=NotesUpdatedPayload(agent=name, notes=""))
    read = await publisher.last_on_subject(probe)
    assert read is not None
    await api.caught_up()
    refused = await ctl(api, "erase", "-w", "acme", "--notes", "ops agent", "--reason", "x")
    assert refused.code == 2, refused.stderr
    assert "agent name" in refused.stderr
    erased = await ctl_json(api, "erase", "-w", "acme", "--notes", name, "--reason", "asked to forget")

    assert erased["keys_destroyed"] is True
    assert len(versions) == 3
    assert len(contended.refused) == 1
    assert erased["key_ids"] == sorted([*(v["id"] for v in versions), *contended.refused]), (
        "every version's key and the refused attempt's, and no other"
    )
    assert erased["memory_ids"] == []
    stale = msgspec.structs.replace(read[1], id=new_id())
    with pytest.raises(ConcurrentWrite):  # the erasure wrote an empty version first
        await publisher.publish_expecting(stale, read[0])
    await api.caught_up()
    assert (await api.admin.get("/v1/notes", params=notes)).json()["notes"] == ""
    older = await ctl_json(api, "erase", "-w", "acme", "--notes", "old-agent", "--reason", "asked to forget")
    assert older["key_ids"] == []  # nothing sealed to destroy; the read model is blanked all the same
    await api.caught_up()
    assert (await api.admin.get("/v1/notes", params={**notes, "agent": "old-agent"})).json()["notes"] == ""
    kept = (await api.admin.get("/v1/notes", params={**notes, "agent": "dev-agent"})).json()
    assert kept["notes"] == "halfway through the auth refactor"
    audit = await api.admin.get("/v1/audit", params={"workspace": "acme", "limit": "100"})
    assert audit.status_code == 200
    assert MARKER not in audit.text
    assert "notes.updated.v1" in audit.text  # the versions are still recorded, their text gone
    # The agent writes on: a new version under a new key, the erased lines not brought back.
    line = await k.record_observation(agent, "sent the invoice")
    await api.caught_up()
    assert (await api.admin.get("/v1/notes", params=notes)).json()["notes"] == line
    replayed = await ctl(api, "replay")
    assert replayed.code == 0, replayed.stdout + replayed.stderr
    nothing = await ctl(api, "erase", "-w", "acme", "--notes", "nobody", "--reason", "x")
    assert nothing.code == 4, nothing.stderr


class _ErasedAfterFirstKey(PostgresKeyring):
    """The keyring, with the agent's notes erased right after the first key an append seals under
    was created (so that key is among those the erasure destroys, and the append's publish is refused)."""

    def __init__(self, api: ApiHarness, agent: str) -> None:
        super().__init__(api.h.pool)
        self._api, self._agent = api, agent
        self.erased: list[str] = []

    async def ensure(self, requests: Sequence[KeyRequest]) -> dict[str, bytes | None]:
        keys = await super().ensure(requests)
        if not self.erased:
            erased = await ctl_json(
                self._api, "erase", "-w", "acme", "--notes", self._agent, "--reason", "asked to forget"
            )
            assert erased["keys_destroyed"] is True
            self.erased = erased["key_ids"]
        return keys


async def test_an_append_racing_an_erasure_of_the_notes_lands_under_a_key_of_its_own(api: ApiHarness) -> None:
    h = api.h
    name = f"ops-{new_id()[:8]}"  # the keyring is shared by every test's schema
    agent = Caller("acme", name)
    await connected_knowledge(h.pool, h.nc, h.topology).update_my_notes(agent, f"call {MARKER} back")
    await api.caught_up()
    racing = _ErasedAfterFirstKey(api, name)
    publisher = EventPublisher(h.nc, h.topology, KeyringSealer(racing))
    line = await Knowledge(PostgresKnowledge(h.pool), publisher, appends=publisher).record_observation(
        agent, "sent the invoice"
    )
    assert len(racing.erased) == 2, "the first version's key and the refused attempt's"
    await api.caught_up()
    notes = (await api.admin.get("/v1/notes", params={"workspace": "acme", "agent": name})).json()
    assert notes["notes"] == line, "the line, readable: not sealed under the key the erasure destroyed"


async def test_a_data_key_is_its_workspaces_and_an_id_reused_elsewhere_gets_none(api: ApiHarness) -> None:
    # An agent of another workspace may reuse an observation id (so the memory id derived from
    # it): its content must not be sealed under, linked to or erased with the first one's key.
    keyring = PostgresKeyring(api.h.pool)
    mine = new_id()
    [key] = (await keyring.ensure([KeyRequest(mine, "acme", ("person:1",))])).values()
    assert key is not None
    theirs = await keyring.ensure([KeyRequest(mine, "globex", ("person:2",), ("obs-1",))])
    assert theirs == {mine: None}  # sealed as erased: nothing of globex's under acme's key
    assert await keyring.linked("globex", "subject", ["person:2"]) == set()
    assert await keyring.linked("acme", "subject", ["person:1"]) == {mine}
    assert (await keyring.ensure([KeyRequest(mine, "acme")]))[mine] == key  # acme's, unchanged


async def test_an_erased_memory_reads_erased_refuses_every_change_and_corrections_go_with_their_subject(
    api: ApiHarness,
) -> None:
    h = api.h
    await h.start(build_attend)
    first = memory_id_for(await observe_the_person(api))
    await assert_eventually(lambda: _memory_count(api, "id = $1", first), timeout=90)
    fact = {"workspace": "acme", "domain": "people", "topic": "ann-phone", "reason": "from the call"}
    proposed = await api.admin.post(
        "/v1/facts", json={**fact, "content": f"Ann ({MARKER}) is on 555-0199", "subjects": [PERSON]}
    )
    assert proposed.status_code in (200, 202), proposed.text
    fact_id = proposed.json()["memory_id"]
    await api.caught_up()
    # A correction of content about the subject is about the subject too: it carries its tag (the
    # fact cites no observation an erasure could find it by).
    copy = (
        await ctl_json(
            api, "memory", "correct", fact_id, f"Ann ({MARKER}) is on 555-0100", "--reason", "new number"
        )
    )["memory_id"]
    await api.caught_up()
    erased = await ctl_json(api, "erase", "-w", "acme", "--subject", PERSON, "--reason", "GDPR request 813")
    assert sorted(erased["memory_ids"]) == sorted([first, fact_id, copy])
    await api.caught_up()
    assert await _memory_count(api, "content LIKE $1", f"%{MARKER}%") == 0

    # Erased on every surface: its status, the active listing, the CLI, MCP's search filters.
    for mid in (first, fact_id, copy):
        shown = (await api.admin.get(f"/v1/memories/{mid}")).json()["memory"]
        assert (shown["status"], shown["content"]) == ("erased", "")
    active = await ctl_json(api, "memory", "list", "-w", "acme", "--status", "active")
    assert {first, fact_id, copy} & {m["id"] for m in active["items"]} == set()
    listed = await ctl_json(api, "memory", "list", "-w", "acme", "--status", "erased")
    assert {m["id"] for m in listed["items"]} == {first, fact_id, copy}
    # Nothing can be done to it: 409 over HTTP, exit 5 from noemactl, with the reason.
    for action in ("retract", "archive", "restore"):
        res = await api.admin.post(f"/v1/memories/{copy}/{action}", json={"reason": "x"})
        assert res.status_code == 409, (action, res.text)
        assert "was erased" in res.json()["error"]
    fix = {"content": "Ann: 555-0111", "reason": "x"}
    res = await api.admin.post(f"/v1/memories/{copy}/correct", json=fix)
    assert res.status_code == 409, res.text
    assert "was erased" in res.json()["error"]
    for args in (
        ["memory", "correct", copy, "Ann's number is 555-0111", "--reason", "x"],
        ["memory", "retract", copy, "--reason", "x"],
        ["memory", "relate", copy, first, "--relation", "supports"],
    ):
        ran = await ctl(api, *args)
        assert ran.code == 5, (args, ran.stdout, ran.stderr)
        assert "was erased" in ran.stderr, args

    # New content about the subject, corrected, then erased again: only the new is erased and
    # counted, and nothing readable of it is left anywhere.
    later = new_id()
    await publish_observation(
        h.js, f"{MARKER} later: Ann moved to Lyon", workspace="acme", mind="ops",
        observation_id=later, subjects=[PERSON], topology=h.topology,
    )  # fmt: skip
    second = memory_id_for(later)
    await assert_eventually(lambda: _memory_count(api, "id = $1", second), timeout=90)
    fixed = f"{MARKER} later: Ann lives in Lyon"
    copy2 = (await ctl_json(api, "memory", "correct", second, fixed, "--reason", "r"))["memory_id"]
    await api.caught_up()
    again = await ctl_json(api, "erase", "-w", "acme", "--subject", PERSON, "--reason", "GDPR request 814")
    assert sorted(again["memory_ids"]) == sorted([second, copy2])
    assert again["observations_deleted"] == 1
    await api.caught_up()
    assert await _memory_count(api, "content LIKE $1", f"%{MARKER}%") == 0
    assert await _memory_count(api, "status = 'erased'") == 5
    for stream, subjects in (
        (h.topology.event_stream, h.topology.event_subjects),
        (h.topology.observation_stream, h.topology.observation_subjects),
        (h.topology.dead_letter_stream, h.topology.dead_letter_subjects),
    ):
        assert await _stream_holds(api, stream, subjects, MARKER.encode()) == 0, stream
    # A third finds nothing new and says it was erased before, counting nothing again.
    third = await ctl(api, "erase", "-w", "acme", "--subject", PERSON, "--reason", "x")
    assert third.code == 4, third.stderr
    assert "was erased before" in third.stderr
    # Replay gives the same statuses (the projection of content.erased sets them).
    replayed = await ctl(api, "replay")
    assert replayed.code == 0, replayed.stdout + replayed.stderr


async def test_an_erasure_succeeds_in_a_workspace_whose_stream_holds_a_poison_message(
    api: ApiHarness,
) -> None:
    h = api.h
    about = await observe_the_person(api)
    # Any agent may publish this on its own subject: 10 KB, nested 5,000 levels, naming the subject.
    poison = f'{{"payload": {{"subjects": ["{PERSON}"], "deep": '.encode() + b"[" * 5_000 + b"]" * 5_000
    await h.nc.publish(f"{h.topology.prefix}.obs.acme.mallory", poison + b"}}")
    other = b'{"payload": {"deep": ' + b"{" * 5_000  # about nobody: it stays
    await h.nc.publish(f"{h.topology.prefix}.obs.acme.mallory", other)
    await h.nc.flush()
    observations = h.topology.observation_stream, h.topology.observation_subjects
    await assert_eventually(lambda: _stream_holds(api, *observations, b"{{{{"), timeout=30)
    body = {"workspace": "acme", "scope": "subject", "target": PERSON, "reason": "GDPR request 815"}

    erased = await api.admin.post("/v1/erasures", json=body)

    assert erased.status_code == 200, erased.text
    assert erased.json()["observation_ids"] == [about]
    assert erased.json()["observations_deleted"] == 2  # the observation and the poison naming it
    assert await _stream_holds(api, *observations, MARKER.encode()) == 0
    assert await _stream_holds(api, *observations, PERSON.encode()) == 0
    assert await _stream_holds(api, *observations, b"{{{{") == 1
