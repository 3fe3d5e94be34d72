"""The embedded PostgreSQL's own settings: shared buffers sized to the machine, written in its data
folder and included from postgresql.conf once."""

from __future__ import annotations

from pathlib import Path

from noema.runtime.embedded import SETTINGS_FILE, machine_memory, shared_buffers_mb, write_server_settings

GB = 2**30


def test_shared_buffers_are_a_quarter_of_memory_between_postgres_default_and_eight_gigabytes() -> None:
    assert shared_buffers_mb(2 * GB) == 512
    # This machine: room for a 1,000,000-memory store's HNSW index (about 2 GB), which a 1 GB cap
    # left two thirds outside (docs/benchmarks.md).
    assert shared_buffers_mb(24 * GB) == 6144
    assert shared_buffers_mb(64 * GB) == 8192
    assert shared_buffers_mb(256 * 2**20) == 128
    assert shared_buffers_mb(0) == 128  # the platform could not say


def test_the_settings_file_is_included_once_and_rewritten_at_each_start(tmp_path: Path) -> None:
    conf = tmp_path / "postgresql.conf"
    conf.write_text("max_connections = 100\n#include_dir = 'conf.d'")
    write_server_settings(tmp_path, 2 * GB)
    write_server_settings(tmp_path, 24 * GB)
    lines = conf.read_text().splitlines()
    assert lines[:2] == ["max_connections = 100", "#include_dir = 'conf.d'"]
    assert lines.count(f"include_if_exists = '{SETTINGS_FILE}'") == 1
    written = (tmp_path / SETTINGS_FILE).read_text().splitlines()
    assert "shared_buffers = '6144MB'" in written
    assert "shared_preload_libraries = 'pg_prewarm'" in written  # what the buffers held, kept


def test_memory_is_the_containers_limit_where_it_is_below_the_machines(tmp_path: Path) -> None:
    # A container sees the host's physical memory (sysconf) but may use only its control group's
    # limit: shared buffers a quarter of the host's (up to 8 GB) would have the server killed for
    # memory once they filled past the limit.
    physical = machine_memory()
    proc = tmp_path / "cgroup"
    root = tmp_path / "sys"
    (root / "docker" / "c1").mkdir(parents=True)
    proc.write_text("0::/docker/c1\n")
    (root / "docker" / "c1" / "memory.max").write_text(f"{2 * GB}\n")
    assert machine_memory(cgroup_root=root, proc_cgroup=proc) == min(physical, 2 * GB)
    (root / "docker" / "c1" / "memory.max").write_text("max\n")  # no limit of its own ...
    (root / "docker" / "memory.max").write_text(f"{3 * GB}\n")  # ... but its parent's
    assert machine_memory(cgroup_root=root, proc_cgroup=proc) == min(physical, 3 * GB)
    # cgroup v1: the memory controller's hierarchy; "unlimited" is a huge number.
    v1 = tmp_path / "v1"
    (v1 / "memory" / "box").mkdir(parents=True)
    proc.write_text("4:memory:/box\n1:cpu:/box\n0::/\n")
    (v1 / "memory" / "box" / "memory.limit_in_bytes").write_text(f"{GB}\n")
    assert machine_memory(cgroup_root=v1, proc_cgroup=proc) == min(physical, GB)
    (v1 / "memory" / "box" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert machine_memory(cgroup_root=v1, proc_cgroup=proc) == physical
    assert machine_memory(cgroup_root=tmp_path / "none", proc_cgroup=tmp_path / "none") == physical
