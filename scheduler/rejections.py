"""Rejected requests and messages: one warning line, rate limited, counted.

A caller's mistake (or an attack) is not the service's error: it gets
a typed error back, the operator gets one WARNING line without a
traceback, and a flood of identical mistakes does not flood the log.
Every rejection is counted in ``scheduler_rejected_requests_total``
whether it was logged or not.  An out-of-tree plugin's own error is not
a rejection: ``plugin_failed`` logs it at ERROR with its traceback,
under the same rate limit.
"""

import collections
import logging as std_logging
import threading
import time

from oslo_config import cfg
from oslo_log import log as logging

from scheduler import metrics

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

#: Distinct rejections remembered for rate limiting; the oldest go first.
_MAX_KEYS = 1024
#: Longest reason quoted in a log line.
_MAX_REASON = 300


class _Limiter:
    """Which rejections to log now, and how many were held back."""

    def __init__(self):
        self._lock = threading.Lock()
        self._seen: collections.OrderedDict = collections.OrderedDict()

    def admit(self, key: tuple, interval: float) -> int | None:
        """None to stay quiet, else how many identical ones were held."""
        now = time.monotonic()
        with self._lock:
            entry = self._seen.get(key)
            if entry is not None and now - entry[0] < interval:
                entry[1] += 1
                return None
            held = entry[1] if entry is not None else 0
            self._seen[key] = [now, 0]
            self._seen.move_to_end(key)
            while len(self._seen) > _MAX_KEYS:
                self._seen.popitem(last=False)
            return held


_limiter = _Limiter()


def _short(text: str) -> str:
    text = ' '.join(str(text).split())
    if len(text) > _MAX_REASON:
        return text[:_MAX_REASON] + '...'
    return text


def reject(method, error: BaseException, what: str = 'call') -> None:
    """Count one rejected ``what`` and log it unless a twin was just logged.

    ``method`` is whatever the message named (it may be garbage: it is
    shortened and only ever formatted, never used).
    """
    method = _short(method if isinstance(method, str) else repr(method))
    error_type = type(error).__name__
    reason = _short(error)
    metrics.record_rejection(method[:60], error_type)
    held = _limiter.admit((what, method, error_type, reason),
                          CONF.limits.rejection_log_interval)
    if held is None:
        return
    LOG.warning('Rejected a %(what)s of %(method)s: %(type)s: %(reason)s'
                '%(held)s',
                {'what': what, 'method': method, 'type': error_type,
                 'reason': reason,
                 'held': (' (%d identical rejections not logged)' % held
                          if held else '')})


def plugin_failed(method, plugin: str, error: BaseException) -> None:
    """Log that out-of-tree plugin code ``plugin`` raised ``error`` serving
    ``method``: an ERROR with the traceback, for the plugin's author, at
    most once per ``[limits] rejection_log_interval`` for the same
    failure, as a plugin that fails on one request usually fails on
    every one alike."""
    method = _short(method if isinstance(method, str) else repr(method))
    held = _limiter.admit(('plugin', method, plugin, type(error).__name__),
                          CONF.limits.rejection_log_interval)
    if held is None:
        return
    LOG.error('Plugin %(plugin)s raised serving %(method)s: %(type)s: '
              '%(reason)s%(held)s',
              {'plugin': plugin, 'method': method,
               'type': type(error).__name__, 'reason': _short(error),
               'held': (' (%d identical failures not logged)' % held
                        if held else '')},
              exc_info=error)


class DroppedMessageFilter(std_logging.Filter):
    """Turns oslo.messaging's tracebacks for unreadable messages into ours.

    oslo.messaging logs a message it cannot decode or a duplicate
    message id with a full traceback at ERROR, once per message: a
    hostile sender can fill the disk that way.  Those records become one
    rate-limited warning from ``reject()``; every other record passes.
    """

    #: (logger name, start of the format string) of the records to take.
    RECORDS = (
        ('oslo.messaging._drivers.impl_rabbit', 'Failed to process message'),
        ('oslo_messaging._drivers.amqpdriver', 'ignoring duplicate message'),
    )

    def filter(self, record: std_logging.LogRecord) -> bool:
        for name, start in self.RECORDS:
            if record.name == name and str(record.msg).startswith(start):
                error = (record.exc_info[1] if record.exc_info
                         and record.exc_info[1] is not None
                         else RuntimeError(record.getMessage()))
                reject('-', error, what='message')
                return False
        return True


_filter = DroppedMessageFilter()


def install_log_filter() -> None:
    """Attach the filter to the oslo.messaging loggers (idempotent)."""
    for name, _start in DroppedMessageFilter.RECORDS:
        logger = std_logging.getLogger(name)
        if _filter not in logger.filters:
            logger.addFilter(_filter)
