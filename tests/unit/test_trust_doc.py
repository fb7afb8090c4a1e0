"""The admin guide's security section says what the tests run."""

import os

from tests.functional import broker_users

GUIDE = os.path.join(os.path.dirname(__file__), '..', '..', 'doc',
                     'admin-guide.md')


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
