"""Dead letters on real NATS + PostgreSQL: a refused observation is listed and shown alike by
`noemactl dlq` and `/v1/dead-letters`, retried after a fix into a memory, dropped with an audited
operator action; big originals are kept truncated; only tokens for all workspaces may touch them."""

from __future__ import annotations

import hashlib
import time
from dataclasses import replace
from typing import Any

import pytest
from nats.aio.msg import Msg
from nats.js.api import StreamConfig, StreamSource

from noema.adapters.deadletters import DeadLetterQuery, DeadLetters
from noema.adapters.dlq_policy import DeadLetterPolicy
from noema.adapters.dlq_upgrade import MOVE_SUFFIX, make_deletable
from noema.adapters.jetstream import EventPublisher, dead_letter, dead_letter_stream_config, ensure_streams
from noema.client import build_observation
from noema_attend.service import build as build_attend
from noema_events import encode_event
from tests.conftest import Harness
from tests.integration.api_harness import ApiHarness, api
from tests.integration.cli_process import ctl, ctl_json
from tests.support import assert_eventually, keyword_search

pytestmark = [pytest.mark.integration, pytest.mark.slow]
__all__ = ["api"]  # the fixture, imported for pytest


async def listed(api: ApiHarness, count: int, **params: str) -> list[dict[str, Any]]:
    """The API's listing once it holds ``count`` dead letters."""

    async def check() -> list[dict[str, Any]] | None:
        res = await api.admin.get("/v1/dead-letters", params=params)
        assert res.status_code == 200, res.text
        items: list[dict[str, Any]] = res.json()["items"]
        return items if len(items) == count else None

    found: list[dict[str, Any]] = await assert_eventually(check, timeout=20)
    return found


def refused_by_hand(h: Harness, data: bytes, subject: str, stream_seq: int) -> Msg:
    """A message as a worker's consumer receives it (its metadata read from the ack subject), to
    dead-letter by hand what a buggy worker would have refused."""
    stream = h.topology.observation_stream
    ts = time.time_ns()
    reply = f"$JS.ACK.{stream}.{h.topology.durable('attend')}.1.{stream_seq}.{stream_seq}.{ts}.0"
    return Msg(h.nc, subject=subject, reply=reply, data=data)


async def operator_actions(api: ApiHarness) -> list[dict[str, Any]]:
    res = await api.admin.get("/v1/audit", params={"type": "operator.action"})
    assert res.status_code == 200, res.text
    return [e for e in res.json()["items"] if e["payload"]["action"].startswith("dlq_")]


async def test_a_refused_observation_is_listed_shown_and_dropped_alike_by_noemactl_and_the_api(
    api: ApiHarness,
) -> None:
    await api.h.start(build_attend)
    subject = api.h.topology.observation_subject("acme", "ops")
    ack = await api.h.js.publish(subject, b"{this is not json \xff\x00[bold]")
    [item] = await listed(api, 1)

    assert item["source"] == "attend"
    assert item["original_subject"] == subject
    assert item["original_seq"] == ack.seq
    assert item["workspace"] == "acme"
    assert "JSON" in item["reason"]
    assert item["size"] == item["stored_size"] == len(b"{this is not json \xff\x00[bold]")
    assert not item["truncated"]
    assert not item["utf8"]
    assert item["preview"] == "{this is not json \\xff\\x00[bold]"  # printable, nothing lost

    cli = await ctl_json(api, "dlq", "list")
    assert cli == (await api.admin.get("/v1/dead-letters")).json()
    assert await ctl_json(api, "dlq", "list", "--source", "attend") == cli
    assert (await ctl_json(api, "dlq", "list", "--source", "projector"))["items"] == []
    assert (await ctl_json(api, "dlq", "list", "--since", "2999-01-01"))["items"] == []

    seq = str(item["seq"])
    shown = await ctl_json(api, "dlq", "show", seq)
    assert shown == (await api.admin.get(f"/v1/dead-letters/{seq}")).json()
    assert shown["headers"]["Noema-Original-Subject"] == subject
    table = await ctl(api, "dlq", "show", seq)
    assert table.code == 0
    assert "[bold]" in table.stdout

    dropped = await ctl(api, "dlq", "drop", seq, "--reason", "junk from a load test")
    assert dropped.code == 0, dropped.stderr
    assert f"dead letter {seq} dropped" in dropped.stdout
    assert (await api.admin.get("/v1/dead-letters")).json()["items"] == []

    async def audited() -> list[dict[str, Any]]:
        return await operator_actions(api)

    [action] = await assert_eventually(audited)
    assert action["actor"] == "operator:carol"
    assert action["workspace"] == "acme"
    assert action["payload"]["action"] == "dlq_drop"
    assert action["payload"]["reason"] == "junk from a load test"
    assert action["payload"]["details"]["original_subject"] == subject

    gone = await ctl(api, "dlq", "show", seq)
    assert gone.code == 4  # not_found (docs/errors.md)
    assert f"no dead letter {seq}" in gone.stderr
    assert (await ctl(api, "dlq", "drop", seq, "--reason", "again")).code == 4
    assert (await ctl(api, "dlq", "retry", seq)).code == 4
    assert (await api.admin.get(f"/v1/dead-letters/{seq}")).status_code == 404
    res = await api.admin.post(f"/v1/dead-letters/{seq}/drop", json={"reason": "again"})
    assert res.status_code == 404
    assert "no dead letter" in res.json()["error"]
    assert (await api.admin.get("/v1/dead-letters/abc")).status_code == 404


async def test_a_dead_lettered_observation_retried_after_a_fix_becomes_a_memory(api: ApiHarness) -> None:
    h = api.h
    await h.start(build_attend)
    obs = build_observation("the backup runs at midnight", workspace="acme", mind="ops")
    subject = h.topology.observation_subject("acme", "ops")
    # What attend would have written had a bug made it refuse this valid observation.
    await dead_letter(h.js, h.topology, "attend", refused_by_hand(h, encode_event(obs), subject, 7), "a bug")
    [item] = await listed(api, 1)
    assert item["reason"] == "a bug"
    assert item["utf8"]

    retried = await ctl_json(api, "dlq", "retry", str(item["seq"]), "--reason", "attend fixed")
    assert retried["subject"] == subject
    assert retried["stream"] == h.topology.observation_stream
    assert retried["removed"]
    assert not retried["duplicate"]
    hits = await assert_eventually(lambda: keyword_search(h.pool, "backup midnight", workspace="acme"))
    assert [m.content for m in hits] == ["the backup runs at midnight"]
    assert (await api.admin.get("/v1/dead-letters")).json()["items"] == []

    async def audited() -> list[dict[str, Any]]:
        return await operator_actions(api)

    [action] = await assert_eventually(audited)
    assert action["payload"]["action"] == "dlq_retry"
    assert action["payload"]["reason"] == "attend fixed"
    assert action["payload"]["details"]["retried_seq"] == str(retried["stream_seq"])
    res = await api.admin.post(f"/v1/dead-letters/{item['seq']}/retry", json={})
    assert res.status_code == 404


async def test_retrying_a_message_that_still_is_not_an_event_is_refused_unless_forced(
    api: ApiHarness,
) -> None:
    h = api.h
    await h.start(build_attend)
    subject = h.topology.observation_subject("acme", "ops")
    await h.nc.publish(f"{h.topology.prefix}.obs.acme.ops", b'{"content": 5}')
    [item] = await listed(api, 1)
    # Attend says what is missing, not "unknown event type None".
    assert "no `type` field" in item["reason"], item["reason"]
    assert "its fields: content" in item["reason"]
    seq = str(item["seq"])

    refused = await ctl(api, "dlq", "retry", seq)
    assert refused.code == 5, refused.stdout + refused.stderr  # conflict (docs/errors.md)
    assert f"dead letter {seq} is still not a valid event" in refused.stderr
    assert "--force" in refused.stderr
    res = await api.admin.post(f"/v1/dead-letters/{seq}/retry", json={})
    assert res.status_code == 409
    assert "no `type` field" in res.json()["error"]
    assert [i["seq"] for i in await listed(api, 1)] == [item["seq"]]  # left as it was

    forced = await ctl_json(api, "dlq", "retry", seq, "--force")
    assert forced["subject"] == subject
    assert forced["removed"]
    # Attend refuses it again: a new dead letter, the old one gone.
    [again] = await assert_eventually(lambda: _other_than(api, item["seq"]), timeout=30)
    assert "no `type` field" in again["reason"]


async def _other_than(api: ApiHarness, seq: int) -> list[dict[str, Any]] | None:
    items: list[dict[str, Any]] = (await api.admin.get("/v1/dead-letters")).json()["items"]
    return items if items and all(i["seq"] != seq for i in items) else None


async def test_a_retried_retry_is_stored_once_and_an_old_undeletable_stream_says_why_it_cannot_drop(
    api: ApiHarness,
) -> None:
    h = api.h
    # The dead-letter stream as Noema created it before dead letters could be deleted.
    name = h.topology.dead_letter_stream
    await h.js.delete_stream(name)
    await h.js.add_stream(
        StreamConfig(name=name, subjects=[h.topology.dead_letter_subjects], deny_delete=True, deny_purge=True)
    )
    await ensure_streams(
        h.js, h.topology, 120, dead_letters=DeadLetterPolicy(max_age_s=3600, max_bytes=1 << 20)
    )
    config = (await h.js.stream_info(name)).config
    assert (config.max_age, config.max_bytes, config.deny_delete) == (3600, 1 << 20, True)

    await h.start(build_attend)
    obs = build_observation("the printer is on floor 3", workspace="acme", mind="ops")
    subject = h.topology.observation_subject("acme", "ops")
    await dead_letter(h.js, h.topology, "attend", refused_by_hand(h, encode_event(obs), subject, 3), "a bug")
    [item] = await listed(api, 1)
    path = f"/v1/dead-letters/{item['seq']}"

    first = (await api.admin.post(f"{path}/retry", json={"reason": "fixed"})).json()
    again = (await api.admin.post(f"{path}/retry", json={})).json()
    assert not first["removed"]
    assert not first["duplicate"]
    assert again["duplicate"]
    assert again["stream_seq"] == first["stream_seq"]
    await assert_eventually(lambda: keyword_search(h.pool, "printer floor", workspace="acme"))
    info = await h.js.stream_info(h.topology.observation_stream)
    assert info.state.messages == 1

    res = await api.admin.post(f"{path}/drop", json={"reason": "done"})
    assert res.status_code == 409
    assert "deny_delete" in res.json()["error"]
    refused = await ctl(api, "dlq", "drop", str(item["seq"]), "--reason", "done")
    assert refused.code == 5  # conflict
    assert "noemactl dlq upgrade" in refused.stderr

    upgraded = await ctl_json(api, "dlq", "upgrade")
    assert upgraded == {"upgraded": True, "moved": 1}
    config = (await h.js.stream_info(name)).config
    assert (config.deny_delete, config.subjects, config.sources) == (
        False,
        [h.topology.dead_letter_subjects],
        None,
    )
    [moved] = await listed(api, 1)
    assert {k: moved[k] for k in ("reason", "original_subject", "sha256", "source")} == {
        k: item[k] for k in ("reason", "original_subject", "sha256", "source")
    }
    assert (
        await api.admin.post(f"/v1/dead-letters/{moved['seq']}/drop", json={"reason": "done"})
    ).status_code == 200
    assert (await api.admin.get("/v1/dead-letters")).json()["items"] == []
    assert await ctl_json(api, "dlq", "upgrade") == {"upgraded": False, "moved": 0}
    # New dead letters land on the recreated stream.
    await dead_letter(h.js, h.topology, "attend", refused_by_hand(h, b"x", subject, 9), "later")
    assert [d["reason"] for d in await listed(api, 1)] == ["later"]


async def test_a_big_original_is_kept_truncated_and_retry_refuses_it(api: ApiHarness) -> None:
    await api.h.start(build_attend)
    body = b"{" + b"x" * (2 << 20)
    await api.h.js.publish(api.h.topology.observation_subject("acme", "ops"), body)
    [item] = await listed(api, 1)
    assert item["truncated"]
    assert item["size"] == len(body)
    assert item["stored_size"] == 1 << 20
    assert item["sha256"] == hashlib.sha256(body).hexdigest()
    assert len(item["preview"]) < 200

    res = await api.admin.post(f"/v1/dead-letters/{item['seq']}/retry", json={})
    assert res.status_code == 409
    assert "truncated" in res.json()["error"]
    ran = await ctl(api, "dlq", "retry", str(item["seq"]))
    assert ran.code == 5  # conflict
    assert "cannot be retried" in ran.stderr
    assert (await ctl_json(api, "dlq", "list"))["items"][0]["seq"] == item["seq"]  # still there


async def test_only_tokens_for_all_workspaces_touch_dead_letters_and_events_are_never_re_published(
    api: ApiHarness,
) -> None:
    h = api.h
    event_subject = f"{h.topology.prefix}.evt.acme.ops.memory_created"
    msg = refused_by_hand(h, b'{"nesting": [[[[]]]]}', event_subject, 5)
    await dead_letter(h.js, h.topology, "projector", msg, "RecursionError")
    [item] = await listed(api, 1)
    path = f"/v1/dead-letters/{item['seq']}"

    for method, url, body in [
        ("GET", "/v1/dead-letters", None),
        ("GET", path, None),
        ("POST", f"{path}/retry", {}),
        ("POST", f"{path}/drop", {"reason": "mine"}),
    ]:
        res = await api.acme.request(method, url, json=body)
        assert res.status_code == 403, (url, res.text)
        assert "all workspaces" in res.json()["error"]
        assert (await api.anonymous.request(method, url, json=body)).status_code == 401

    res = await api.admin.post(f"{path}/retry", json={})
    assert res.status_code == 409
    assert "source of truth" in res.json()["error"]
    assert (await api.admin.get("/v1/dead-letters", params={"limit": "0"})).status_code == 400
    assert (await api.admin.get("/v1/dead-letters", params={"since": "soon"})).status_code == 400
    assert (await api.admin.post(f"{path}/drop", json={})).status_code == 422
    assert (await api.admin.post(f"{path}/drop", json={"reason": "x", "extra": 1})).status_code == 422
    bad = await ctl(api, "dlq", "list", "--since", "soon")
    assert bad.code == 2
    assert "since" in bad.stderr


async def test_a_listing_pages_back_newest_first_and_filters_by_source(harness: Harness) -> None:
    subject = harness.topology.observation_subject("acme", "ops")
    for n, source in enumerate(["attend", "retrieve", "attend", "retrieve", "attend"], start=1):
        msg = refused_by_hand(harness, f"poison {n}".encode(), subject, n)
        await dead_letter(harness.js, harness.topology, source, msg, f"reason {n}")
    dl = DeadLetters(harness.nc, harness.topology, EventPublisher(harness.nc, harness.topology))

    pages, before = [], None
    while True:
        page = await dl.list(DeadLetterQuery(limit=2, before=before))
        pages.append([d.seq for d in page.items])
        if page.next_before is None:
            break
        before = page.next_before
    assert pages == [[5, 4], [3, 2], [1]]
    retrieve = await dl.list(DeadLetterQuery(source="retrieve"))
    assert [(d.seq, d.source, d.reason) for d in retrieve.items] == [
        (4, "retrieve", "reason 4"),
        (2, "retrieve", "reason 2"),
    ]
    assert retrieve.next_before is None


@pytest.mark.parametrize("interrupted_after", ["moving aside", "deleting the old stream"])
async def test_an_interrupted_upgrade_finishes_when_run_again_and_nothing_meanwhile_undoes_it(
    harness: Harness, interrupted_after: str
) -> None:
    h = harness
    name = h.topology.dead_letter_stream
    await h.js.delete_stream(name)
    await h.js.add_stream(
        StreamConfig(name=name, subjects=[h.topology.dead_letter_subjects], deny_delete=True, deny_purge=True)
    )
    subject = h.topology.observation_subject("acme", "ops")
    for n in range(1, 6):
        await dead_letter(h.js, h.topology, "attend", refused_by_hand(h, b"p%d" % n, subject, n), f"r{n}")
    # By hand, the first steps of make_deletable, as a crash would leave them.
    old = (await h.js.stream_info(name)).config
    await h.js.update_stream(replace(old, subjects=[f"{name}.retired"]))
    await h.js.add_stream(StreamConfig(name=name + MOVE_SUFFIX, sources=[StreamSource(name=name)]))
    if interrupted_after == "deleting the old stream":
        await assert_eventually(lambda: _holds(h, name + MOVE_SUFFIX, 5))
        await h.js.update_stream(StreamConfig(name=name + MOVE_SUFFIX))
        await h.js.delete_stream(name)
    await ensure_streams(h.js, h.topology, 120)  # a worker starting meanwhile leaves it alone
    assert await _streams(h) == (interrupted_after == "moving aside", True)

    config = dead_letter_stream_config(h.topology, 120)
    assert await make_deletable(h.js, config) == 5
    assert await _streams(h) == (True, False)
    assert (await h.js.stream_info(name)).config.deny_delete is False
    dl = DeadLetters(h.nc, h.topology, EventPublisher(h.nc, h.topology))
    page = await dl.list(DeadLetterQuery())
    assert sorted(d.reason for d in page.items) == ["r1", "r2", "r3", "r4", "r5"]
    assert await make_deletable(h.js, config) is None


async def _holds(h: Harness, stream: str, count: int) -> bool:
    return int((await h.js.stream_info(stream)).state.messages) == count


async def _streams(h: Harness) -> tuple[bool, bool]:
    """Whether the dead-letter stream and its _MOVE stream exist."""
    names = {s.config.name for s in await h.js.streams_info()}
    name = h.topology.dead_letter_stream
    return name in names, name + MOVE_SUFFIX in names
