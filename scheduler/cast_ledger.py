"""The worker's side of the taken ``schedule_run_instance`` casts.

What the inventory keeps (``scheduler.db.taken_casts``) is described
there; here: what a row holds of a cast (its context, the broker user
that sent it and its arguments as they travelled), which worker holds
it, how old a row must be to be taken over, and the database outages,
which never cost a cast: a row that cannot be written leaves the cast
served as before rows existed.
"""

import datetime
import os
import socket
from typing import Callable, Iterator

from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils import timeutils

from scheduler import context as context_mod
from scheduler.db import availability
from scheduler.db import taken_casts
from scheduler import rpc

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

#: The arguments of ``schedule_run_instance`` a row keeps.
ARGUMENTS = ('request_spec', 'filter_properties', 'spec_obj',
             'instance_uuids')


def worker() -> str:
    """This worker, as rows name it (read at each use: workers fork)."""
    return '%s:%d' % (CONF.host or socket.gethostname(), os.getpid())


def takeover_time() -> int:
    """Seconds after which a row is taken over (``cast_takeover_time``,
    else ``service_down_time``)."""
    return (CONF.scheduler.cast_takeover_time
            or CONF.scheduler.service_down_time)


def cast_uuids(args: dict) -> list:
    """The instance uuids a cast names, read without judging it (the
    manager refuses a malformed cast after its row is written)."""
    uuids = args.get('instance_uuids')
    spec = args.get('request_spec')
    if uuids is None and isinstance(spec, dict):
        uuids = spec.get('instance_uuids')
    if uuids is None:
        spec_obj = args.get('spec_obj')
        getter = getattr(spec_obj, 'obj_get', None)
        legacy = getter('instance_uuid') if getter else None
        uuids = [legacy] if legacy else []
    if not isinstance(uuids, (list, tuple)):
        return []
    return [u for u in uuids if isinstance(u, str)]


def record(ctxt, args: dict) -> taken_casts.Cast | None:
    """The row of a cast just taken, committed; None without one.

    No instance uuid: nothing to build, the cast is refused anyway.
    The database away: the cast is served as it was before rows
    existed (what its instances need is the same inventory, so it
    likely meets the outage too, and says so per instance), not
    dropped; the outage is counted and logged once.
    """
    uuids = cast_uuids(args)
    if not uuids:
        return None
    serializer = rpc.ServerSerializer()
    message = {
        'context': ctxt.to_dict(),
        'sender': getattr(ctxt, 'sender', None),
        'args': {name: serializer.serialize_entity(ctxt, args.get(name))
                 for name in ARGUMENTS},
    }
    try:
        return taken_casts.record(uuids, message, worker())
    except Exception as e:
        if not availability.is_outage(e):
            raise
        availability.count('taken casts not recorded (served anyway)')
        return None


def forget(taken: taken_casts.Cast | None) -> None:
    """The cast is over: its row goes (kept through an outage, it is
    taken over later, and finds its instances built or serves them).
    """
    if taken is None or not taken.instance_uuids:
        return
    try:
        taken_casts.forget(taken)
    except Exception as e:
        if not availability.is_outage(e):
            raise
        availability.count('taken casts not cleared')


def hand_back(taken: taken_casts.Cast) -> None:
    """The service stops before the cast is over: its row stays, and
    another worker (or this service, started again) takes it over
    (``hand_back_all``), finding the instances built meanwhile."""
    LOG.info('Stopping: the cast for instance(s) %s is left to another '
             'worker (its record stays in the inventory)',
             ', '.join(taken.instance_uuids))


def hand_back_all() -> None:
    """The worker stops: the rows it still holds are dated back to the
    cutoff, so that the next takeover of any worker serves them rather
    than one ``takeover_time()`` later.  A thread of this worker still
    serving one (left behind by the stop) loses it at its next claim,
    as any worker whose cast is taken over.  The database away: the
    rows wait out ``takeover_time()``."""
    overdue_at = timeutils.utcnow() - datetime.timedelta(
        seconds=takeover_time() + 1)
    try:
        left = taken_casts.hand_back(worker(), overdue_at)
    except Exception as e:
        if not availability.is_outage(e):
            raise
        availability.count('taken casts not handed back')
        return
    if left:
        LOG.info('Stopping: %d cast(s) not finished are left to the other '
                 'workers, to be taken over now', left)


def replayed(taken: taken_casts.Cast) -> tuple:
    """The context and arguments of a row's cast, as the dispatcher
    would have given them, with only the instances still to build."""
    message = taken.cast
    ctxt = context_mod.RequestContext.from_dict(message['context'])
    ctxt.sender = message.get('sender')
    serializer = rpc.ServerSerializer()
    args = {name: serializer.deserialize_entity(ctxt, value)
            for name, value in message['args'].items()}
    return ctxt, args


def take_over(placements: Callable[[list], dict]) -> Iterator[tuple]:
    """The overdue rows this worker took over, each with the instances
    still to build, as ``(row, context, arguments)`` (``replayed``);
    rows whose instances all run (their computes listed them) are
    deleted.

    An instance placed and not yet listed by its compute is served
    again: its worker may have died between the claim and the build's
    cast.  Served again, it gets the placement it has (an earlier try
    of the same request) and its build goes to that host once more; a
    compute that already runs it says so and builds nothing.

    ``placements``: uuid list -> the placements found (the inventory's,
    ``HostManager.placements``).
    """
    cutoff = timeutils.utcnow() - datetime.timedelta(
        seconds=takeover_time())
    me = worker()
    for seen in taken_casts.overdue(cutoff):
        taken = taken_casts.take_over(seen, me)
        if taken is None:
            continue  # another worker took it, or it was finished
        placed = placements(list(taken.instance_uuids))
        left = [u for u in taken.instance_uuids
                if u not in placed or placed[u]['pending']]
        if not left:
            taken_casts.forget(taken)
            LOG.info('Cast for instance(s) %(uuids)s taken by %(by)s at '
                     '%(at)s: every instance already runs; its record '
                     'is dropped', {'uuids': ', '.join(taken.instance_uuids),
                                    'by': seen.taken_by,
                                    'at': seen.taken_at.isoformat()})
            continue
        taken.instance_uuids = left
        # After the context is made: the line carries the cast's request.
        ctxt, args = replayed(taken)
        LOG.info('Replaying the cast for instance(s) %(uuids)s taken by '
                 '%(by)s at %(at)s and not finished',
                 {'uuids': ', '.join(left), 'by': seen.taken_by,
                  'at': seen.taken_at.isoformat()})
        yield taken, ctxt, args
