"""`noemactl memory list|timeline` answer exactly what the HTTP API answers (one implementation behind
both), over both compositions (tests/contract/cli_backends.py): in process over the in-memory
pipeline, and as a process against the real servers. Written once, from the copies that were in
tests/integration/test_cli_reads.py and tests/unit/test_cli_in_memory.py (assertions kept)."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.contract.cli_backends import Cli, api, api_over_servers, either_cli, from_api
from tests.integration.api_harness import memory, retraction

__all__ = ["api", "api_over_servers", "either_cli"]

JANUARY = datetime(2024, 1, 15, tzinfo=UTC)


async def test_list_and_timeline_filter_and_answer_exactly_what_the_api_answers(either_cli: Cli) -> None:
    api, ctl_json = either_cli.api, either_cli.ctl_json
    billing, episode, hr = await api.given(
        memory("a fact about billing", domain="billing", happened_at=datetime(2024, 6, 1, tzinfo=UTC)),
        memory("an episode", kind="episodic", epistemic_kind="observation", happened_at=JANUARY),
        memory("a fact about hr", domain="hr"),
    )
    await api.given(retraction(hr))

    for flags, params in [
        ([], {}),
        (["--kind", "episodic"], {"kind": "episodic"}),
        (["-e", "observation"], {"epistemic_kind": "observation"}),
        (["--status", "retracted"], {"status": "retracted"}),
        (["-d", "billing"], {"domain": "billing"}),
        (["--since", "2024-03-01T00:00:00Z"], {"since": "2024-03-01T00:00:00Z"}),
        (["--until", "2025-01-01T00:00:00Z"], {"until": "2025-01-01T00:00:00Z"}),
        (["--limit", "1", "--offset", "1"], {"limit": "1", "offset": "1"}),
    ]:
        cli = await ctl_json("memory", "list", "-w", "acme", *flags)
        assert cli == await from_api(api, "/v1/memories", workspace="acme", **params), flags
    assert [m["id"] for m in (await ctl_json("memory", "list", "--status", "retracted"))["items"]] == [hr]
    assert [m["id"] for m in (await ctl_json("memory", "list", "-d", "billing"))["items"]] == [billing]

    timeline = await ctl_json("memory", "timeline", "-w", "acme", "--order", "asc")
    assert timeline == await from_api(api, "/v1/timeline", workspace="acme", order="asc")
    assert [m["id"] for m in timeline["items"]] == [episode, billing, hr]

    human = await either_cli.ctl("memory", "timeline", "-w", "acme", "--order", "asc")
    assert human.code == 0, human.stderr
    assert human.stdout.index("an episode") < human.stdout.index("a fact about billing")
    assert "2024-01-15T00:00:00+00:00" in human.stdout
