"""Fixtures every test may use: a clean configuration and inventory."""

from oslo_config import cfg
from oslo_config import fixture as config_fixture
import pytest

from scheduler import config
from scheduler import conf as scheduler_conf
from scheduler.db import api as db_api
from scheduler.db import migration
from scheduler import rpc
from scheduler.resources import liveness
from tests.unit import fixtures

CONF = cfg.CONF

#: Functional test files that take longest, the longest first (from the
#: suite's ``--durations`` on two cores).  The test processes take whole
#: files (``--dist loadfile``) in the order of the collection
#: (``--no-loadscope-reorder``): a long file taken last would keep one
#: process busy after the others ran out of files.
LONGEST_FILES = (
    'test_broker_restarts.py',
    'test_database_outage.py',
    'test_broker_restarts_load.py',
    'test_report_intake.py',
    'test_stop_backlog.py',
    'test_rolling_upgrade.py',
    'test_simulator_scale.py',
    'test_liveness.py',
)


def _file_order(item, tests_in_file: dict) -> tuple:
    """Where ``item``'s file goes: the longest functional files first,
    then the other functional files, then the rest (the unit tests,
    short files, which fill the end); within a kind, the files with
    the most tests first.  A file's own tests keep their order."""
    path = item.path
    functional = path.parent.name == 'functional'
    if functional and path.name in LONGEST_FILES:
        return (0, LONGEST_FILES.index(path.name))
    return (1 if functional else 2, -tests_in_file[path])


def pytest_collection_modifyitems(config, items):
    tests_in_file: dict = {}
    for item in items:
        tests_in_file[item.path] = tests_in_file.get(item.path, 0) + 1
    # Stable: a file's tests stay together and in order.
    items.sort(key=lambda item: _file_order(item, tests_in_file)
               + (str(item.path),))


_parsed = False


def _parse_once() -> None:
    global _parsed
    if not _parsed:
        config.parse_args([], default_config_files=[], setup_logging=False)
        _parsed = True


@pytest.fixture(autouse=True)
def conf(tmp_path):
    """oslo.config's Config fixture on ``CONF``, state under ``tmp_path``.

    Tests set options with ``conf.config(name=value, group=...)``; all
    of it is undone after the test.
    """
    _parse_once()
    fix = config_fixture.Config(CONF)
    fix.setUp()
    # reset() at clean-up also drops library defaults we set: set again.
    scheduler_conf.database.register_opts(CONF)
    fix.config(state_path=str(tmp_path), transport_url='fake://')
    # Claims are written as they are made: every test gets an empty
    # inventory (in memory; the ``inventory`` fixture gives a file).
    fixtures.memory_inventory()
    yield fix
    # A stretch without reports a test recorded must not age the next
    # test's hosts.
    liveness.forget_deafness()
    db_api.reset_engine()
    fix.cleanUp()
    scheduler_conf.database.register_opts(CONF)


@pytest.fixture(autouse=True)
def stays_unpatched():
    """The test process is never greened for eventlet.

    Importing ``scheduler.cmd`` monkey-patches the process as the
    console scripts need; a test that does it by accident turns every
    later test's threads and locks green, and one of them (a native
    thread started earlier meeting a green lock) then hangs the run.
    Import such modules with ``fixtures.import_unpatched``.
    """
    yield
    from eventlet import patcher
    assert not patcher.is_monkey_patched('socket'), (
        'this test greened the test process for eventlet: import '
        'scheduler.cmd modules with fixtures.import_unpatched')


@pytest.fixture
def inventory(tmp_path, conf):
    """A migrated SQLite inventory in the test's own directory."""
    url = 'sqlite:///%s' % (tmp_path / 'inventory.sqlite')
    conf.config(connection=url, group='database')
    db_api.reset_engine()
    migration.db_sync()
    yield db_api
    db_api.reset_engine()


@pytest.fixture
def fake_transport(conf):
    """The in-process ``fake://`` transport, closed after the test."""
    transport = rpc.get_transport(CONF, url='fake://')
    yield transport
    rpc.cleanup()
