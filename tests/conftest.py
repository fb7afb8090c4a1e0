"""Fixtures every test may use: a clean configuration and inventory."""

import pytest
from oslo_config import cfg

from scheduler import config
from scheduler.db import api as db_api
from scheduler.db import migration
from scheduler import rpc

CONF = cfg.CONF

_parsed = False


def _parse_once() -> None:
    global _parsed
    if not _parsed:
        config.parse_args([], default_config_files=[], setup_logging=False)
        _parsed = True


@pytest.fixture(autouse=True)
def conf(tmp_path):
    """Parsed ``CONF`` with a private state_path; overrides undone after."""
    _parse_once()
    CONF.set_override('state_path', str(tmp_path))
    CONF.set_override('transport_url', 'fake://')
    yield CONF
    CONF.reset()
    CONF.clear_override('state_path')
    CONF.clear_override('transport_url')
    for group in list(CONF._groups):
        for name in CONF[group]:
            try:
                CONF.clear_override(name, group=group)
            except cfg.NoSuchOptError:
                pass
    for name in list(CONF):
        try:
            CONF.clear_override(name)
        except (cfg.NoSuchOptError, TypeError):
            pass


@pytest.fixture
def inventory(tmp_path, conf):
    """A migrated SQLite inventory in the test's own directory."""
    url = 'sqlite:///%s' % (tmp_path / 'inventory.sqlite')
    conf.set_override('connection', url, group='database')
    db_api.reset_engine()
    migration.db_sync()
    yield db_api
    db_api.reset_engine()


@pytest.fixture
def fake_transport(conf):
    """The in-process ``fake://`` transport, closed after the test."""
    transport = rpc.get_transport(conf, url='fake://')
    yield transport
    rpc.cleanup()
