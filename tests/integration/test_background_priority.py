"""A niced process's PostgreSQL work runs niced too (the embedded server is on this machine): a
background worker's recalls must not compete with the API's searches as equals."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import Harness

pytestmark = pytest.mark.integration

PROBE = textwrap.dedent(
    """
    import asyncio, os, sys
    from noema.adapters.postgres import create_pool

    async def main() -> None:
        if int(sys.argv[3]):
            os.nice(int(sys.argv[3]))
        pool = await create_pool(sys.argv[1], sys.argv[2], min_size=2, max_size=2)
        async with pool.acquire() as a, pool.acquire() as b:
            for conn in (a, b):
                pid = await conn.fetchval("SELECT pg_backend_pid()")
                print(os.getpriority(os.PRIO_PROCESS, pid))
        await pool.close()

    asyncio.run(main())
    """
)


def _backend_niceness(harness: Harness, niceness: int) -> list[int]:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            PROBE,
            str(harness.settings.database_url),
            harness.settings.db_schema,
            str(niceness),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [int(line) for line in out.stdout.split()]


async def test_the_server_processes_of_a_niced_process_get_its_niceness(harness: Harness) -> None:
    assert _backend_niceness(harness, 7) == [7, 7]


async def test_an_unniced_process_leaves_its_server_processes_alone(harness: Harness) -> None:
    assert os.nice(0) == 0, "the test process itself must run at the default priority"
    assert _backend_niceness(harness, 0) == [0, 0]
