"""Command-line and configuration-file parsing shared by every command."""

import contextlib
import functools
import io
import logging as std_logging
import sys

from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging
from oslo_messaging import opts as messaging_opts

from scheduler import conf  # noqa: F401  (registers our options)
from scheduler import version

CONF = cfg.CONF

_DEFAULT_LOG_LEVELS = [
    'amqp=WARN', 'amqplib=WARN', 'kombu=WARN', 'oslo_messaging=INFO',
    'oslo.messaging=INFO', 'stevedore=WARN', 'sqlalchemy=WARN',
    'oslo_db=WARN', 'alembic=WARN', 'oslo_service=INFO',
    'oslo.service=INFO', 'iso8601=WARN', 'eventlet.wsgi.server=WARN',
]

#: A command-line tool's loggers without ``--debug``: its own warnings
#: only, and none of oslo.messaging's connection retries, which the
#: command's one-line error already sums up.
_LIBRARY_LOGGERS = ('oslo.messaging', 'oslo_messaging')
_QUIET_TOOL_LEVELS = ['scheduler=WARN'] + [
    '%s=CRITICAL' % name for name in _LIBRARY_LOGGERS]

_logging_registered = False

#: Our default for ``[oslo_messaging_rabbit]
#: kombu_missing_consumer_retry_timeout`` (see parse_args).
REPLY_RETRY_SECONDS = 2

#: Our default for ``[oslo_messaging_rabbit] rabbit_qos_prefetch_count``
#: (see parse_args): above ``[DEFAULT] executor_thread_pool_size``
#: (oslo's 64), so that no worker waits for a delivery.
PREFETCH_COUNT = 100

#: Our default for ``[oslo_messaging_rabbit] rabbit_interval_max``
#: (see parse_args): the longest pause between two attempts to reach
#: the broker again, in seconds.
RECONNECT_INTERVAL_MAX = 2

#: How long a stopping service may take (SIGTERM to exit), in seconds,
#: right after a broker outage as at any other time.
STOP_WITHIN = 10

#: The highest ``rabbit_interval_max`` that keeps that promise, in
#: seconds: after a broker outage a stop may wait out one whole
#: reconnection pause (the pooled connection's heartbeat thread pauses
#: under its lock), then a reply's retry for a missing queue
#: (``REPLY_RETRY_SECONDS``), leaving time to save the state and exit.
RECONNECT_INTERVAL_WARN_ABOVE = 5


def register_logging_options() -> None:
    global _logging_registered
    if not _logging_registered:
        logging.register_options(CONF)
        logging.set_defaults(default_log_levels=_DEFAULT_LOG_LEVELS)
        _logging_registered = True


#: ``(group, option)`` -> the value a reload refused to replace, kept
#: as an override until a later reload changes the option again.
_KEPT: dict = {}


def keep_valid_values(opts: cfg.ConfigOpts, fresh: dict) -> None:
    """A mutate hook: an option the reload gave a value it cannot take
    keeps its running value, with one ERROR line.

    oslo.config takes a reloaded file's text unchecked: a typo in a
    mutable option (``host_subset_size = abc``, a value below its
    minimum) would fail every later read of it, every request included.
    """
    for (group, opt_name), (old, new) in fresh.items():
        # Keyed by the option's name; read, set and cleared by its
        # attribute (``log-config-append``: ``log_config_append``).
        name = opt_name.replace('-', '_')
        key = (group, name)
        running = _KEPT.pop(key, old)
        if running is None:  # the file did not set it: the default ran
            running = _default(group, name)
        if running is not old:
            opts.clear_override(name, group)
        try:
            (opts[group] if group else opts)[name]
        except (ValueError, cfg.Error) as e:
            opts.set_override(name, running, group)
            _KEPT[key] = running
            logging.getLogger(__name__).error(
                'Reload: refused [%s] %s = %r (%s); keeping %s',
                group or 'DEFAULT', name, new, _one_line(e), running)


def guard_reloads(opts: cfg.ConfigOpts) -> None:
    """Make ``opts.mutate_config_files`` (SIGHUP) keep every running
    value, with one ERROR line, when the files no longer parse.

    oslo.config's ``reload_config_files`` catches that and its
    ``mutate_config_files`` does not: a section header without its
    ``]``, or a command-line option's bad value in a file (``debug =
    maybe``: argparse exits), ended the launching process on a reload,
    and its workers with it.  Every launcher (oslo.service's, cotyledon's
    glue, ``threading_launcher``) calls the method on ``opts``: wrapping
    it on this one instance covers them all.
    """
    mutate = opts.mutate_config_files
    if getattr(mutate, 'keeps_running_values', False):
        return

    @functools.wraps(mutate)
    def guarded() -> dict:
        said = io.StringIO()  # argparse's reason, printed before it exits
        try:
            with contextlib.redirect_stderr(said):
                return mutate()
        except (SystemExit, cfg.Error) as e:
            printed = said.getvalue().strip().splitlines()
            reason = printed[-1] if isinstance(e, SystemExit) and printed \
                else _one_line(e)
            what = ('the configuration files were not reloaded (%s); every '
                    'option keeps its running value' % reason)
        except Exception as e:
            # A library's mutate hook (oslo.log's, for a logging file
            # that does not load): the options are reloaded, what the
            # hook would have changed is not.
            what = ('the options are reloaded, but applying them failed '
                    '(%s); what failed keeps running as it was'
                    % _one_line(e))
        # Outside the handler: oslo.log would append the exception.
        logging.getLogger(__name__).error(
            'Reload: %s: fix the files and reload again', what)
        return {}

    guarded.keeps_running_values = True
    opts.mutate_config_files = guarded


def _default(group: str | None, name: str):
    """The default of our option ``[group] name`` (None if not ours)."""
    from scheduler.conf import opts
    for opt_group, group_opts in opts.list_opts():
        if str(opt_group) == (group or 'DEFAULT'):
            for opt in group_opts:
                if opt.dest == name:
                    return opt.default
    return None


def parse_args(argv: list, default_config_files: list | None = None,
               setup_logging: bool = True, prog: str | None = None,
               command_line_tool: bool = False) -> None:
    """Parse ``argv`` (without the program name) and set up logging.

    Also registers oslo.messaging's transport options, so that
    ``--config-file`` may set ``transport_url`` for every command.
    A ``command_line_tool`` logs to stderr, and only warnings unless
    ``--debug``: its stdout is for its output (tables, JSON).
    """
    register_logging_options()
    if command_line_tool:
        CONF.set_default('use_stderr', True)
        logging.set_defaults(default_log_levels=_DEFAULT_LOG_LEVELS
                             + _QUIET_TOOL_LEVELS)
    oslo_messaging.set_transport_defaults(control_exchange='scheduler')
    # oslo.messaging's options ([DEFAULT] transport_url,
    # [oslo_messaging_notifications], ...), so that config files may set
    # them and our code may read them before any transport exists.
    for group, opts in messaging_opts.list_opts():
        CONF.register_opts(opts, group=group)
    # A reply whose caller died is retried for this long while holding
    # the worker that served the call: the library's 60 s let a few
    # dozen dead calls stall every caller.
    CONF.set_default('kombu_missing_consumer_retry_timeout',
                     REPLY_RETRY_SECONDS, group='oslo_messaging_rabbit')
    # oslo's 0 lets the broker push a server every message queued for
    # it: of two daemons on one topic one took a backlog the other
    # could have served.  (oslo.messaging acknowledges an RPC message on
    # receipt; what the workers cannot take yet is ``rpc.bound_intake``'s.)
    CONF.set_default('rabbit_qos_prefetch_count', PREFETCH_COUNT,
                     group='oslo_messaging_rabbit')
    # A connection that lost the broker is re-established by its
    # heartbeat thread under the connection's lock, pauses between
    # attempts included: a reply, a build cast or a stop that needs the
    # connection waits out a pause that began while the broker was down.
    CONF.set_default('rabbit_interval_max', RECONNECT_INTERVAL_MAX,
                     group='oslo_messaging_rabbit')
    CONF.register_mutate_hook(keep_valid_values)  # a set: once
    guard_reloads(CONF)
    try:
        CONF(argv, project='scheduler', prog=prog,
             version=version.version_string(),
             default_config_files=default_config_files)
    except (cfg.Error, OSError) as e:
        if command_line_tool:
            raise  # its own one-line error handling says it
        # A missing, unreadable or malformed file: one line, not a
        # traceback from deep inside oslo.config.
        raise SystemExit('%s: configuration error: %s'
                         % (prog or 'scheduler', _one_line(e)))
    if command_line_tool:
        # The service's ``debug = True`` (as devstack writes it) is for
        # the service's log: a command shares the file, and its output
        # must not open with log lines.  Only its own --debug counts.
        CONF.set_override('debug', '--debug' in argv)
    if setup_logging:
        setup_logging_or_exit()
    if setup_logging and command_line_tool and CONF.debug:
        logging.getLogger('scheduler').logger.setLevel(logging.DEBUG)
        for name in _LIBRARY_LOGGERS:
            logging.getLogger(name).logger.setLevel(logging.INFO)


def reconnect_interval_problem(opts: cfg.ConfigOpts = CONF) -> str | None:
    """Why ``[oslo_messaging_rabbit] rabbit_interval_max`` is too high
    for a prompt stop and prompt replies after a broker outage
    (``RECONNECT_INTERVAL_WARN_ABOVE``), or None."""
    if 'oslo_messaging_rabbit' not in opts:
        return None
    try:
        value = opts.oslo_messaging_rabbit.rabbit_interval_max
    except (cfg.Error, ValueError):
        return None  # the option's own error is reported elsewhere
    if value is None or value <= RECONNECT_INTERVAL_WARN_ABOVE:
        return None
    return ('[oslo_messaging_rabbit] rabbit_interval_max is %d s (more '
            'than %d s): after a broker outage a reply, a build and a '
            'stopping service may each wait that long for a connection '
            'that pauses between reconnection attempts, so SIGTERM may '
            'take longer than %d s; keep it at %d s or less (default %d s)'
            % (value, RECONNECT_INTERVAL_WARN_ABOVE, STOP_WITHIN,
               RECONNECT_INTERVAL_WARN_ABOVE, RECONNECT_INTERVAL_MAX))


def _one_line(error: BaseException) -> str:
    text = ' '.join(str(error).split())
    return text or type(error).__name__


def exit_on_startup_error(prog: str, error: BaseException,
                          logged: bool = False, code: int = 1) -> None:
    """End a daemon that cannot start with one line, and status ``code``.

    The line goes to the log (unless ``logged`` already) and, when the
    log is a file, to stderr too: under systemd stderr is what
    ``systemctl status`` shows.  Never a traceback: the line says what
    to fix.
    """
    line = _one_line(error)
    if not logged:
        logging.getLogger('scheduler').error('Cannot start: %s', line)
    if CONF.log_file or CONF.log_dir:
        sys.stderr.write('%s: %s\n' % (prog, line))
    std_logging.shutdown()
    raise SystemExit(code)


def setup_logging_or_exit() -> None:
    """oslo.log's setup, with a clear message for a journal-less install.

    ``use_journal = true`` needs the systemd Python bindings, which
    oslo.log reports with a bare RuntimeError deep in its setup.
    """
    try:
        logging.setup(CONF, 'scheduler')
    except RuntimeError as e:
        if CONF.use_journal and 'ystemd' in str(e):
            raise SystemExit(
                'use_journal = true needs the systemd Python bindings: '
                'install python3-systemd from your distribution, or '
                "pip install 'openstack-scheduler[journal]' (which builds "
                'against libsystemd-dev), or set use_journal = false')
        raise
