"""Services starting together on an empty database migrate it once.

Each ``scheduler-service`` runs the schema migrations at start-up
(``migration.db_sync``); several started at once on a new PostgreSQL,
MariaDB or SQLite database used to race to create the same tables, and
all but one died.  The migration lock makes the others wait, then find
the schema at its head.
"""

import subprocess
import sys

import pytest

from scheduler.db import migration

SYNC = ('import sys; from scheduler.db import migration; '
        'migration.db_sync(connection=sys.argv[1])')
PROCESSES = 4


def _sync_together(url: str) -> list:
    procs = [subprocess.Popen([sys.executable, '-c', SYNC, url],
                              stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
             for _ in range(PROCESSES)]
    return [(p.wait(timeout=120), p.stdout.read()) for p in procs]


@pytest.mark.parametrize('backend', ['postgresql_url', 'mysql_url',
                                     'sqlite_file_url'])
def test_services_starting_together_migrate_an_empty_database_once(
        request, backend):
    url = request.getfixturevalue(backend)
    results = _sync_together(url)
    assert [code for code, _out in results] == [0] * PROCESSES, \
        '\n'.join(out for code, out in results if code)
    assert migration.db_version(connection=url) == migration.head()


@pytest.fixture
def sqlite_file_url(tmp_path) -> str:
    return 'sqlite:///%s' % (tmp_path / 'inventory.sqlite')
