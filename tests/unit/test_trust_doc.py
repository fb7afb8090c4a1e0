"""The admin guide's security section says what the tests run."""

import ast
import os

from tests.functional import broker_users

GUIDE = os.path.join(os.path.dirname(__file__), '..', '..', 'doc',
                     'admin-guide.md')
SECURITY_TESTS = os.path.join(os.path.dirname(__file__), '..', 'functional',
                              'test_security.py')
TABLE_HEADER = '| credential | can | cannot (refused by) |'


def _section() -> str:
    with open(GUIDE) as f:
        text = f.read()
    start = text.index('## Security and trust')
    end = text.find('\n## ', start + 1)
    return text[start:end if end > 0 else len(text)]


def test_the_guide_prints_the_commands_the_tests_run():
    section = _section()
    for line in broker_users.guide_lines():
        assert '# %s\n' % line in section, line
    assert broker_users.GUIDE_TRUST_CONFIG in section


def test_the_guide_tables_every_credential():
    section = _section()
    for credential in ('| operator:', '| conductor (caller) |',
                       '| compute |', '| service (the scheduler daemon) |'):
        assert credential in section
    assert '**Who may force a host:**' in section


def _table_rows(section: str) -> list:
    """The first cell of each row of the credential table."""
    lines = section[section.index(TABLE_HEADER):].splitlines()[2:]
    rows = []
    for line in lines:
        if not line.startswith('| '):
            break
        rows.append(line[2:].split(' | ')[0].split(':')[0].strip())
    return rows


def test_every_row_of_the_credential_table_is_tested():
    rows = _table_rows(_section())
    assert len(rows) == 4, rows
    assert sorted(rows) == sorted(broker_users.TABLE_TESTS)
    with open(SECURITY_TESTS) as f:
        tree = ast.parse(f.read())
    tests = {node.name for node in ast.walk(tree)
             if isinstance(node, ast.FunctionDef)}
    for row, names in broker_users.TABLE_TESTS.items():
        assert names, row
        for name in names:
            assert name in tests, (row, name)
