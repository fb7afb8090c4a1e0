"""The inventory's API: plain functions, one transaction each.

Callers get plain dicts and lists of dicts, never ORM rows, so nothing
outside this package holds a session or lazily loads from one.  Every
function opens its own transaction on the one engine of the process
(``get_engine()``), made on first use from ``[database] connection``.

The functions live with their tables (``engine``, ``hosts``,
``aggregates``, ``instances``); this module is the one name callers
import them by, so that moving a function between those modules
changes no caller.
"""

from scheduler.db.aggregates import aggregate_create
from scheduler.db.aggregates import aggregate_delete
from scheduler.db.aggregates import aggregate_get
from scheduler.db.aggregates import aggregate_get_all
from scheduler.db.aggregates import aggregate_host_add
from scheduler.db.aggregates import aggregate_host_remove
from scheduler.db.aggregates import aggregate_metadata_set
from scheduler.db.aggregates import aggregate_metadata_unset
from scheduler.db.aggregates import aggregate_update
from scheduler.db.aggregates import aggregate_upsert
from scheduler.db.aggregates import AggregateIdent
from scheduler.db.aggregates import aggregates_stamp
from scheduler.db.aggregates import AVAILABILITY_ZONE_KEY
from scheduler.db.engine import get_engine
from scheduler.db.engine import make_engine
from scheduler.db.engine import reset_engine
from scheduler.db.hosts import host_delete
from scheduler.db.hosts import host_report_times
from scheduler.db.hosts import host_reports_changed_since
from scheduler.db.hosts import host_reports_get
from scheduler.db.hosts import host_reports_get_all
from scheduler.db.hosts import host_reports_save
from scheduler.db.hosts import host_reports_save_with_usage
from scheduler.db.hosts import host_reports_touch
from scheduler.db.hosts import report_seq
from scheduler.db.instances import ACTIVE
from scheduler.db.instances import CLAIMED
from scheduler.db.instances import instance_get_all

__all__ = [
    'ACTIVE', 'AVAILABILITY_ZONE_KEY', 'AggregateIdent', 'CLAIMED',
    'aggregate_create', 'aggregate_delete', 'aggregate_get',
    'aggregate_get_all', 'aggregate_host_add', 'aggregate_host_remove',
    'aggregate_metadata_set', 'aggregate_metadata_unset',
    'aggregate_update', 'aggregate_upsert', 'aggregates_stamp',
    'get_engine', 'host_delete', 'host_report_times',
    'host_reports_changed_since', 'host_reports_get',
    'host_reports_get_all', 'host_reports_save',
    'host_reports_save_with_usage', 'host_reports_touch',
    'instance_get_all', 'make_engine', 'report_seq', 'reset_engine',
]
