"""Printing rows as a table or as JSON, the same way in every command."""

import json
import sys

import prettytable


def emit(rows: list, columns: list, fmt: str = 'table', stream=None) -> None:
    """Print ``rows`` (dicts) with ``columns`` as a table or JSON list."""
    stream = stream or sys.stdout
    if fmt == 'json':
        emit_json([{c: r.get(c) for c in columns} for r in rows], stream)
        return
    table = prettytable.PrettyTable(columns)
    table.align = 'l'
    for row in rows:
        table.add_row([_cell(row.get(c)) for c in columns])
    stream.write(table.get_string() + '\n')


def emit_json(value, stream=None) -> None:
    """Print any JSON-friendly value, the way ``emit`` prints JSON."""
    stream = stream or sys.stdout
    json.dump(value, stream, indent=2, sort_keys=True, default=str)
    stream.write('\n')


def _cell(value) -> str:
    if value is None:
        return '-'
    if isinstance(value, (list, tuple, set)):
        return ', '.join(str(v) for v in value) or '-'
    if isinstance(value, dict):
        return ', '.join('%s=%s' % kv for kv in sorted(value.items())) or '-'
    if isinstance(value, float):
        return '%.3f' % value
    return str(value)


def key_values(pairs: list | None, what: str) -> dict:
    """``['k=v', ...]`` from the command line to a dict."""
    out: dict = {}
    for pair in pairs or []:
        if '=' not in pair:
            raise SystemExit('%s must be KEY=VALUE, not %r' % (what, pair))
        key, value = pair.split('=', 1)
        out[key.strip()] = value.strip()
    return out


def error_line(error: Exception) -> str:
    """``NoValidHost: <message>`` for an error raised in the service.

    oslo.messaging re-raises remote errors as ``<Name>_Remote``
    subclasses whose text ends with the remote traceback; show the
    type and message a caller cares about.
    """
    cls = type(error)
    if cls.__name__.endswith('_Remote'):
        cls = cls.__mro__[1]
    message = getattr(error, 'message', None) or str(error)
    return '%s: %s' % (cls.__name__, message.strip())
