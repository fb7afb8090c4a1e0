"""``config check``: would a scheduler start, and run well, on this config?

Operators run it before a restart or a SIGHUP: the service stops at
start-up on an unknown driver, filter or weigher, and some mistakes do
not stop it at all (a CIDR of ``[ip_scheduler] prefix_map`` that does
not parse simply never matches).  Every check runs, so that one run
lists every problem; each gives one row or more of check, result and
detail.  ``fail`` rows make the exit code 1; ``warn`` rows point at
settings the service accepts but that are probably not what was meant.
"""

import dataclasses
import ipaddress
import math
import os
import re
import socket
import ssl
import sys
from importlib import metadata as importlib_metadata
from typing import Iterator

from amqp import exceptions as amqp_exceptions
import kombu
from kombu import exceptions as kombu_exceptions
from oslo_config import cfg
import oslo_messaging
import sqlalchemy as sa
import stevedore

from scheduler.cli import output
from scheduler.cli import parsers
from scheduler import config
from scheduler.conf import nova_names
from scheduler.db import engine
from scheduler.db import migration
from scheduler.drivers import filter_scheduler
from scheduler import loader
from scheduler import manager
from scheduler.resources import liveness
from scheduler import rpc
from scheduler import urls

CONF = cfg.CONF

OK = 'ok'
WARN = 'warn'
FAIL = 'fail'
SKIP = 'skip'

COLUMNS = ['check', 'result', 'detail']

#: Seconds to wait for a database server or a broker to answer.
DEFAULT_TIMEOUT = parsers.CHECK_TIMEOUT

#: The ports AMQP brokers listen on when a transport URL names none.
_AMQP_PORT = 5672
_AMQPS_PORT = 5671


@dataclasses.dataclass
class Result:
    """One row of the report."""

    check: str
    result: str
    detail: str


def _error(error: Exception) -> str:
    """``Type: message``, first line only, as the detail of a failure."""
    return output.error_line(error).splitlines()[0]


def _unreadable(group: str | None, name: str) -> str | None:
    """Why an option's value cannot be read, or None when it can."""
    try:
        getattr(CONF[group], name) if group else CONF[name]
    except cfg.Error as e:
        return str(e)
    return None


# -- option values ------------------------------------------------------

_NOT_VALID = re.compile(r"detail='(?P<where>[^']*)'\) is not valid: "
                        r'(?P<why>.*)$', re.S)


def _why(message: str) -> str:
    """oslo.config's long message cut down to the reason and the file."""
    found = _NOT_VALID.search(message)
    if not found:
        return message
    return '%s (%s)' % (found.group('why').strip(), found.group('where'))


def _options() -> Iterator[tuple]:
    """``(group or None, name)`` of every registered option."""
    for key in sorted(CONF):
        try:
            value = CONF[key]
        except cfg.Error:
            yield None, key
            continue
        if isinstance(value, cfg.ConfigOpts.GroupAttr):
            for name in sorted(value):
                yield key, name
        else:
            yield None, key


def _label(group: str | None, name: str) -> str:
    return '[%s] %s' % (group or 'DEFAULT', name)


def check_options() -> list:
    """Every option's value parses and is in range.

    oslo.config checks a value only when it is read, so a bad one would
    stop the service wherever the option is first used; ``min``/``max``
    bounds (``pci_weight_multiplier`` may not be negative) are caught
    here too.
    """
    results = []
    count = 0
    for group, name in _options():
        count += 1
        problem = _unreadable(group, name)
        if problem is not None:
            results.append(Result('options', FAIL, '%s: %s' % (
                _label(group, name), _why(problem))))
    if not results:
        results.append(Result('options', OK,
                              '%d option values read' % count))
    return results


def _config_files() -> list:
    """The files the configuration was read from, in order."""
    files = list(CONF.config_file or [])
    dirs = CONF.config_dir or []
    for directory in [dirs] if isinstance(dirs, str) else dirs:
        if os.path.isdir(directory):
            files.extend(sorted(
                os.path.join(directory, name)
                for name in os.listdir(directory) if name.endswith('.conf')))
    return files


#: The oslo-config-generator namespaces of the service, as in
#: etc/scheduler/scheduler-config-generator.conf (a test keeps them equal):
#: what the service reads, and what its sample documents.
NAMESPACES = ('scheduler', 'oslo.messaging', 'oslo.db', 'oslo.log',
              'oslo.service.service', 'oslo.service.periodic_task',
              'oslo.reports')


def documented_options() -> dict:
    """``{group: {names}}`` of every option the service's namespaces list.

    Read the way oslo-config-generator and oslo-config-validator read
    them, from the ``oslo.config.opts`` entry points.  Deprecated names
    count, in the group oslo.config reads them from (their own, or the
    option's when they name none), since the libraries still read them.
    """
    names: dict = {}
    entry_points = importlib_metadata.entry_points(group='oslo.config.opts')
    for point in entry_points:
        if point.name not in NAMESPACES:
            continue
        for group, opts in point.load()():
            group_name = getattr(group, 'name', group) or 'DEFAULT'
            known = names.setdefault(group_name, set())
            for opt in opts:
                known.update({opt.dest, opt.name.replace('-', '_')})
                for old in opt.deprecated_opts:
                    if old.name or old.group:
                        names.setdefault(old.group or group_name, set()).add(
                            (old.name or opt.dest).replace('-', '_'))
    return names


def check_unknown_options() -> list:
    """Sections and options of the files that nothing reads.

    oslo.config ignores them silently, so a misspelt option keeps its
    default: ``enabled_filter = ...`` enables nothing.  Checked against
    the same option lists as oslo-config-validator and the generated
    sample (``NAMESPACES``), so the sample itself passes.

    oslo-config-validator itself is not called: it has no library API
    (``main()`` parses ``sys.argv``; the private ``_validate()`` reports
    by logging, one file per call, and sees no ``--config-dir``), so
    this check reads the same entry points and a unit test runs the
    validator on the same file to keep the two in agreement.
    """
    known = documented_options()
    results = []
    for path in _config_files():
        sections: dict = {}
        try:
            cfg.ConfigParser(path, sections).parse()
        except Exception as e:
            results.append(Result('unknown_options', FAIL, '%s: %s' % (
                path, _error(e))))
            continue
        for section, values in sorted(sections.items()):
            if section not in known:
                results.append(Result('unknown_options', WARN, '[%s] in %s: '
                                      'no option of this service is in '
                                      'this section' % (section, path)))
                continue
            for key in sorted(values):
                if key.replace('-', '_') in known[section]:
                    continue
                renamed = nova_names.replacement(section, key)
                if renamed:
                    results.append(Result(
                        'unknown_options', FAIL, "[%s] %s in %s is nova's "
                        'name: this service ignores it and reads [%s] %s '
                        'instead' % ((section, key, path) + renamed)))
                else:
                    results.append(Result(
                        'unknown_options', WARN, '[%s] %s in %s is not an '
                        'option: it is ignored' % (section, key, path)))
    if not results:
        results.append(Result('unknown_options', OK, 'every option set is '
                              'known'))
    return results


def check_multipliers() -> list:
    """Weigher multipliers are finite numbers.

    ``nan`` and ``inf`` parse as floats but make every host's weight
    ``nan``: the ranking then means nothing.
    """
    results = []
    checked = 0
    for group, name in _options():
        if not name.endswith('multiplier') or _unreadable(group, name):
            continue
        value = getattr(CONF[group], name) if group else CONF[name]
        if not isinstance(value, float):
            continue
        checked += 1
        if not math.isfinite(value):
            results.append(Result('multipliers', FAIL, '%s is %s: give a '
                                  'finite number (0.0 turns the weigher '
                                  'off)' % (_label(group, name), value)))
    if not results:
        results.append(Result('multipliers', OK,
                              '%d multipliers are finite' % checked))
    return results


def check_intervals() -> list:
    """One lost report must not take a host out of scheduling."""
    if (_unreadable('scheduler', 'service_down_time')
            or _unreadable('scheduler', 'report_interval')):
        return [Result('intervals', SKIP, 'unreadable option (see options)')]
    down = CONF.scheduler.service_down_time
    interval = CONF.scheduler.report_interval
    problem = liveness.interval_problem(interval, down)
    if problem:
        flaps, text = problem
        return [Result('intervals', FAIL if flaps else WARN, text)]
    return [Result('intervals', OK, 'service_down_time %d s, '
                   'report_interval %d s' % (down, interval))]


def check_reconnect_interval() -> list:
    """Reconnection pauses short enough for a prompt stop after a
    broker outage (``config.reconnect_interval_problem``)."""
    if _unreadable('oslo_messaging_rabbit', 'rabbit_interval_max'):
        return [Result('rabbit_interval_max', SKIP,
                       'unreadable option (see options)')]
    problem = config.reconnect_interval_problem(CONF)
    if problem:
        return [Result('rabbit_interval_max', WARN, problem)]
    return [Result('rabbit_interval_max', OK, '%d s' % (
        CONF.oslo_messaging_rabbit.rabbit_interval_max))]


# -- plugins --------------------------------------------------------------

def check_driver() -> list:
    """The driver loads and starts, as the service does at start-up.

    A filter scheduler also loads its filters and weighers here; when
    those fail, the filter and weigher checks below say which one.
    """
    name = CONF.scheduler.driver
    try:
        driver = manager.load_driver()
    except Exception as e:
        return [Result('driver', FAIL, _error(e))]
    cls = type(driver)
    return [Result('driver', OK, '%s (%s.%s)' % (name, cls.__module__,
                                                 cls.__qualname__))]


def _broken_plugins(namespace: str) -> list:
    """``name: error`` of each entry point of ``namespace`` that fails.

    ``scheduler.loader.all_classes`` leaves such plugins out with an
    error in the log; the report names them.
    """
    broken = []

    def _failed(_manager, entrypoint, error):
        broken.append('%s: %s' % (entrypoint.name, error))

    stevedore.ExtensionManager(namespace, invoke_on_load=False,
                               on_load_failure_callback=_failed)
    return broken


def _load_entries(check: str, namespace: str, entries: list,
                  all_marker: str, results: list) -> list:
    """The classes named by ``entries``; a row per entry that fails."""
    classes: list = []
    for entry in entries:
        entry = entry.strip()
        if not entry:
            continue
        try:
            found = loader.load_classes(namespace, [entry], all_marker)
        except Exception as e:
            why = _error(e)
            results.append(Result(check, FAIL, why if entry in why
                                  else '%s: %s' % (entry, why)))
            continue
        if entry == all_marker:
            for broken in _broken_plugins(namespace):
                results.append(Result(check, WARN, '%s: plugin left out: %s'
                                      % (entry, broken)))
        for cls in found:
            if cls not in classes:
                classes.append(cls)
    return classes


def check_filters() -> list:
    """``available_filters`` entries load; ``enabled_filters`` are in them."""
    fs = CONF.filter_scheduler
    results: list = []
    classes = _load_entries('available_filters', loader.FILTER_NAMESPACE,
                            fs.available_filters,
                            filter_scheduler.ALL_FILTERS, results)
    if not any(r.result == FAIL for r in results):
        results.append(Result('available_filters', OK,
                              '%d filter classes' % len(classes)))
    by_name = {cls.__name__: cls for cls in classes}
    enabled = [n.strip() for n in fs.enabled_filters if n.strip()]
    found = [by_name[name] for name in enabled if name in by_name]
    results.extend(Result('enabled_filters', FAIL, '%s is not in '
                          'available_filters' % name)
                   for name in enabled if name not in by_name)
    if len(_started('enabled_filters', found, results)) == len(enabled):
        results.append(Result('enabled_filters', OK, ', '.join(enabled)
                              or 'none: every host passes'))
    results.extend(plugin_packages(found))
    return results


def _started(check: str, classes: list, results: list) -> list:
    """The names of ``classes`` that start; a failure row per other."""
    names = []
    for cls in classes:
        try:
            cls()
        except Exception as e:
            results.append(Result(check, FAIL, '%s: %s' % (cls.__name__,
                                                           _error(e))))
        else:
            names.append(cls.__name__)
    return names


def plugin_packages(classes: list) -> list:
    """A warning per package, other than this one, that plugins come from.

    A running service lists entry points once: a plugin package
    installed or upgraded after it started is seen only after a restart
    (a reload, SIGHUP, is not enough).
    """
    owners = importlib_metadata.packages_distributions()
    by_package: dict = {}
    for cls in classes:
        top = cls.__module__.split('.')[0]
        if top == 'scheduler':
            continue
        package = ', '.join(owners.get(top, [])) or top
        by_package.setdefault(package, []).append(cls.__name__)
    return [Result('plugins', WARN, '%s from %s: after installing or '
                   'upgrading it, restart the service (systemctl restart); '
                   'a reload (SIGHUP) does not see new or changed plugin '
                   'packages' % (', '.join(sorted(names)), package))
            for package, names in sorted(by_package.items())]


def check_weighers() -> list:
    """Every ``weight_classes`` entry loads and its weighers start."""
    results: list = []
    classes = _load_entries('weight_classes', loader.WEIGHER_NAMESPACE,
                            CONF.filter_scheduler.weight_classes,
                            filter_scheduler.ALL_WEIGHERS, results)
    names = _started('weight_classes', classes, results)
    if not any(r.result == FAIL for r in results):
        results.append(Result('weight_classes', OK,
                              ', '.join(names) or 'none: hosts are not '
                              'ranked'))
    return results


# -- the inventory ----------------------------------------------------------

def _ask(url_text: str, timeout: float, question):
    """``question(conn)`` on one quick connection to ``url_text``.

    A one-off engine without oslo.db's connection retries: the service
    retries for minutes, a check must answer now.
    """
    url = sa.make_url(url_text)
    connect_args = {}
    if url.get_backend_name() in ('mysql', 'postgresql'):
        connect_args['connect_timeout'] = max(1, int(math.ceil(timeout)))
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool,
                              connect_args=connect_args)
    try:
        with engine.connect() as conn:
            return question(conn)
    finally:
        engine.dispose()


def check_database(timeout: float = DEFAULT_TIMEOUT) -> list:
    """``[database] connection`` answers and its schema is at the head."""
    url = CONF.database.connection
    shown = urls.masked_url(url)
    if not url:
        return [Result('database', FAIL, '[database] connection is not set')]
    sync = 'run "scheduler-manage db sync"'
    try:
        parsed = sa.make_url(url)
        if (parsed.get_backend_name() == 'sqlite'
                and parsed.database not in (None, '', ':memory:')
                and not os.path.exists(parsed.database)):
            return [Result('database', FAIL, '%s: the file does not exist: '
                           '%s' % (shown, sync))]
        current = _ask(url, timeout, migration.revision_of)
    except Exception as e:
        return [Result('database', FAIL, '%s: cannot connect: %s' % (
            shown, urls.mask_secret(_error(e), url)))]
    head = migration.head()
    if current == head:
        return [Result('database', OK, '%s at %s (head)' % (shown, head))]
    if current is None:
        why = 'has no schema'
    elif current not in migration.known_revisions():
        return [Result('database', FAIL, '%s is at %s, which this release '
                       'does not know (head %s): was it migrated by a newer '
                       'release?' % (shown, current, head))]
    else:
        why = 'is at %s, not %s' % (current, head)
    return [Result('database', FAIL, '%s %s: %s' % (shown, why, sync))]


def _max_connections(conn: sa.Connection) -> tuple:
    """``(max_connections, reserved for superusers, open now)`` of the
    server (PostgreSQL or MySQL/MariaDB)."""
    def ask(sql):
        return conn.exec_driver_sql(sql)
    if conn.dialect.name == 'postgresql':
        return (int(ask('SHOW max_connections').scalar()),
                int(ask('SHOW superuser_reserved_connections').scalar()),
                int(ask("SELECT count(*) FROM pg_stat_activity WHERE "
                        "backend_type = 'client backend'").scalar()))
    return (int(ask('SELECT @@max_connections').scalar()), 0,
            int(ask("SHOW GLOBAL STATUS LIKE 'Threads_connected'")
                .one()[1]))


def check_connections(services: int = 1,
                      timeout: float = DEFAULT_TIMEOUT) -> list:
    """Can ``services`` services like this one open every connection they
    may hold, within the server's ``max_connections``?

    Each worker holds at most ``engine.connection_budget()``
    connections (``[database] max_pool_size + max_overflow``, bounded by
    ``[DEFAULT] executor_thread_pool_size``); a server out of
    connections fails requests (``InventoryUnavailable``) and the
    command-line tools.  Asks the server its limit.
    """
    url = CONF.database.connection
    try:
        backend = sa.make_url(url).get_backend_name() if url else None
    except Exception:
        backend = None
    if backend not in ('postgresql', 'mysql'):
        return [Result('connections', SKIP, 'no connection limit to check '
                       'for %s' % (backend or 'this database'))]
    for group, name in (('database', 'max_pool_size'),
                        ('database', 'max_overflow'),
                        ('scheduler', 'workers')):
        if _unreadable(group, name):
            return [Result('connections', SKIP,
                           'unreadable option (see options)')]
    per_worker = engine.connection_budget()
    workers = CONF.scheduler.workers
    per_service = per_worker * workers
    try:
        limit, reserved, used = _ask(url, timeout, _max_connections)
    except Exception as e:
        return [Result('connections', SKIP, 'cannot ask the server its '
                       'max_connections: %s' % urls.mask_secret(
                           _error(e), url))]
    usable = limit - reserved
    shape = ('%d worker(s) x %d connection(s) ([database] max_pool_size + '
             'max_overflow, at most [DEFAULT] executor_thread_pool_size) '
             '= %d a service' % (workers, per_worker, per_service))
    server = ('the server allows %d (max_connections %d, %d reserved for '
              'superusers; %d open now)' % (usable, limit, reserved, used))
    fits = usable // per_service if per_service else 0
    if services * per_service > usable:
        return [Result('connections', WARN,
                       '%d service(s) of %s may open %d connections; %s: '
                       'lower [database] max_pool_size/max_overflow or the '
                       'workers, or raise max_connections (only %d such '
                       'service(s) fit)' % (services, shape,
                                            services * per_service, server,
                                            fits))]
    return [Result('connections', OK, '%d service(s) of %s; %s: room for '
                   '%d such service(s)' % (services, shape, server, fits))]


def _binlog(conn: sa.Connection) -> tuple:
    """``(log_bin, binlog_format)`` of a MySQL/MariaDB server."""
    log_bin, binlog_format = conn.exec_driver_sql(
        'SELECT @@log_bin, @@binlog_format').one()
    return bool(int(log_bin)), str(binlog_format).upper()


def check_binlog(timeout: float = DEFAULT_TIMEOUT) -> list:
    """A MySQL/MariaDB server that logs statements can take report writes.

    Report writes run at READ COMMITTED (``engine.transaction``), which
    InnoDB refuses to write to a binary log in STATEMENT format: every
    report would fail to be saved.
    """
    url = CONF.database.connection
    try:
        backend = sa.make_url(url).get_backend_name() if url else None
    except Exception:
        backend = None
    if backend != 'mysql':
        return [Result('binlog', SKIP, 'not a MySQL/MariaDB database')]
    try:
        log_bin, binlog_format = _ask(url, timeout, _binlog)
    except Exception as e:
        return [Result('binlog', SKIP, 'cannot ask the server its binary '
                       'log format: %s' % urls.mask_secret(_error(e), url))]
    if log_bin and binlog_format == 'STATEMENT':
        return [Result('binlog', FAIL, 'the server logs binary log events '
                       'in STATEMENT format, which InnoDB refuses for the '
                       'report writes (READ COMMITTED): set binlog_format '
                       '= ROW or MIXED')]
    return [Result('binlog', OK, 'binary log %s, format %s' % (
        'on' if log_bin else 'off', binlog_format))]


# -- the message bus --------------------------------------------------------

def _default_port(transport: str) -> int:
    if transport in ('rabbit', 'kombu'):
        try:
            if CONF.oslo_messaging_rabbit.ssl:
                return _AMQPS_PORT
        except (cfg.NoSuchOptError, cfg.NoSuchGroupError):
            pass
    return _AMQP_PORT


def _brokers(parsed) -> list:
    """``(host, port)`` of each broker of a parsed transport URL."""
    if not parsed.hosts:
        return [('localhost', _default_port(parsed.transport))]
    return [(h.hostname or 'localhost', h.port or
             _default_port(parsed.transport)) for h in parsed.hosts]


def _mask_transport(text: str, url: str | None, parsed=None) -> str:
    """``text`` with the passwords of every host of ``url`` masked."""
    text = urls.mask_secret(text, url)
    for host in parsed.hosts if parsed is not None else ():
        text = urls.hide(text, host.password)
    return text


def _parse_transport(check: str, option: str, url: str | None,
                     results: list):
    """The parsed URL, or None with a failure row saying why."""
    try:
        parsed = oslo_messaging.TransportURL.parse(CONF, url)
    except Exception as e:
        shown = urls.masked_url(url)
        results.append(Result(check, FAIL, '%s %s: %s' % (
            option, shown, urls.mask_secret(_error(e), url))))
        return None
    shown = (_mask_transport(urls.masked_url(url), url, parsed) if url
             else '(unset: rabbit://)')
    drivers = sorted({ep.name for ep in importlib_metadata.entry_points(
        group='oslo.messaging.drivers')})
    if parsed.transport not in drivers:
        results.append(Result(check, FAIL, '%s %s: unknown transport %r '
                              '(installed: %s)' % (option, shown,
                                                   parsed.transport,
                                                   ', '.join(drivers))))
        return None
    where = ', '.join('%s:%d' % b for b in _brokers(parsed))
    detail = '%s (%s)' % (shown, 'in-process' if parsed.transport == 'fake'
                          else where)
    results.append(Result(check, OK, detail))
    return parsed


def _answers(host: str, port: int, timeout: float) -> Result | None:
    """A failure row unless ``host:port`` takes a TCP connection."""
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as e:
        return Result('message_bus', FAIL, '%s:%d does not answer: %s' % (
            host, port, e))
    return None


def _reach(parsed, timeout: float) -> list:
    """A TCP connection to every broker of ``parsed``."""
    if parsed.transport == 'fake':
        return [Result('message_bus', OK, 'fake:// is in-process: nothing '
                       'to reach')]
    return [_answers(host, port, timeout) or Result(
        'message_bus', OK, '%s:%d accepts connections' % (host, port))
        for host, port in _brokers(parsed)]


#: Transports whose brokers speak AMQP 0-9-1 (``_login`` checks them).
_RABBIT_TRANSPORTS = ('rabbit', 'kombu')


def _login_failure(error: Exception, tls: bool) -> str:
    """Why an AMQP login failed, in an operator's words."""
    text = _error(error)
    if isinstance(error, amqp_exceptions.AccessRefused):
        return 'login refused (wrong user or password?): %s' % text
    if isinstance(error, amqp_exceptions.NotAllowed):
        return 'no access to the virtual host: %s' % text
    if isinstance(error, ssl.SSLCertVerificationError):
        return ('the broker\'s certificate does not verify against '
                '[oslo_messaging_rabbit] ssl_ca_file (wrong CA?): %s' % text)
    if isinstance(error, ssl.SSLError):
        return ('TLS handshake failed (%s): %s' % (
            'is this port TLS? [oslo_messaging_rabbit] ssl is on', text))
    if not tls and isinstance(error, (OSError, EOFError,
                                      amqp_exceptions.AMQPError,
                                      kombu_exceptions.KombuError)):
        return ('no AMQP handshake (a TLS port? then set '
                '[oslo_messaging_rabbit] ssl = true): %s' % text)
    return text


def _login(parsed, timeout: float) -> list:
    """An AMQP login to every broker of a rabbit ``parsed`` URL.

    Opens a connection as oslo.messaging's rabbit driver would (user,
    password, virtual host, login method, TLS with the configured CA
    and client certificate), so a wrong password, a CA that does not
    sign the broker's certificate or plain AMQP sent to a TLS port fail
    here rather than in the service's log after a restart.
    """
    results = []
    login_method = rpc.rabbit_option(CONF, parsed, 'rabbit_login_method')
    for index, (host, port) in enumerate(_brokers(parsed)):
        entry = parsed.hosts[index] if parsed.hosts else None
        user = (entry.username if entry and entry.username is not None
                else 'guest')
        tls = rpc.amqp_ssl_options(CONF, parsed, host)
        where = '%s:%d' % (host, port)
        silent = _answers(host, port, timeout)
        if silent:
            results.append(silent)
            continue
        connection = kombu.Connection(
            hostname=host, port=port, userid=user,
            password=(entry.password if entry and entry.password is not None
                      else 'guest'),
            virtual_host=parsed.virtual_host or '/', ssl=tls,
            login_method=login_method, connect_timeout=timeout,
            transport_options={
                'read_timeout': timeout, 'write_timeout': timeout,
                'client_properties': {'capabilities': {
                    'authentication_failure_close': True}}})
        try:
            connection.connect()
        except Exception as e:
            detail = '%s: %s' % (where, _login_failure(e, bool(tls)))
            results.append(Result('message_bus', FAIL,
                                  _mask_transport(detail, CONF.transport_url,
                                                  parsed)))
        else:
            verified = isinstance(tls, dict) and 'ca_certs' in tls
            detail = '%s: logged in as %s (virtual host %s%s)' % (
                where, user, parsed.virtual_host or '/',
                ', TLS verified' if verified else ', TLS' if tls else '')
            results.append(Result('message_bus', OK, _mask_transport(
                detail, CONF.transport_url, parsed)))
        finally:
            connection.release()
    return results


def check_transport(check_bus: bool = False,
                    timeout: float = DEFAULT_TIMEOUT) -> list:
    """``transport_url`` (and the notifications' own, if set) parse; with
    ``check_bus``, every broker accepts a connection (and, for RabbitMQ,
    our login: ``_login``)."""
    results: list = []
    parsed = _parse_transport('transport_url', '[DEFAULT] transport_url',
                              CONF.transport_url, results)
    notify_url = CONF.oslo_messaging_notifications.transport_url
    if notify_url:
        _parse_transport('notification_transport_url',
                         '[oslo_messaging_notifications] transport_url',
                         notify_url, results)
    if not check_bus:
        results.append(Result('message_bus', SKIP, 'not contacted (add '
                              '--check-bus)'))
    elif parsed is None:
        results.append(Result('message_bus', SKIP, 'transport_url does not '
                              'parse'))
    elif parsed.transport in _RABBIT_TRANSPORTS:
        results.extend(_login(parsed, timeout))
    else:
        results.extend(_reach(parsed, timeout))
    return results


# -- the metrics endpoint ---------------------------------------------------

def check_metrics_endpoint() -> list:
    """Warn when ``[prometheus]`` serves metrics beyond the loopback.

    The endpoint has no authentication or TLS and tells anyone who can
    reach it how busy the cloud is; a wildcard or public ``bind_host``
    is allowed (a management network) but worth a second look.
    """
    if _unreadable('prometheus', 'enabled') or _unreadable('prometheus',
                                                           'bind_host'):
        return [Result('metrics_endpoint', SKIP, 'unreadable option (see '
                       'options)')]
    if not CONF.prometheus.enabled:
        return [Result('metrics_endpoint', OK, 'disabled')]
    host, port = CONF.prometheus.bind_host, CONF.prometheus.port
    where = '%s:%d' % (host, port)
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == 'localhost'
    if loopback:
        return [Result('metrics_endpoint', OK, '%s (loopback only)' % where)]
    return [Result('metrics_endpoint', WARN, '%s is not a loopback address: '
                   'the endpoint has no authentication or TLS; keep '
                   '[prometheus] bind_host on 127.0.0.1 or a management '
                   'network only Prometheus reaches' % where)]


# -- driver options ---------------------------------------------------------

def check_prefix_map() -> list:
    """Each ``[ip_scheduler] prefix_map`` source is a valid CIDR or prefix.

    The driver treats a CIDR that does not parse as matching nothing,
    silently; an IPv6 source cannot be written at all (``:`` separates
    the source from the prefix), and shows up as a value with a colon.
    """
    if _unreadable('ip_scheduler', 'prefix_map'):
        return [Result('prefix_map', SKIP, 'unreadable option (see '
                       'options)')]
    results = []
    mapping = CONF.ip_scheduler.prefix_map
    for source, prefix in sorted(mapping.items()):
        source = source.strip()
        if '/' in source:
            try:
                ipaddress.ip_network(source, strict=False)
            except ValueError as e:
                results.append(Result('prefix_map', FAIL, '%r is not a '
                                      'valid CIDR: %s' % (source, e)))
                continue
        if ':' in prefix or '/' in prefix:
            results.append(Result('prefix_map', WARN, '%s:%s looks like a '
                                  'split IPv6 source: prefix_map takes '
                                  'IPv4 sources only' % (source, prefix)))
    if not any(r.result == FAIL for r in results):
        results.append(Result('prefix_map', OK, '%d sources'
                              % len(mapping)))
    return results


def run_checks(check_bus: bool = False,
               timeout: float = DEFAULT_TIMEOUT, services: int = 1) -> list:
    """Every check, in a fixed order; a check that crashes is a failure."""
    checks = [
        ('options', check_options),
        ('unknown_options', check_unknown_options),
        ('driver', check_driver),
        ('filters', check_filters),
        ('weight_classes', check_weighers),
        ('database', lambda: check_database(timeout)),
        ('connections', lambda: check_connections(services, timeout)),
        ('binlog', lambda: check_binlog(timeout)),
        ('transport_url', lambda: check_transport(check_bus, timeout)),
        ('prefix_map', check_prefix_map),
        ('metrics_endpoint', check_metrics_endpoint),
        ('multipliers', check_multipliers),
        ('intervals', check_intervals),
        ('rabbit_interval_max', check_reconnect_interval),
    ]
    results = []
    for name, check in checks:
        try:
            results.extend(check())
        except Exception as e:
            results.append(Result(name, FAIL, 'the check itself failed: %s'
                                  % _error(e)))
    return results


def cmd_check(args) -> int:
    results = run_checks(check_bus=args.check_bus,
                         timeout=args.timeout or DEFAULT_TIMEOUT,
                         services=args.services)
    # A problem's detail is the point of the command: never cut.
    output.emit([dataclasses.asdict(r) for r in results], COLUMNS, args.format,
                cut=False)
    failed = sum(r.result == FAIL for r in results)
    if not output.structured(args.format):
        warned = sum(r.result == WARN for r in results)
        if failed:
            verdict = '%d problem(s) found' % failed
        elif warned:
            verdict = 'No check failed'
        else:
            verdict = 'Every check passed'
        sys.stdout.write('%s%s\n' % (
            verdict, ' (%d warning(s))' % warned if warned else ''))
    return 1 if failed else 0
