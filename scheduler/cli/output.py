"""Printing rows the same way in every command: ``--format table``
(long cells cut; wrapped to the terminal's width when printing to one),
``json``, ``yaml`` or ``value`` (cells only, for shell scripts)."""

import json
import shutil
import sys

import prettytable
import yaml

FORMATS = ('table', 'json', 'yaml', 'value')

#: A table cell longer than this is cut, with ``...`` at the end:
#: ``--format json`` shows everything.
MAX_CELL = 200

#: No column of a table is wrapped narrower than this.
MIN_COLUMN = 12


def structured(fmt: str) -> bool:
    """Whether ``fmt`` prints data (JSON, YAML) rather than text."""
    return fmt in ('json', 'yaml')


def emit(rows: list, columns: list, fmt: str = 'table', stream=None,
         cut: bool = True) -> None:
    """Print ``rows`` (dicts) with ``columns`` in format ``fmt``;
    ``cut=False`` keeps long table cells whole (wrapped on a terminal)."""
    stream = stream or sys.stdout
    if structured(fmt):
        emit_data(fmt, [{c: r.get(c) for c in columns} for r in rows],
                  stream)
        return
    if fmt == 'value':
        for row in rows:
            stream.write(' '.join(_cell(row.get(c)) for c in columns)
                         + '\n')
        return
    table = prettytable.PrettyTable(columns)
    table.align = 'l'
    for row in rows:
        cells = [_cell(row.get(c)) for c in columns]
        table.add_row([c if len(c) <= MAX_CELL or not cut
                       else c[:MAX_CELL - 3] + '...' for c in cells])
    if _is_terminal(stream):
        _fit(table, len(columns))
    stream.write(table.get_string() + '\n')


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _fit(table: prettytable.PrettyTable, count: int) -> None:
    """Wrap the widest columns so that the table fits the terminal."""
    width = shutil.get_terminal_size((120, 24)).columns
    if len(table.get_string().splitlines()[0]) <= width:
        return
    # Each column costs 3 characters of borders and padding, plus one.
    room = max(width - 3 * count - 1, MIN_COLUMN * count)
    table.max_width = max(MIN_COLUMN, room // count)


def emit_data(fmt: str, value, stream=None) -> None:
    """Print any JSON-friendly value as JSON or YAML."""
    stream = stream or sys.stdout
    if fmt == 'yaml':
        # Through JSON first: datetimes and the like become strings.
        plain = json.loads(json.dumps(value, default=str))
        yaml.safe_dump(plain, stream, default_flow_style=False,
                       sort_keys=True)
        return
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
