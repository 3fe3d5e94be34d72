"""The durable consumer of one partition of a partitioned worker (attend, conflicts), as its owner
opens it: where it starts, and what becomes of the consumers of an earlier partition count.

- **The partition's consumer exists** (this layout ran before): it is re-created at its ack floor
  + 1 with the filters it had, so what a former owner left unacknowledged is delivered again at
  once and in order (not after its ack wait, behind newer messages). The worker recognises what was
  already decided (attend: each mind's last decision's ``through_seq``; conflicts: a settled fact).
- **It does not, and consumers of another partition count exist** (``NOEMA_PARTITIONS`` changed,
  1 included): it starts just after the lowest ack floor among them — everything below was handled
  — and also reads what the old layout stored (``old_filter(count)``: the old subjects, e.g. the
  unpartitioned observations); the worker skips messages of other partitions' workspaces. When a
  partition of the old count never had its consumer (the count changed again before every partition
  was claimed), nothing of that partition was handled: it starts no later than the oldest message
  stored on the old count's subjects. Once every partition of this layout has its consumer, the old
  layout's consumers are deleted: those of a smaller count (the workers' NATS users may delete no
  others); a larger count's are left for the operator (deploy/README.md, "Partitions").
- **Nothing exists** (a new deployment, or observations published while no worker had ever run):
  it delivers everything on its filter, and the unpartitioned observations stored before (when
  there are any).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import structlog
from nats.aio.client import Client as NATS
from nats.js.api import ConsumerInfo, DeliverPolicy
from nats.js.errors import NotFoundError

from noema.adapters.jetstream import first_seq_on
from noema.adapters.pull import Puller, durable_puller
from noema.topology import Topology

__all__ = ["API_TIMEOUT_S", "partition_puller"]

log = structlog.get_logger("noema.partitions")

API_TIMEOUT_S = 2.0
"""How long a consumer request may wait for JetStream. After a server loss a stream has no leader
for seconds; a shorter wait lets the owner ask again sooner (it gives the partition back and claims
it again next round, see noema.runtime.partitions) instead of waiting out nats-py's 5 s."""


def _filters(info: ConsumerInfo) -> list[str]:
    config = info.config
    return list(config.filter_subjects or ([config.filter_subject] if config.filter_subject else []))


def _floor(info: ConsumerInfo) -> int:
    return int(info.ack_floor.stream_seq if info.ack_floor else 0)


async def _layouts(nc: NATS, stream: str, topology: Topology, worker: str) -> dict[int, list[ConsumerInfo]]:
    """The consumers of ``worker`` on ``stream``, by the partition count they were made for."""
    found: dict[int, list[ConsumerInfo]] = {}
    for info in await nc.jetstream(timeout=API_TIMEOUT_S).consumers_info(stream):
        count = topology.layout_of_durable(worker, info.name)
        if count is not None:
            found.setdefault(count, []).append(info)
    return found


async def partition_puller(
    nc: NATS,
    topology: Topology,
    stream: str,
    worker: str,
    partition: int,
    own_filter: str,
    batch: int,
    *,
    ack_wait: float,
    max_ack_pending: int,
    old_filter: Callable[[int], str] | None = None,
) -> Puller:
    """Open partition ``partition``'s consumer of ``worker`` (see the module doc) and pull from it."""
    js = nc.jetstream(timeout=API_TIMEOUT_S)
    durable = topology.partitioned_durable(worker, partition)
    layouts = await _layouts(nc, stream, topology, worker)
    current = {info.name: info for info in layouts.pop(topology.partitions, [])}
    filters = [own_filter]
    start = 0
    if durable in current:
        info = current[durable]
        filters, start = _filters(info) or filters, _floor(info)
        with contextlib.suppress(NotFoundError):
            await js.delete_consumer(stream, durable)
    elif layouts:
        start = min(_floor(info) for infos in layouts.values() for info in infos)
        for count, infos in layouts.items():
            if len(infos) < count:  # a partition of that count was never consumed
                first = await first_seq_on(js, stream, old_filter(count) if old_filter else own_filter)
                start = min(start, first - 1) if first else start
        if old_filter is not None:
            filters += [old_filter(count) for count in sorted(layouts)]
        log.info(
            "partition consumer created after another partition count",
            worker=worker,
            partition=partition,
            earlier=sorted(layouts),
            from_seq=start + 1,
        )
    elif old_filter is not None and topology.partitioned and await first_seq_on(js, stream, old_filter(1)):
        filters.append(old_filter(1))  # stored unpartitioned while no consumer existed: read from 1
    puller = await durable_puller(
        nc,
        stream,
        durable,
        filters[0] if len(filters) == 1 else filters,
        batch,
        ack_wait=ack_wait,
        max_ack_pending=max_ack_pending,
        deliver_policy=DeliverPolicy.BY_START_SEQUENCE if start else DeliverPolicy.ALL,
        opt_start_seq=start + 1 if start else None,
        api_timeout=API_TIMEOUT_S,
    )
    if layouts:
        await _retire_earlier(nc, topology, stream, worker)
    return puller


async def _retire_earlier(nc: NATS, topology: Topology, stream: str, worker: str) -> None:
    """Delete the consumers of earlier partition counts once every partition of this one has its
    consumer (read after creating ours: of two owners creating theirs at once, the later sees both)."""
    layouts = await _layouts(nc, stream, topology, worker)
    if len(layouts.pop(topology.partitions, [])) < topology.partitions:
        return
    for count, infos in layouts.items():
        if count > topology.partitions:  # not this worker's to delete (noema.runtime.identities)
            log.warning(
                "consumers of a larger partition count are left for the operator to delete",
                worker=worker,
                consumers=sorted(info.name for info in infos),
            )
            continue
        for info in infos:
            with contextlib.suppress(NotFoundError):
                await nc.jetstream(timeout=API_TIMEOUT_S).delete_consumer(stream, info.name)
    if layouts:
        log.info("consumers of an earlier partition count retired", worker=worker, earlier=sorted(layouts))
