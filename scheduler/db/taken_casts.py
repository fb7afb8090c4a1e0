"""Casts taken off the bus and not finished with: the inventory's side.

oslo.messaging's RPC server acknowledges a message as its connection
reads it, before a worker serves it: the broker cannot give a
``schedule_run_instance`` cast to another worker once one took it.
A worker killed -9 while it held casts lost them without a trace.

So a worker writes one row per cast it takes, committed before it does
anything else with the cast (``record``), and the row goes when the
cast ends (``forget``: every instance's build sent, or refused,
NoValidHost, no compute took it; each is logged where it happens).
A claim does not take its instance out of the row: between the
claim's commit and the ``run_instance`` cast to the compute, a worker
killed -9 would leave the instance claimed and never built.  The
claim checks the row's ``token`` in its transaction, and renews it
(``renew_in``, called by ``usage.claim_many`` for the cast this thread
serves, ``serving``): if another worker took the cast over meanwhile,
the claim rolls back (``TakenOver``) and that worker builds the
instance.

The database knows nothing of worker liveness: as claims expire by age
(``usage.expire``), a row older than a cutoff is taken over by any
worker (``take_over``).  A conditional UPDATE of the row's token gives
each such row to exactly one worker, whose serving renews it.

Functions return plain values, like ``scheduler.db.api``.
"""

import contextlib
import contextvars
import dataclasses
import datetime
from typing import Iterator, Sequence
import uuid as uuid_mod

from oslo_serialization import jsonutils
from oslo_utils import timeutils
import sqlalchemy as sa

from scheduler.db import engine
from scheduler.db import models
from scheduler import exception

_CAST = models.TakenCast


#: Another worker took the cast over: this one must stop serving it
#: (its claim was rolled back).
TakenOver = exception.CastTakenOver


@dataclasses.dataclass
class Cast:
    """A taken cast as the worker serving it holds it."""

    id: str
    token: str
    instance_uuids: list
    cast: dict
    taken_by: str
    taken_at: datetime.datetime


def _row_cast(row) -> Cast:
    return Cast(row.id, row.token, list(jsonutils.loads(row.instance_uuids)),
                jsonutils.loads(row.message), row.taken_by, row.taken_at)


def record(instance_uuids: Sequence[str], cast: dict, taken_by: str) -> Cast:
    """Write the row of a cast just taken; committed when this returns."""
    now = timeutils.utcnow()
    taken = Cast(str(uuid_mod.uuid4()), str(uuid_mod.uuid4()),
                 list(instance_uuids), cast, taken_by, now)

    def insert(conn) -> None:
        conn.execute(sa.insert(_CAST.__table__).values(
            id=taken.id, token=taken.token,
            instance_uuids=jsonutils.dumps(taken.instance_uuids),
            message=jsonutils.dumps(cast), taken_by=taken_by, taken_at=now))

    _one_statement(insert)
    return taken


def forget(taken: Cast) -> bool:
    """Delete the row, if this worker still holds it; whether it did."""
    def delete(conn) -> int:
        return conn.execute(sa.delete(_CAST).where(
            _CAST.id == taken.id, _CAST.token == taken.token)).rowcount

    return _one_statement(delete) == 1


def _one_statement(work):
    """``work(conn)``, one statement, committed when this returns: on
    its own where it commits alone (one round trip instead of three;
    a stopping service writes a row for each cast it hands back)."""
    if engine.statements_commit_alone():
        return engine.run_autocommit(work)
    return engine.run_in_transaction(work)


def hand_back(taken_by: str, overdue_at: datetime.datetime) -> int:
    """Date the rows ``taken_by`` holds back to ``overdue_at`` (a
    stopping worker leaves them to be taken over at once); how many."""
    def update(conn) -> int:
        return conn.execute(sa.update(_CAST).where(
            _CAST.taken_by == taken_by).values(
            taken_at=timeutils.normalize_time(overdue_at))).rowcount

    return _one_statement(update)


def renew_in(conn: sa.Connection, taken: Cast) -> None:
    """In a claim's transaction: the cast's row is still this worker's;
    renewed, a worker that makes progress is not taken over.

    The row keeps the instance: until the cast ends, a takeover sends
    the build of an instance claimed and not yet listed by its compute
    to the host claimed (the claim is found again, not made twice).
    Raises ``TakenOver`` (the caller's transaction rolls back) when the
    row is no longer this worker's: another worker serves the cast now.
    """
    changed = conn.execute(sa.update(_CAST).where(
        _CAST.id == taken.id, _CAST.token == taken.token).values(
        taken_at=timeutils.utcnow())).rowcount
    if changed != 1:
        raise TakenOver(cast_id=taken.id)


def overdue(taken_before: datetime.datetime) -> list[Cast]:
    """The rows taken (or last renewed) before ``taken_before``."""
    def read(conn) -> list:
        return [_row_cast(row) for row in conn.execute(
            sa.select(_CAST).where(
                _CAST.taken_at < timeutils.normalize_time(taken_before))
            .order_by(_CAST.taken_at))]

    return engine.run_read(read)


def take_over(seen: Cast, taken_by: str) -> Cast | None:
    """Take ``seen`` (read by ``overdue``) for this worker, or None if
    another worker took it, or it went, since it was read.

    The UPDATE is conditional on the token read: of the workers that
    try at once, exactly one changes the row; the row as it is then
    (its instances left) is returned with the new token.
    """
    token = str(uuid_mod.uuid4())
    now = timeutils.utcnow()

    def update(conn) -> Cast | None:
        if conn.execute(sa.update(_CAST).where(
                _CAST.id == seen.id, _CAST.token == seen.token).values(
                token=token, taken_by=taken_by,
                taken_at=now)).rowcount != 1:
            return None
        row = conn.execute(sa.select(_CAST).where(
            _CAST.id == seen.id)).first()
        return None if row is None else _row_cast(row)

    return engine.run_in_transaction(update)


_SERVING: contextvars.ContextVar = contextvars.ContextVar(
    'scheduler_taken_cast', default=None)


@contextlib.contextmanager
def serving(taken: Cast | None) -> Iterator[None]:
    """Claims made inside renew ``taken`` (``usage.claim_many``).

    A context variable: each green thread (eventlet) and each native
    thread (threading) that serves a message has its own.
    """
    reset = _SERVING.set(taken)
    try:
        yield
    finally:
        _SERVING.reset(reset)


def current() -> Cast | None:
    """The cast the running thread serves, if its row was written."""
    return _SERVING.get()
