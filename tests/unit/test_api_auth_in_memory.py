"""Operator tokens over the in-memory composition (tests/unit/api_in_memory.py): a token of another
workspace is 403; a tokens file's forms. Moved from tests/integration/test_api_auth.py with their
assertions kept. No token or a wrong one (401) and a workspace token's reads run over both
compositions in tests/contract/test_api_auth.py, where row-level security scopes the connection too."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from noema_api.auth import TokenEntry, Tokens, TokensError, ensure_tokens_file, load_tokens, operator_token
from tests.integration.api_harness import memory
from tests.unit.api_in_memory import InMemoryApi as ApiHarness
from tests.unit.api_in_memory import api

__all__ = ["api"]


async def test_a_workspace_token_cannot_change_another_workspace(api: ApiHarness) -> None:
    [theirs] = await api.given(memory("theirs", workspace="globex"))
    for verb in ("retract", "archive"):
        assert (await api.acme.post(f"/v1/memories/{theirs}/{verb}", json={"reason": "r"})).status_code == 403
    entry = {"workspace": "globex", "content": "c", "reason": "r"}
    assert (await api.acme.post("/v1/memories", json=entry)).status_code == 403
    assert (await api.admin.get(f"/v1/memories/{theirs}")).json()["memory"]["status"] == "active"
    assert (await api.admin.get("/v1/audit", params={"type": "operator.action"})).json()["items"] == []


async def test_the_actor_of_an_action_is_the_token_name(api: ApiHarness) -> None:
    [ours] = await api.given(memory("ours"))
    assert (await api.acme.post(f"/v1/memories/{ours}/archive", json={"reason": "old"})).status_code == 202
    await api.caught_up()
    [action] = (await api.admin.get("/v1/audit", params={"type": "operator.action"})).json()["items"]
    assert action["actor"] == "operator:acme-ops"


def test_a_generated_tokens_file_holds_one_private_all_workspaces_token(tmp_path: Path) -> None:
    path = tmp_path / "api-tokens.json"
    assert ensure_tokens_file(path) is True
    assert ensure_tokens_file(path) is False  # kept, not regenerated
    assert path.stat().st_mode & 0o777 == 0o600
    name, token = operator_token(path)
    assert name == "operator"
    assert load_tokens(path).authenticate(f"Bearer {token}").workspace is None
    assert list(tmp_path.iterdir()) == [path]


def test_tokens_may_be_given_as_digests_and_bad_files_are_explained(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    digest = hashlib.sha256(b"a-long-secret-token-value").hexdigest()
    path.write_text(json.dumps({"tokens": [{"name": "ci", "workspace": "acme", "sha256": digest}]}))
    principal = load_tokens(path).authenticate("Bearer a-long-secret-token-value")
    assert (principal.name, principal.workspace) == ("ci", "acme")
    with pytest.raises(TokensError, match="no all-workspaces token in clear"):
        operator_token(path)
    path.write_text(json.dumps({"tokens": [{"name": "x", "tokne": "typo"}]}))
    with pytest.raises(TokensError, match="tokne"):
        load_tokens(path)
    with pytest.raises(TokensError, match="no tokens file"):
        load_tokens(tmp_path / "missing.json")
    with pytest.raises(TokensError, match="exactly one"):
        Tokens([TokenEntry(name="neither")])


async def test_writes_take_the_short_ids_tables_print_within_the_tokens_workspace(api: ApiHarness) -> None:
    ours, theirs = await api.given(memory("ours"), memory("theirs", workspace="globex"))
    res = await api.acme.post(f"/v1/memories/{ours[:8]}/archive", json={"reason": "old"})
    assert res.status_code == 202, res.text
    assert res.json()["memory_id"] == ours
    assert (await api.acme.get(f"/v1/memories/{ours[:8]}")).json()["memory"]["id"] == ours
    # Another workspace's memory: its full id is refused, a prefix of it is not looked for there
    # (nothing to learn about other workspaces by probing); a too-short prefix says so.
    assert (await api.acme.post(f"/v1/memories/{theirs}/retract", json={"reason": "r"})).status_code == 403
    unseen = await api.acme.post(f"/v1/memories/{theirs[:8]}/retract", json={"reason": "r"})
    assert unseen.status_code == 404
    short = await api.acme.post(f"/v1/memories/{ours[:4]}/restore", json={"reason": "r"})
    assert short.status_code == 400
    assert "at least 6 characters" in short.json()["error"]
