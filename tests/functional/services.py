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
#: Starts the reason of every skip for a missing service; the final
#: banner finds them by it.
SKIP_MARKER = 'SERVICE MISSING: '


def in_ci() -> bool:
    return os.environ.get('CI', '').lower() == 'true'


def unreachable(message: str) -> None:
    """Fail under CI, else skip loudly (and list it in the final banner)."""
    if in_ci():
        pytest.fail('%s (CI=true: a missing service is a failure)' % message,
                    pytrace=False)
    if message not in MISSING:
        MISSING.append(message)
    pytest.skip(SKIP_MARKER + message)


def require(name: str, host: str, port: int, check=None) -> None:
    """Skip (or, under CI, fail) unless ``name`` answers on host:port."""
    try:
        socket.create_connection((host, port), timeout=3).close()
        if check is not None:
            check()
    except Exception as e:  # any failure means "not usable here"
        unreachable('%s not reachable at %s:%d: %s' % (name, host, port, e))


RABBIT_URL = 'rabbit://guest:guest@127.0.0.1:5672/'


def require_rabbit() -> str:
    def login():
        import kombu
        with kombu.Connection('amqp://guest:guest@127.0.0.1:5672//',
                              connect_timeout=3) as conn:
            conn.connect()
    require('RabbitMQ', '127.0.0.1', 5672, login)
    return RABBIT_URL
