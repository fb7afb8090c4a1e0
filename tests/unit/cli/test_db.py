"""``scheduler-manage db sync`` and ``db version``."""

import re

import pytest

from scheduler.db import api as db_api
from scheduler import urls
from scheduler.db import migration
from tests.unit import cli

#: A server that refuses at once (nothing listens on the discard port).
UNREACHABLE = 'mysql+pymysql://sched:s3cr%40t@127.0.0.1:9/scheduler'
PASSWORD_FORMS = ('s3cr@t', 's3cr%40t')


@pytest.fixture
def manage(monkeypatch, capsys, tmp_path):
    return cli.Manage(monkeypatch, capsys, tmp_path)


@pytest.fixture
def empty_db(conf, tmp_path):
    """``[database] connection`` naming a database with no schema yet."""
    url = 'sqlite:///%s' % (tmp_path / 'new' / 'inventory.sqlite')
    conf.config(connection=url, group='database')
    db_api.reset_engine()
    yield url
    db_api.reset_engine()


@pytest.fixture
def unreachable(conf):
    conf.config(connection=UNREACHABLE, max_retries=0, group='database')
    return UNREACHABLE


def test_sync_says_what_changed(manage, empty_db):
    result = manage('db', 'sync')
    assert result.code == 0, result.err
    assert result.out == (
        'Database at %s upgraded from an empty database (no schema) to %s\n'
        % (empty_db, migration.head()))
    assert migration.db_version(connection=empty_db) == migration.head()


def test_sync_again_changes_nothing(manage, empty_db):
    manage('db', 'sync')
    result = manage('db', 'sync')
    assert result.code == 0
    assert result.out == 'Database at %s is already at %s\n' % (
        empty_db, migration.head())


def test_sync_json(manage, empty_db):
    head = migration.head()
    result = manage('db', 'sync', '--version', head, '--format', 'json')
    assert result.code == 0, result.err
    assert result.json() == {'database': empty_db, 'from': None, 'to': head,
                             'head': head, 'changed': True}


def test_sync_to_an_unknown_revision(manage, empty_db):
    result = manage('db', 'sync', '--version', 'nope')
    assert result.code == 1
    assert result.out == ''
    assert result.err.startswith('CommandError: ')
    assert "'nope'" in result.err


def test_version_of_an_empty_database(manage, empty_db):
    result = manage('db', 'version', '--format', 'json')
    assert result.code == 0, result.err
    assert result.json() == {'database': empty_db, 'version': None,
                             'head': migration.head(), 'at_head': False}


def test_version_table(manage, inventory):
    result = manage('db', 'version')
    assert result.code == 0, result.err
    assert re.search(r'\| version +\| %s +\|' % migration.head(),
                     result.out)
    assert re.search(r'\| at_head +\| True +\|', result.out)


@pytest.mark.parametrize('command', [['db', 'version'], ['db', 'sync'],
                                     ['db', 'sync', '--format', 'json']])
def test_an_unreachable_server_never_shows_the_password(manage, unreachable,
                                                        command):
    result = manage(*command)
    assert result.code == 1
    assert result.out == ''
    assert result.err.count('\n') == 1
    assert 'Traceback' not in result.err
    for form in PASSWORD_FORMS:
        assert form not in result.err


@pytest.mark.parametrize('url, shown', [
    ('mysql+pymysql://sched:s3cr%40t@db/scheduler',
     'mysql+pymysql://sched:***@db/scheduler'),
    ('postgresql://sched:pw@db/scheduler?password=pw',
     'postgresql://sched:***@db/scheduler?password=***'),
    ('sqlite:////var/lib/scheduler/scheduler.sqlite',
     'sqlite:////var/lib/scheduler/scheduler.sqlite'),
    ('rabbit://guest:a@h1:5672,guest:b@h2:5672/',
     'rabbit://guest:***@h1:5672,guest:***@h2:5672/'),
    ('not a url at all', 'not a url at all'),
    (None, '-'),
])
def test_masked_url(url, shown):
    assert urls.masked_url(url) == shown


def test_mask_secret_hides_the_password_anywhere():
    text = 'refused for sched (password s3cr@t) at ' + UNREACHABLE
    masked = urls.mask_secret(text, UNREACHABLE)
    assert masked == ('refused for sched (password ***) at '
                      'mysql+pymysql://sched:***@127.0.0.1:9/scheduler')
