"""cancel_and_wait ends a loop whose cancellation asyncio.wait_for swallowed (Python 3.11)."""

from __future__ import annotations

import asyncio
import sys

from noema.runtime.tasks import cancel_and_wait


async def _loop(handed: asyncio.Queue[asyncio.Future[None]]) -> None:
    """A heartbeat's shape: forever, wait (with a timeout) for an answer to a request."""
    loop = asyncio.get_running_loop()
    while True:
        answer: asyncio.Future[None] = loop.create_future()
        handed.put_nowait(answer)
        await asyncio.wait_for(answer, 10)


async def _answered_and_cancelled(cancel: bool) -> tuple[asyncio.Task[None], asyncio.Future[None]]:
    handed: asyncio.Queue[asyncio.Future[None]] = asyncio.Queue()
    task = asyncio.create_task(_loop(handed))
    answer = await handed.get()
    await asyncio.sleep(0)  # the loop is inside wait_for now
    answer.set_result(None)  # the answer comes in the iteration of the cancellation
    if cancel:
        task.cancel()
    return task, answer


async def test_a_plain_cancel_can_be_lost_on_this_python() -> None:
    """The premise: on 3.11 the loop survives its cancellation (3.12 fixed wait_for)."""
    task, _ = await _answered_and_cancelled(cancel=True)
    for _ in range(5):
        await asyncio.sleep(0)
    assert task.done() is (sys.version_info >= (3, 12))
    task.cancel()  # no answer pending now: this one is honoured
    await asyncio.wait({task}, timeout=5)
    assert task.cancelled()


async def test_a_loop_cancelled_as_its_request_is_answered_is_still_stopped() -> None:
    task, _ = await _answered_and_cancelled(cancel=False)
    # cancel_and_wait's first cancel lands in the answer's iteration, where it may be lost.
    assert await asyncio.wait_for(cancel_and_wait(task), 5) is None
    assert task.cancelled()


async def test_the_exception_a_task_ended_with_is_returned() -> None:
    async def fails() -> None:
        raise ValueError("broken")

    task = asyncio.create_task(fails())
    await asyncio.sleep(0)
    error = await cancel_and_wait(task)
    assert isinstance(error, ValueError)


async def test_a_finished_task_is_left_as_it_is() -> None:
    task = asyncio.create_task(asyncio.sleep(0, result=3))
    await task
    assert await cancel_and_wait(task) is None
    assert task.result() == 3
