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
