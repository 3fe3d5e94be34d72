"""Checksums per partition (issue 13): a partition's is made of its workspaces' digests only, the
digests add up exactly, and the comparison names the partitions that differ."""

from __future__ import annotations

from noema.adapters.postgres.digests import EMPTY, Digest, combined, summed, totals
from noema.adapters.postgres.divergence import by_partition, partitions_compared
from noema.topology import partition_of
from noema_cli.replay_cmd import partition_lines

P = 4
TABLES = {
    "memories": {"tenant0": Digest(2, 10, 20), "tenant1": Digest(1, 5, 6), "tenant5": Digest(3, 7, 8)},
    "events": {"tenant0": Digest(4, 1, 2), "tenant2": Digest(1, 9, 9)},
}


def test_a_tables_digest_is_the_sum_of_its_workspaces() -> None:
    assert totals(TABLES) == {"memories": "6:22:34", "events": "5:10:11"}
    assert str(summed([])) == str(EMPTY) == "0:0:0"


def test_each_partition_is_made_of_its_own_workspaces_rows() -> None:
    assert partition_of("tenant1", P) == partition_of("tenant5", P) != partition_of("tenant0", P)
    digests = by_partition(TABLES, P)
    assert sorted(digests) == list(range(P))
    assert digests[partition_of("tenant1", P)] == combined({"memories": "4:12:14", "events": "0:0:0"})
    assert digests[partition_of("tenant0", P)] == combined({"memories": "2:10:20", "events": "4:1:2"})
    with_one_partition = by_partition(TABLES, 1)
    assert with_one_partition == {0: combined(totals(TABLES))}, "one partition is the whole checksum"


def test_a_change_in_one_workspace_changes_its_partition_only() -> None:
    changed = {**TABLES, "memories": {**TABLES["memories"], "tenant5": Digest(3, 7, 9)}}
    compared = partitions_compared(by_partition(TABLES, P), by_partition(changed, P))
    assert [p["partition"] for p in compared if not p["match"]] == [partition_of("tenant5", P)]
    lines = partition_lines(compared)
    assert len(lines) == P + 1
    assert lines[-1] == f"partitions that differ: {partition_of('tenant5', P)} of {P}"
    assert partition_lines(partitions_compared(by_partition(TABLES, 1), by_partition(TABLES, 1))) == []
