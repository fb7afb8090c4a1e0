"""Writing a batch of reports so that one the inventory refuses goes alone.

Both writers of reports, the intake's (``HostManager._write_taken``)
and the periodic flush (``ReportBacklog.write``), write many nodes'
reports and the usage they carry in one transaction
(``host_reports_save_with_usage``).  One row the database refuses (a
value too long or out of range, a character it cannot store, a
constraint) fails that transaction, and would fail it again at every
retry: no other report of the batch would ever be written, and the
other workers would judge those nodes down.  The intake refuses the
values known to be unstorable; this is for the kinds not foreseen.

So a batch that fails with an error that blames a row (``row_fault``:
a value the columns cannot hold, a constraint) is written again in
halves, each in a transaction of its own, down to single nodes: every
part that can be written is, and a node that fails alone is refused:
dropped, with one ERROR line naming it and the database's error, and
counted in ``scheduler_rejected_requests_total`` as the intake's
refusals are.  Any other error (an outage, a deadlock, a missing table
or column, a permission: the database's, not a row's) stops there: what
is not written yet is the caller's to keep, as before, rather than
every report of the fleet dropped one by one.  A node's report and the
usage it carries are one part, in one transaction.
"""

import dataclasses
import typing

from oslo_db import exception as db_exc
from oslo_log import log as logging
from sqlalchemy import exc as sa_exc

from scheduler.db import availability
from scheduler import metrics

LOG = logging.getLogger(__name__)

#: The method refused reports are counted under: every report reaches
#: a worker as one (on the intake or the fanout).
METHOD = 'update_service_capabilities'


@dataclasses.dataclass
class Part:
    """One node's part of a batch: its report row (``report_row``) and
    the usage it carries (``usage.NodeReport``), either may be None;
    ``item``, the caller's own."""

    key: tuple
    row: dict | None = None
    usage: typing.Any = None
    item: typing.Any = None


@dataclasses.dataclass
class Outcome:
    """What ``write`` did not write: the parts ``refused`` (dropped),
    and, when ``error`` (not a row's fault) stopped it, the parts
    not written because of it (``unwritten``, in the order given)."""

    refused: list
    unwritten: list
    error: BaseException | None = None


#: What the database (or its driver) says of a row it cannot store: as
#: oslo.db translates it, or as SQLAlchemy wraps the driver's error on
#: the statements oslo.db does not see.
_ROW_ERRORS = (db_exc.DBDataError, db_exc.DBConstraintError,
               db_exc.DBReferenceError, db_exc.DBDuplicateEntry,
               db_exc.DBInvalidUnicodeParameter, sa_exc.DataError,
               sa_exc.IntegrityError, UnicodeError)


def row_fault(error: BaseException) -> bool:
    """Whether ``error`` blames a row of the write, not the database: a
    later try of the same rows fails the same way."""
    if availability.is_outage(error):
        return False
    # oslo.db keeps what it has no type of its own for (PostgreSQL's
    # "value too long") as a plain DBError around SQLAlchemy's.
    seen = (error, getattr(error, 'inner_exception', None), error.__cause__)
    return any(isinstance(cause, _ROW_ERRORS) for cause in seen)


def write(save: typing.Callable, parts: list,
          written: typing.Callable[[list, typing.Any], None]) -> Outcome:
    """Write ``parts`` with ``save(rows, usage_reports)``
    (``host_reports_save_with_usage``), in one transaction if it can;
    ``written(parts, result)`` is called after each transaction that
    committed with its parts and ``save``'s answer.  Parts stay in the
    given order (key order: halves of a sorted batch are sorted)."""
    refused: list = []
    todo = [parts] if parts else []
    while todo:
        group = todo.pop(0)
        try:
            result = save([p.row for p in group if p.row is not None],
                          [p.usage for p in group if p.usage is not None])
        except Exception as e:
            if not row_fault(e):
                return Outcome(refused, [p for g in [group] + todo
                                         for p in g], e)
            if len(group) == 1:
                _refuse(group[0], e)
                refused.append(group[0])
            else:
                if group is parts:
                    LOG.debug('A write of %d node(s) failed (%s); writing '
                              'them in parts', len(group),
                              availability.describe(e))
                half = len(group) // 2
                todo[:0] = [group[:half], group[half:]]
            continue
        written(group, result)
    return Outcome(refused, [])


def _refuse(part: Part, error: BaseException) -> None:
    metrics.record_rejection(METHOD, type(error).__name__)
    LOG.error('The inventory refused the report of %(host)s/%(node)s '
              '(%(what)s); dropped, the node\'s next report is taken as '
              'any: %(error)s',
              {'host': part.key[0], 'node': part.key[1],
               'what': ' and '.join(
                   name for name, value in (('report', part.row),
                                            ('usage', part.usage))
                   if value is not None),
               'error': availability.describe(error)})
