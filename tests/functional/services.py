"""Reaching the real services functional tests need, or saying loudly why not.

Outside CI a missing RabbitMQ or database skips the tests that need it,
with the reason listed in a banner at the end of the run; under CI
(``CI=true``) it fails them, so that a green CI always means the real
services were exercised.
"""

import os
import socket

import pytest

MISSING: list = []


def in_ci() -> bool:
    return os.environ.get('CI', '').lower() == 'true'


def require(name: str, host: str, port: int, check=None) -> None:
    """Skip (or, under CI, fail) unless ``name`` answers on host:port."""
    try:
        socket.create_connection((host, port), timeout=3).close()
        if check is not None:
            check()
    except Exception as e:  # any failure means "not usable here"
        message = '%s not reachable at %s:%d: %s' % (name, host, port, e)
        if in_ci():
            pytest.fail('%s (CI=true: a missing service is a failure)'
                        % message)
        if message not in MISSING:
            MISSING.append(message)
        pytest.skip('SERVICE MISSING: %s' % message)


RABBIT_URL = 'rabbit://guest:guest@127.0.0.1:5672/'
POSTGRESQL_ADMIN_URL = 'postgresql+psycopg2://postgres@127.0.0.1:5432/postgres'
MYSQL_ADMIN_URL = 'mysql+pymysql://root@127.0.0.1:3306/'


def require_rabbit() -> str:
    def login():
        import kombu
        with kombu.Connection('amqp://guest:guest@127.0.0.1:5672//',
                              connect_timeout=3) as conn:
            conn.connect()
    require('RabbitMQ', '127.0.0.1', 5672, login)
    return RABBIT_URL
