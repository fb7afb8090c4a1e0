"""``scheduler-manage config check --check-bus`` against real brokers.

It must log in, as the service would, and fail clearly on a wrong
password, a CA that did not sign the broker's certificate, or plain
AMQP sent to a TLS port.  The local RabbitMQ has no TLS listener: a
TLS-terminating ``tcp_proxy.TCPProxy`` in front of it, with a
certificate made here, stands in for one.
"""

import json
import ssl
import subprocess

import pytest

from tests.functional import daemons
from tests.functional import tcp_proxy


def _check(tmp_path, url: str, rabbit: str = '', extra: str = '') -> tuple:
    """Exit code and rows of ``config check --check-bus`` on ``url``."""
    path = daemons.write_multi_config(
        str(tmp_path / 'check.conf'),
        '[DEFAULT]\ntransport_url = %s\n\n[database]\nconnection = '
        'sqlite:///%s\n\n[oslo_messaging_rabbit]\n%s\n%s'
        % (url, tmp_path / 'check.sqlite', rabbit, extra))
    done = subprocess.run(
        [daemons.console_script('scheduler-manage'), '--config-file', path,
         'config', 'check', '--check-bus', '--timeout', '5', '--format',
         'json'], capture_output=True, text=True, timeout=120)
    return done.returncode, json.loads(done.stdout)


def _rows(rows: list, check: str) -> list:
    return [(r['result'], r['detail']) for r in rows if r['check'] == check]


@pytest.fixture
def tls_broker(tmp_path, rabbit_url):
    """A TLS endpoint on 127.0.0.1 in front of the real broker."""
    cert, key = tcp_proxy.certificate(tmp_path, 'broker')
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    proxy = tcp_proxy.TCPProxy(ssl_context=context).start()
    yield proxy, cert
    proxy.stop()


def test_check_bus_logs_in(tmp_path, rabbit_url):
    code, rows = _check(tmp_path, 'rabbit://guest:guest@127.0.0.1:5672/')
    [(result, detail)] = _rows(rows, 'message_bus')
    assert result == 'ok' and 'logged in' in detail, detail

    # The port answers, the login does not: a TCP connect said "ok".
    code, rows = _check(tmp_path,
                        'rabbit://guest:Wr0ngPass@127.0.0.1:5672/')
    assert code == 1
    [(result, detail)] = _rows(rows, 'message_bus')
    assert result == 'fail' and 'login refused' in detail, detail
    assert 'Wr0ngPass' not in json.dumps(rows)


def test_check_bus_verifies_tls(tmp_path, tls_broker):
    proxy, cert = tls_broker
    url = 'rabbit://guest:guest@127.0.0.1:%d/' % proxy.port
    # The right CA: the handshake verifies and the login goes through.
    code, rows = _check(tmp_path, url,
                        'ssl = true\nssl_ca_file = %s\n' % cert)
    [(result, detail)] = _rows(rows, 'message_bus')
    assert result == 'ok' and 'TLS verified' in detail, detail

    # A CA that did not sign the broker's certificate.
    other_ca, _key = tcp_proxy.certificate(tmp_path, 'other')
    code, rows = _check(tmp_path, url,
                        'ssl = true\nssl_ca_file = %s\n' % other_ca)
    assert code == 1
    [(result, detail)] = _rows(rows, 'message_bus')
    assert result == 'fail' and 'wrong CA' in detail, detail

    # Plain AMQP to the TLS port.
    code, rows = _check(tmp_path, url)
    assert code == 1
    [(result, detail)] = _rows(rows, 'message_bus')
    assert result == 'fail' and 'ssl = true' in detail, detail
    assert len(proxy.handshake_errors) >= 2


def test_check_warns_of_a_public_metrics_endpoint(tmp_path, rabbit_url):
    url = 'rabbit://guest:guest@127.0.0.1:5672/'
    extra = '\n[prometheus]\nenabled = true\nbind_host = 0.0.0.0\n'
    _code, rows = _check(tmp_path, url, extra=extra)
    [(result, detail)] = _rows(rows, 'metrics_endpoint')
    assert result == 'warn' and '0.0.0.0' in detail, detail
    _code, rows = _check(tmp_path, url, extra=extra.replace('0.0.0.0',
                                                            '127.0.0.1'))
    assert _rows(rows, 'metrics_endpoint')[0][0] == 'ok'
