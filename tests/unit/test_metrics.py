"""One process's metrics and log format, without servers: the exposition, the ports `up` gives
each worker, and stdlib loggers rendered in the process's one log format."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import structlog
from typer.testing import CliRunner

from noema.adapters.metrics import Metrics
from noema.runtime.logging import configure_logging
from noema.runtime.settings import Settings, SettingsError
from noema_cli.main import app
from noema_cli.supervisor import _assign_metrics_ports, _Child


def test_each_process_counts_into_its_own_registry() -> None:
    one, other = Metrics(), Metrics()
    one.processed.labels("attend").inc(3)
    with one.timed_search("keyword"):
        pass
    text, content_type = one.exposition()
    assert content_type.startswith("text/plain")
    assert b'noema_messages_processed_total{worker="attend"} 3.0' in text
    assert b'noema_search_duration_seconds_count{mode="keyword"} 1.0' in text
    assert b"noema_messages_processed_total{" not in other.exposition()[0]


def _children(*names: str) -> list[_Child]:
    return [_Child(name, f"noema_{name.partition('-')[0]}") for name in names]


def test_up_gives_each_worker_but_the_api_a_metrics_port_of_its_own() -> None:
    children = _children("attend", "projector", "api", "service", "attend-2")
    settings = Settings(metrics_port=9464, metrics_host="0.0.0.0")
    where = _assign_metrics_ports(children, settings)
    assert [c.metrics_port for c in children] == [9464, 9465, None, 9466, 9467]
    assert where == {
        "api": "http://127.0.0.1:8765/metrics",  # the API serves them on its own port
        "attend": "http://0.0.0.0:9464/metrics",
        "projector": "http://0.0.0.0:9465/metrics",
        "service": "http://0.0.0.0:9466/metrics",
        "attend-2": "http://0.0.0.0:9467/metrics",
    }


@pytest.mark.parametrize("port", [None, 0])
def test_up_assigns_no_ports_unless_given_one_to_count_from(port: int | None) -> None:
    children = _children("attend", "api")
    assert _assign_metrics_ports(children, Settings(metrics_port=port)) == {
        "api": "http://127.0.0.1:8765/metrics"
    }
    assert [c.metrics_port for c in children] == [None, None]


def test_up_refuses_a_first_port_with_too_few_ports_after_it() -> None:
    with pytest.raises(SettingsError, match="NOEMA_METRICS_PORT=65535 leaves too few ports"):
        _assign_metrics_ports(_children("attend", "projector"), Settings(metrics_port=65535))


def test_stdlib_loggers_write_json_lines_into_a_json_log(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("json", "info")
    try:
        # A library's logger (not uvicorn's own name: an in-process uvicorn of an earlier test
        # configures it not to propagate).
        logging.getLogger("some.library").warning("port %d in use", 8765)
        structlog.get_logger("noema.api").warning("api serving", url="http://x")
        lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    finally:
        structlog.reset_defaults()
        root = logging.getLogger()
        for handler in [h for h in root.handlers if h.get_name() == "noema"]:
            root.removeHandler(handler)
    assert [(e["event"], e["level"]) for e in lines] == [
        ("port 8765 in use", "warning"),
        ("api serving", "warning"),
    ]
    assert lines[0]["logger"] == "some.library"
    assert "timestamp" in lines[0]


def test_up_refuses_a_metrics_port_range_that_does_not_fit_before_starting_anything(tmp_path: Path) -> None:
    env = {"NOEMA_METRICS_PORT": "65535", "NOEMA_DATA_DIR": str(tmp_path / "var")}
    result = CliRunner().invoke(app, ["up"], env=env)
    assert result.exit_code == 2
    assert "NOEMA_METRICS_PORT=65535 leaves too few ports for every service" in result.output
    assert not (tmp_path / "var" / "noema.json").exists()  # nothing was started
