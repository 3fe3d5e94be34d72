"""What composition roots are given and share: located settings (both servers known, else a clear
refusal), the pool they open, and how a batch's undecodable messages are set apart."""

from __future__ import annotations

import dataclasses
import os
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, cast

import pytest
from nats.aio.msg import Msg
from typer.testing import CliRunner

from noema.client import build_observation
from noema.errors import Kind, kind_of
from noema.runtime.locate import (
    NotRunning,
    locate,
    nats_fields,
    register,
    registered,
    registry_dir,
    unregister,
    write_state,
)
from noema.runtime.settings import Located, Settings, SettingsError
from noema.runtime.wiring import open_pool
from noema.runtime.worker import decode_each
from noema_cli.main import app
from noema_events import EventDecodeError, ObservationRecorded, encode_event

NATS_URL, OWNER, READER = "nats://n:4222", "postgresql://o@db/n", "postgresql://r@db/n"


def test_settings_that_name_both_servers_are_located_with_every_other_setting_kept() -> None:
    given = Settings(nats_url=NATS_URL, database_url=OWNER, prefix="acme", batch_size=7, wm_capacity=5)
    located = Located.of(given)
    assert isinstance(located, Located)
    for f in dataclasses.fields(Settings):
        assert getattr(located, f.name) == getattr(given, f.name), f.name
    assert Located.of(located) is located


@pytest.mark.parametrize(
    ("nats_url", "database_url", "named", "not_named"),
    [
        (None, OWNER, ["NOEMA_NATS_URL"], "NOEMA_DATABASE_URL"),
        (NATS_URL, None, ["NOEMA_DATABASE_URL"], "NOEMA_NATS_URL"),
        (None, None, ["NOEMA_NATS_URL", "NOEMA_DATABASE_URL"], None),
    ],
)
def test_settings_missing_a_server_are_refused_naming_each_missing_url(
    nats_url: str | None, database_url: str | None, named: list[str], not_named: str | None
) -> None:
    with pytest.raises(SettingsError) as refused:
        Located.of(Settings(nats_url=nats_url, database_url=database_url))
    message = str(refused.value)
    assert all(name in message for name in named), message
    assert not_named is None or not_named not in message
    assert "noemactl up" in message
    assert kind_of(refused.value) is Kind.INVALID  # a message and exit code 2 on every surface


def test_pointing_settings_at_servers_locates_them_keeping_the_role_urls() -> None:
    located = Settings(database_url_reader=READER).with_urls(NATS_URL, OWNER)
    assert isinstance(located, Located)
    assert (located.nats_url, located.database_url) == (NATS_URL, OWNER)
    assert [located.database_url_for(r) for r in ("owner", "projector", "reader")] == [OWNER, OWNER, READER]
    with pytest.raises(ValueError, match="unknown database role"):
        located.database_url_for("admin")


def test_external_servers_are_located_without_a_running_instance(tmp_path: Path) -> None:
    located = locate(Settings(data_dir=tmp_path / "nothing here", nats_url=NATS_URL, database_url=OWNER))
    assert isinstance(located, Located)
    assert (located.nats_url, located.database_url) == (NATS_URL, OWNER)


def test_without_a_running_instance_locating_says_how_to_start_one(tmp_path: Path) -> None:
    with pytest.raises(NotRunning, match="start it with `noemactl up`"):
        locate(Settings(data_dir=tmp_path, database_url=OWNER))


def _running(data_dir: Path, nats_port: int) -> Path:
    """``data_dir`` as the ``up`` of this (live) process records it: its state, and its entry in the
    registry of the state directory."""
    data_dir.mkdir(parents=True)
    nats = f"nats://127.0.0.1:{nats_port}"
    write_state(data_dir, {"pid": os.getpid(), "nats_url": nats, "database_url": OWNER})
    register(registry_dir(), data_dir)
    return data_dir


def test_given_no_data_folder_a_command_finds_the_instance_up_runs_in_another_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    elsewhere = tmp_path / "somewhere" / "else"
    elsewhere.mkdir(parents=True)
    monkeypatch.chdir(elsewhere)  # an MCP host starts its servers in a folder of its own
    with pytest.raises(NotRunning, match=f"no running Noema found in {elsewhere / 'var'}"):
        locate(Settings())
    running = _running(tmp_path / "project" / "var", 4222)
    assert registered() == [running]
    located = locate(Settings())
    assert (located.data_dir, located.nats_url) == (running, "nats://127.0.0.1:4222")
    # A folder that was named is the one meant: no other instance stands in for it.
    with pytest.raises(NotRunning, match=f"no running Noema found in {tmp_path / 'named'}"):
        locate(Settings(data_dir=tmp_path / "named"))
    # Two running elsewhere: which one is not guessed.
    other = _running(tmp_path / "other" / "var", 4223)
    with pytest.raises(NotRunning, match="several run elsewhere") as refused:
        locate(Settings())
    assert f"{other}, {running}" in str(refused.value)
    assert "--data-dir" in str(refused.value)
    # A stopped one is forgotten: its state file is gone (or its pid dead).
    unregister(registry_dir(), other)
    (running / "noema.json").unlink()
    assert registered() == []
    assert list(registry_dir().iterdir()) == []


def test_the_registry_is_under_the_state_directory_a_host_passes_on() -> None:
    assert registry_dir({"XDG_STATE_HOME": "/s", "HOME": "/h"}) == Path("/s/noema/instances")
    assert registry_dir({"HOME": "/h"}) == Path("/h/.local/state/noema/instances")


@pytest.mark.parametrize("args", [["dlq", "list"], ["memory", "list"], ["status"]])
def test_a_command_without_a_running_instance_exits_unavailable_with_a_message(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("NOEMA_NATS_URL", "NOEMA_DATABASE_URL"):
        monkeypatch.delenv(var, raising=False)
    ran = CliRunner().invoke(app, [*args, "--data-dir", str(tmp_path)], prog_name="noemactl")
    assert ran.exit_code == 6, ran.output
    assert f"no running Noema found in {tmp_path}" in " ".join(ran.output.split())
    assert "Traceback" not in ran.output


class _Pool:
    closed = False

    async def close(self) -> None:
        self.closed = True


async def test_a_pool_signs_in_as_its_role_and_closes_with_the_stack() -> None:
    asked: list[tuple[str, str, dict[str, Any]]] = []
    pool = _Pool()

    async def create(url: str, schema: str, **options: Any) -> Any:
        asked.append((url, schema, options))
        return pool

    located = Located(nats_url=NATS_URL, database_url=OWNER, database_url_reader=READER, db_schema="s")
    async with AsyncExitStack() as stack:
        got = await open_pool(
            located, stack, "reader", app="noema-x", workspace="*", max_size=3, create=create
        )
        assert got is pool
        assert not pool.closed
    assert pool.closed
    assert asked == [(READER, "s", {"app": "noema-x", "workspace": "*", "min_size": 1, "max_size": 3})]


def _msg(data: bytes, seq: int) -> Msg:
    return Msg(cast(Any, None), subject=f"s.{seq}", data=data)


def test_a_batch_is_split_into_its_events_and_its_undecodable_messages_in_order() -> None:
    first, second = (build_observation(t, workspace="acme", mind="ops") for t in ("one", "two"))
    msgs = [_msg(encode_event(first), 1), _msg(b"not json", 2), _msg(encode_event(second), 3), _msg(b"{}", 4)]
    events, undecodable = decode_each(msgs)
    assert [(m.subject, e) for m, e in events] == [("s.1", first), ("s.3", second)]
    assert [m.subject for m, _ in undecodable] == ["s.2", "s.4"]
    assert all(isinstance(exc, EventDecodeError) and str(exc) for _, exc in undecodable)


def test_a_handler_decodes_with_its_own_rules_and_their_reasons_are_kept() -> None:
    obs = build_observation("one", workspace="acme", mind="ops")

    def observation_on_its_subject(msg: Msg) -> ObservationRecorded:
        if msg.subject != "s.1":
            raise EventDecodeError(f"subject {msg.subject} is not the observation's")
        return obs

    events, undecodable = decode_each([_msg(b"", 1), _msg(b"", 2)], observation_on_its_subject)
    assert [e for _, e in events] == [obs]
    assert [str(exc) for _, exc in undecodable] == ["subject s.2 is not the observation's"]


def test_any_other_failure_while_decoding_is_not_taken_for_an_undecodable_message() -> None:
    def broken(msg: Msg) -> None:
        raise RuntimeError("a bug")

    with pytest.raises(RuntimeError, match="a bug"):
        decode_each([_msg(b"", 1)], broken)


def test_noema_json_keeps_nats_credentials_in_fields_beside_a_url_without_them(tmp_path: Path) -> None:
    url = "nats://noema-operator:p%40ss@127.0.0.1:4222"
    fields = nats_fields(url)
    assert fields == {
        "nats_url": "nats://127.0.0.1:4222",
        "nats_user": "noema-operator",
        "nats_password": "p@ss",
    }
    cluster = "nats://u:p@127.0.0.1:4222,nats://u:p@127.0.0.1:4223"
    assert nats_fields(cluster)["nats_url"] == "nats://127.0.0.1:4222,nats://127.0.0.1:4223"
    assert nats_fields("nats://127.0.0.1:4222")["nats_user"] is None

    # Noema's own connections get the URL with the credentials back, from a file of either form.
    new, old = tmp_path / "new", tmp_path / "old"
    for data_dir, nats in ((new, fields), (old, {"nats_url": url})):
        data_dir.mkdir()
        write_state(data_dir, {"pid": os.getpid(), **nats, "database_url": OWNER})
        located = locate(Settings(data_dir=data_dir))
        assert located.nats_url == "nats://noema-operator:p%40ss@127.0.0.1:4222", data_dir.name
