"""`up` refuses, before it starts anything, a fixed port something else listens on."""

from __future__ import annotations

import socket
from dataclasses import replace
from pathlib import Path

from noema.runtime.settings import Settings
from noema_cli.supervisor import _Child, _fixed_ports, _taken_port, port_in_use


def test_a_listening_port_is_in_use_and_a_closed_one_is_not() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        assert port_in_use("127.0.0.1", port)
    assert not port_in_use("127.0.0.1", port)


def test_the_api_port_and_each_metrics_port_are_checked() -> None:
    settings = replace(Settings.from_env({}), api_port=8800)
    children = [
        _Child("api", "noema_api"),
        _Child("attend", "noema_attend", metrics_port=9200),
        _Child("decay", "noema_decay"),
    ]
    assert _fixed_ports(children, settings) == [
        ("api", "127.0.0.1", 8800, "NOEMA_API_PORT"),
        ("attend", "127.0.0.1", 9200, "NOEMA_METRICS_PORT"),
    ]
    assert _fixed_ports(children, replace(settings, api_port=0))[0][0] == "attend"  # 0: any free port


def test_the_taken_port_is_named_with_the_setting_that_chooses_it() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        settings = replace(Settings.from_env({}), api_port=port)
        assert _taken_port([_Child("api", "noema_api")], settings) == (
            "api",
            "127.0.0.1",
            port,
            "NOEMA_API_PORT",
        )


def test_up_refusing_a_taken_port_creates_no_data_folder(tmp_path: Path) -> None:
    from noema_cli.supervisor import Supervisor

    data_dir = tmp_path / "fresh" / "var"
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        settings = replace(Settings.from_env({}), api_port=held.getsockname()[1], data_dir=data_dir)
        assert Supervisor(settings).run() == 5
    assert not data_dir.exists()
    assert not data_dir.parent.exists()
