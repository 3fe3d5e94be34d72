"""`noemactl` knowledge commands over the in-memory composition (tests/unit/cli_in_memory.py: the
commands in process, on the facade of the in-memory pipeline): facts proposed and superseded by a
short id, the conflict the conflicts decision settles by recency, grants and strict mode, a fact
listing for a role now and as of a time and a sequence before strict mode (the read model's history),
a policy refused for a role, notes and the preamble, retracting an episode and the audit entry it
leaves, consolidate and harmonize. Moved from tests/e2e/test_noemactl.py with its assertions kept (the
pipeline run where the e2e test polled); what needs `noemactl up`'s servers stays there: the workers
under their own NATS identities (no permission refused) and the replay of the stream into a fresh
PostgreSQL schema."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime, timedelta

import pytest

from tests.integration.api_harness import NOW
from tests.unit.api_in_memory import InMemoryApi, in_memory_api
from tests.unit.cli_in_memory import ctl, ctl_json, opened_in_process


class Ticking:
    """A clock that moves on a millisecond each time it is read: every event is stored at a time
    of its own, so the later of two facts is the more recent and a time names one point."""

    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


@pytest.fixture
async def api(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[InMemoryApi]:
    async with in_memory_api(Ticking()) as harness:
        opened_in_process(harness, monkeypatch)
        yield harness


async def test_knowledge_commands_facts_conflicts_grants_policies_notes(api: InMemoryApi) -> None:
    for day in ("Fridays", "Tuesdays"):
        proposed = await ctl(
            api, "fact", "propose", f"Deploys happen on {day}", "-w", "acme", "-d", "ops", "-t", "deploy-day"
        )
        assert proposed.code == 0, proposed.stderr
    await api.pipeline.run()  # the conflicts decision settles the contradiction
    conflicts = await ctl_json(api, "conflicts", "-w", "acme")
    assert [(c["winner_content"], c["loser_content"], c["rule"]) for c in conflicts] == [
        ("Deploys happen on Tuesdays", "Deploys happen on Fridays", "recency")
    ]
    # The 8-character id `fact list` shows is enough to supersede.
    short = conflicts[0]["winner_id"][:8]
    fixed = await ctl_json(api, "fact", "supersede", short, "Deploys happen on Wednesdays", "-w", "acme")
    assert fixed["superseded"] == conflicts[0]["winner_id"]
    unknown = await ctl(api, "fact", "supersede", "abc", "x", "-w", "acme")
    assert (unknown.code, "Traceback" in unknown.stderr) == (2, False)
    assert "no fact abc in workspace acme" in unknown.stderr
    # A `none` grant in compatible mode is kept, with a note that it hides nothing yet.
    noted = await ctl(api, "grant", "set", "intern", "hr", "none", "-w", "acme")
    assert noted.code == 0, noted.stderr
    assert "compatible mode" in noted.stderr
    assert "grant mode strict" in noted.stderr
    hr = await ctl(
        api, "fact", "propose", "Salary bands are reviewed in March", "-w", "acme", "-d", "hr", "-t", "pay"
    )
    assert hr.code == 0, hr.stderr
    before_strict = api.pipeline.clock().isoformat()  # the hr fact is stored by then
    for args in (("grant", "mode", "strict"), ("grant", "set", "intern", "ops", "read")):
        ran = await ctl(api, *args, "-w", "acme")
        assert ran.code == 0, ran.stderr
    grants = await ctl_json(api, "grant", "list", "-w", "acme")
    assert grants["access_mode"] == "strict"
    assert {(g["role"], g["domain"], g["access"]) for g in grants["grants"]} >= {("intern", "ops", "read")}
    seen = await ctl_json(api, "fact", "list", "-w", "acme", "--role", "intern")
    assert {f["domain"] for f in seen} == {"ops"}, "strict mode: hr is invisible to an intern"
    # As of just before strict mode (README's audit questions): the intern read every domain.
    then = await ctl_json(api, "fact", "list", "-w", "acme", "--role", "intern", "--as-of", before_strict)
    assert {f["domain"] for f in then["items"]} == {"ops", "hr"}
    assert then["as_of"]["time"] == before_strict
    # Read from the read model's history: nothing was built for the point, and the same point
    # asked by its sequence answers the same.
    by_seq = str(then["as_of"]["seq"])
    assert (await ctl_json(api, "fact", "list", "-w", "acme", "--role", "intern", "--as-of", by_seq))[
        "items"
    ] == then["items"]

    refused = await ctl(api, "policy", "propose", "Deploy any day", "-w", "acme", "-d", "ops", "-r", "intern")
    assert refused.code == 3
    assert "not permitted" in refused.stderr
    assert "Traceback" not in refused.stderr
    for written in (
        ("policy", "propose", "Never deploy without a rollback plan", "-w", "acme", "-d", "ops"),
        ("notes", "set", "halfway through the auth refactor", "-w", "acme", "-a", "ops-agent"),
    ):
        ran = await ctl(api, *written)
        assert ran.code == 0, ran.stderr
    notes = await ctl_json(api, "notes", "show", "-w", "acme", "-a", "ops-agent")
    assert notes["notes"] == "halfway through the auth refactor"
    preamble = await ctl(
        api, "preamble", "plan the next deploy of the billing service",
        "-w", "acme", "-a", "ops-agent", "-r", "intern",
    )  # fmt: skip
    assert preamble.code == 0, preamble.stderr
    assert "- [ops] Never deploy without a rollback plan" in preamble.stdout
    assert "halfway through the auth refactor" in preamble.stdout

    bad = await ctl(api, "grant", "set", "intern", "ops", "admin", "-w", "acme")
    assert bad.code == 2
    assert "access must be one of" in bad.stderr

    observed = await ctl(
        api, "observe", "the billing migration finished on the primary cluster", "-w", "acme", "-m", "ops"
    )
    assert observed.code == 0, observed.stderr
    await api.pipeline.run()  # attend stores the episode and the working memory
    wm = await ctl_json(api, "wm", "show", "-w", "acme", "-m", "ops")
    assert wm["items"][0]["content"] == "the billing migration finished on the primary cluster"
    [episode] = (await ctl_json(api, "memory", "list", "-w", "acme", "-m", "ops"))["items"]
    retracted = await ctl(api, "memory", "retract", episode["id"][:8], "--reason", "wrong cluster")
    assert retracted.code == 0, retracted.stderr
    shown = await ctl_json(api, "memory", "show", episode["id"])
    assert shown["memory"]["status"] == "retracted"
    [action] = (await ctl_json(api, "audit", "--type", "operator.action", "-w", "acme"))["items"][:1]
    assert (action["payload"]["action"], action["payload"]["reason"]) == ("retract", "wrong cluster")
    again = await ctl(api, "memory", "retract", episode["id"], "--reason", "again")
    assert again.code == 5  # conflict (docs/errors.md)
    assert "cannot retract" in again.stderr
    assert (await ctl_json(api, "consolidate", "-w", "acme"))["merged"] == []
    assert (await ctl_json(api, "harmonize", "-w", "acme"))["conflicts"] == []


async def test_an_as_of_point_the_stream_holds_no_state_for_is_not_found(api: InMemoryApi) -> None:
    before = api.pipeline.clock()
    proposed = await ctl(
        api, "fact", "propose", "Deploys happen on Fridays", "-w", "acme", "-d", "ops", "-t", "day"
    )
    assert proposed.code == 0, proposed.stderr
    assert "Traceback" not in proposed.stderr  # the harness prints only an exception that escaped
    last = len(api.pipeline.stream.events)
    for point, said in [
        (before.isoformat(), "the event stream had stored nothing by then"),
        ((before + timedelta(days=1)).isoformat(), "that is in the future"),
        (str(last + 1), f"as of seq {last + 1}: the event stream ends at seq {last}"),
    ]:
        ran = await ctl(api, "fact", "list", "-w", "acme", "--as-of", point)
        assert ran.code == 4, (point, ran.stdout, ran.stderr)  # not_found (docs/errors.md)
        assert said in " ".join(ran.stderr.split())
        assert "Traceback" not in ran.stderr
    listed = await ctl_json(api, "fact", "list", "-w", "acme", "--as-of", str(last))
    assert [f["content"] for f in listed["items"]] == ["Deploys happen on Fridays"]
