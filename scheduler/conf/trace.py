"""Options in ``[trace]``: recording the requests served, for a replay.

A trace is what ``scheduler-manage replay`` runs offline against a
fleet snapshot under other configurations (see ``scheduler.replay``
and the admin guide, "Try a change before you make it").  Off by
default; ``enabled`` alone turns it on.
"""

from oslo_config import cfg

trace_group = cfg.OptGroup(
    'trace', title='Request trace',
    help='Record the placement requests this service serves, and the '
         'deletions it hears of, to a bounded rotating file that '
         '"scheduler-manage replay" can replay against other '
         'configurations.')

trace_opts = [
    cfg.BoolOpt(
        'enabled',
        default=False,
        help="""
Record every select_destinations request this service answers, and
each instance of a schedule_run_instance cast as a request of its own
(the request spec, the instance uuids, the hosts chosen or NoValidHost
with the filter walk, the time and the decision time), and every
instance deletion it hears of, one JSON line each.  Off by default.
Recording never fails a request: a file that cannot be written is
logged once and recording stops until the next SIGHUP.  Changes take
effect on SIGHUP.

Related options:

* ``path``: where the trace goes
* ``max_bytes``, ``backup_count``: how much of it is kept
* ``clear_project_ids``: project ids in clear instead of hashed
"""),
    cfg.StrOpt(
        'path',
        default='$state_path/scheduler-trace.jsonl',
        help="""
The trace file.  With several workers (``[scheduler] workers``) each
worker process writes its own file, this path with ``.<pid>`` added;
``scheduler-manage replay --trace`` takes any number of files (and
shell patterns) and merges them in time order.

Related options:

* ``enabled``
* ``max_bytes``
"""),
    cfg.IntOpt(
        'max_bytes',
        default=64 * 1024 * 1024,
        min=4096,
        help="""
Size in bytes at which the trace file is rotated: it is renamed with
``.1`` added (older ones shifting to ``.2`` and on) and a new file is
started, so the disk used is bounded by about
``max_bytes * (backup_count + 1)``.

Related options:

* ``backup_count``
* ``path``
"""),
    cfg.IntOpt(
        'backup_count',
        default=3,
        min=0,
        help="""
Rotated trace files kept (``path.1`` ... ``path.N``); the oldest is
deleted at each rotation.  0 keeps none: the file starts over when it
reaches ``max_bytes``.

Related options:

* ``max_bytes``
"""),
    cfg.BoolOpt(
        'clear_project_ids',
        default=False,
        help="""
Write project and user ids as they are.  By default they are replaced
by a keyed hash (the same id always gives the same hash within one
service's run of ``hash_key``, so per-project patterns stay visible in
a replay, but the file does not name tenants).  Filters that read the
project id (per-project aggregates) replay faithfully only with ids in
clear.

Related options:

* ``hash_key``
"""),
    cfg.StrOpt(
        'hash_key',
        default='',
        secret=True,
        help="""
Key of the hash that replaces project and user ids in the trace.
Empty: the service's ``[DEFAULT] host`` name; set the same key on
every service whose traces are replayed together so that a project
hashes the same in all of them.

Related options:

* ``clear_project_ids``
"""),
]


def list_opts() -> dict:
    return {trace_group: trace_opts}
