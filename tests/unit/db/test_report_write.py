"""Intake reports and the usage they carry, written in one transaction
(``host_reports_save_with_usage``), on a migrated SQLite file.

The same scenario runs against PostgreSQL and MariaDB in
tests/functional/db/test_report_write.py.
"""

import datetime

from scheduler.db import api
from scheduler.db import usage
from tests.unit import fixtures

T0 = datetime.datetime(2026, 11, 1, 12, 0, 0, 250000)


def _at(seconds):
    return T0 + datetime.timedelta(seconds=seconds)


def _row(host, node, at, used=0):
    return {'host': host, 'nodename': node, 'uuid': None, 'disabled': False,
            'updated_at': at, 'report': {'used': used}}


def _usage(host, node, at, used=0, listed=()):
    return usage.NodeReport(host, node, memory_mb_used=used, vcpus_used=0,
                            local_gb_used=0, num_instances=len(listed),
                            updated_at=at, instance_uuids=frozenset(listed))


def _claim(n, host, node):
    return usage.claim(usage.ClaimRequest(
        fixtures.uuid(n), host, node, 1024, 1, 10,
        limits={'memory_mb': 65536}))


def _by_key(rows):
    return sorted(rows, key=lambda r: (r['host'], r['nodename']))


def _by_uuid(rows):
    return sorted(rows, key=lambda r: r['instance_uuid'])


def _check_read_back(written, usage_reports):
    """What the write read back is what the inventory holds after it."""
    keys = sorted({r.key for r in usage_reports})
    assert _by_key(written.applied.rows) == _by_key(
        usage.usage_get_nodes(keys))
    assert _by_uuid(written.applied.pending) == _by_uuid(
        usage.pending_claims(keys))


def write_reports_with_usage():
    """New nodes; then, in one write, a report that confirms a claim,
    one that unlists a settled placement, one with only a new time, an
    older one (skipped), a new node with no usage, and a report the
    usage of which is not carried."""
    nodes = [('h1', 'n1'), ('h1', 'n2'), ('h2', 'h2'), ('h4', 'h4')]
    first = [_usage(host, node, _at(0)) for host, node in nodes]
    written = api.host_reports_save_with_usage(
        [_row(host, node, _at(0)) for host, node in nodes], first)
    assert written.seq == api.report_seq()
    assert written.applied.confirmed == []
    _check_read_back(written, first)
    _claim(1, 'h1', 'n1')
    _claim(2, 'h2', 'h2')
    _claim(3, 'h1', 'n2')
    # Built and listed: settled.
    usage.confirm('h2', [fixtures.uuid(2)])
    usage.apply_reports([_usage('h2', 'h2', _at(1), used=1024,
                                listed=[fixtures.uuid(2)])])
    seq = api.report_seq()

    second = [
        # Lists claim 1: confirmed.
        _usage('h1', 'n1', _at(2), used=1024, listed=[fixtures.uuid(1)]),
        # Claim 3 not listed (not built yet): it stays pending.
        _usage('h1', 'n2', _at(2), used=512),
        # No longer lists the settled placement 2: pending again.
        _usage('h2', 'h2', _at(2), used=0),
        # Only a new time.
        _usage('h4', 'h4', _at(2)),
    ]
    written = api.host_reports_save_with_usage(
        [_row('h1', 'n1', _at(2), 1024), _row('h1', 'n2', _at(2), 512),
         _row('h2', 'h2', _at(2)), _row('h3', 'h3', _at(2)),
         _row('h4', 'h4', _at(2)),
         # Older than the stored one: skipped.
         _row('h4', 'h4', _at(-1), 99)],
        second + [_usage('h1', 'n2', _at(-1), used=99)])
    assert written.seq == seq + 1 == api.report_seq()
    assert written.applied.confirmed == [fixtures.uuid(1)]
    _check_read_back(written, second)
    pending = {p['instance_uuid']: p for p in written.applied.pending}
    assert sorted(pending) == sorted([fixtures.uuid(2), fixtures.uuid(3)])
    assert pending[fixtures.uuid(2)]['status'] == 'unlisted'
    stored = {(r['host'], r['nodename']): r
              for r in api.host_reports_get_all()}
    assert sorted(stored) == sorted(nodes + [('h3', 'h3')])
    assert {key: (r['report'], r['updated_at'], r['changed_seq'])
            for key, r in stored.items()} == {
        ('h1', 'n1'): ({'used': 1024}, _at(2), seq + 1),
        ('h1', 'n2'): ({'used': 512}, _at(2), seq + 1),
        ('h2', 'h2'): ({'used': 0}, _at(2), seq + 1),
        ('h3', 'h3'): ({'used': 0}, _at(2), seq + 1),
        ('h4', 'h4'): ({'used': 0}, _at(2), seq + 1)}
    assert sorted((r['host'], r['nodename'])
                  for r in api.host_reports_changed_since(seq)) == sorted(
                      stored)
    rows = {(r['host'], r['nodename']): r
            for r in usage.usage_get_nodes(sorted(stored))}
    assert rows[('h1', 'n2')]['reported_memory_mb'] == 512
    assert rows[('h4', 'h4')]['reported_at'] == _at(2)

    # An older write of a node changes nothing, and reads back what is.
    older = [_usage('h1', 'n2', _at(1), used=99)]
    written = api.host_reports_save_with_usage(
        [_row('h1', 'n2', _at(1), 99)], older)
    _check_read_back(written, older)
    assert written.applied.rows[0]['reported_memory_mb'] == 512
    assert api.host_reports_get([('h1', 'n2')])[0]['report'] == {
        'used': 512}


def test_reports_and_their_usage_are_written_and_read_back(inventory):
    write_reports_with_usage()


def test_reports_without_usage_are_written(inventory):
    written = api.host_reports_save_with_usage([_row('h1', 'h1', T0)], [])
    assert written.applied is None
    assert written.seq == api.report_seq()
    assert [r['host'] for r in api.host_reports_get_all()] == ['h1']
