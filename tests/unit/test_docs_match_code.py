"""The README and the guides say only what the code does.

Every configuration snippet, command line, stated option default and
object version in the documentation is checked against the code, so a
change that makes one of them untrue fails here instead of misleading
an operator:

* each ``ini`` block's options exist in the sample configuration's
  namespaces and their values parse as the option's type;
* each prose mention "`[group] name` ... (default `X`)" matches the
  option's default;
* each ``scheduler-manage``, ``scheduler-compute-sim`` and
  ``scheduler-demo`` command line in a shell or console block parses
  with that command's own argument parser;
* each sample ``explain`` output lists the filters its configuration
  enables, in order;
* the object table of doc/rpc-api.md gives the versions the code sends.
"""

import glob
import os
import re
import shlex

import pytest
import stevedore

from tests.unit import fixtures

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
GENERATOR_CONF = os.path.join(REPO, 'etc', 'scheduler',
                              'scheduler-config-generator.conf')
DOCS = sorted([os.path.join(REPO, 'README.md')]
              + glob.glob(os.path.join(REPO, 'doc', '*.md'))
              + glob.glob(os.path.join(REPO, 'doc', 'examples', '*',
                                       '*.md')))
SAMPLE_CONF = os.path.join(REPO, 'etc', 'scheduler',
                           'scheduler.conf.sample')
FENCE = re.compile(r'^```(\w*)\n(.*?)^```', re.M | re.S)
SHELL_LANGS = ('console', 'sh', 'shell', 'bash', '')


def _blocks(lang_filter) -> list:
    """(doc name, line number, language, text) of each fenced block."""
    found = []
    for path in DOCS:
        text = open(path).read()
        for m in FENCE.finditer(text):
            if lang_filter(m.group(1)):
                line = text.count('\n', 0, m.start()) + 1
                found.append((os.path.relpath(path, REPO), line,
                              m.group(1), m.group(2)))
    return found


def _ids(blocks) -> list:
    return ['%s:%d' % (b[0], b[1]) for b in blocks]


@pytest.fixture(scope='module')
def options() -> dict:
    """{(group, name): Opt} of every namespace the sample config lists."""
    namespaces = re.findall(r'^namespace\s*=\s*(\S+)',
                            open(GENERATOR_CONF).read(), re.M)
    # The scheduler's namespace comes first there: listing it sets the
    # library defaults it changes (the control exchange), as the
    # service's start does, before the libraries' options are listed.
    opts = {}
    for ns in namespaces:
        mgr = stevedore.named.NamedExtensionManager(
            'oslo.config.opts', names=[ns], invoke_on_load=True)
        for ext in mgr:
            for group, group_opts in ext.obj:
                gname = getattr(group, 'name', group) or 'DEFAULT'
                for opt in group_opts:
                    opts[(gname, opt.dest)] = opt
                    opts[(gname, opt.name.replace('-', '_'))] = opt
    return opts


def _ini_items(text: str):
    """(section, key, value) of a snippet, repeated keys included."""
    section = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(('#', ';')):
            continue
        m = re.match(r'^\[([^\]]+)\]$', line)
        if m:
            section = m.group(1)
            continue
        key, _, value = line.partition('=')
        yield section, key.strip(), value.strip()


# systemd drop-ins, devstack's local.conf and setup.cfg are ini too;
# test_systemd_unit and test_devstack_plugin check the first two.
OTHER_INI = re.compile(r'^\[(Unit|Service|Install|\[.*\]|entry_points|'
                       r'metadata|options.*)\]$', re.M)
INI_BLOCKS = [b for b in _blocks(lambda lang: lang == 'ini')
              if not OTHER_INI.search(b[3])]


@pytest.mark.parametrize('doc,line,lang,text', INI_BLOCKS,
                         ids=_ids(INI_BLOCKS))
def test_ini_snippets_name_real_options_with_valid_values(
        options, doc, line, lang, text):
    for section, key, value in _ini_items(text):
        assert section, '%s:%d: %s outside a section' % (doc, line, key)
        opt = options.get((section, key))
        assert opt is not None, (
            '%s:%d: [%s] %s is not an option of this service'
            % (doc, line, section, key))
        if not value or '<' in value or '...' in value:
            continue        # a placeholder for the reader to fill in
        try:
            opt.type(value)
        except (ValueError, TypeError) as e:
            pytest.fail('%s:%d: [%s] %s = %s: %s'
                        % (doc, line, section, key, value, e))


DEFAULT_MENTION = re.compile(
    r'`\[(\w+)\] (\w+)`[^`.;]{0,60}?\([^)`]{0,40}?default `([^`]*)`')


def _default_mentions() -> list:
    found = []
    for path in DOCS:
        text = open(path).read()
        for m in DEFAULT_MENTION.finditer(text):
            found.append((os.path.relpath(path, REPO),
                          text.count('\n', 0, m.start()) + 1,
                          m.group(1), m.group(2), m.group(3)))
    return found


DEFAULT_MENTIONS = _default_mentions()


def test_the_docs_state_some_defaults():
    # The pattern below must keep finding the docs' mentions.
    assert len(DEFAULT_MENTIONS) >= 3


@pytest.fixture(scope='module')
def sample_defaults() -> dict:
    """{(group, name): default} as the sample configuration gives them.

    The sample is generated with the defaults the service sets on the
    libraries' options, and test_project_files keeps it current.
    """
    defaults, group = {}, None
    for line in open(SAMPLE_CONF):
        m = re.match(r'^\[(\w+)\]$', line)
        if m:
            group = m.group(1)
        m = re.match(r'^#(\w+) = (.*)$', line)
        if m and group:
            defaults.setdefault((group, m.group(1)), m.group(2).strip())
    return defaults


@pytest.mark.parametrize('doc,line,group,name,stated', DEFAULT_MENTIONS,
                         ids=['%s:%d' % m[:2] for m in DEFAULT_MENTIONS])
def test_stated_defaults_are_the_defaults(sample_defaults, doc, line,
                                          group, name, stated):
    assert (group, name) in sample_defaults, (
        '%s:%d: [%s] %s is not an option' % (doc, line, group, name))
    default = sample_defaults[(group, name)]
    assert default == stated, (
        '%s:%d says [%s] %s defaults to %r; it is %r'
        % (doc, line, group, name, stated, default))


INLINE_COMMAND = re.compile(
    r'`((?:scheduler-manage|scheduler-compute-sim|scheduler-demo)\b[^`]*)`')


def _command_lines() -> list:
    """Every documented command line of the project's console scripts:
    in shell blocks, indented blocks and inline code."""
    found = []
    for path in DOCS:
        text = open(path).read()
        doc = os.path.relpath(path, REPO)
        for m in INLINE_COMMAND.finditer(re.sub(r'\n\s*', ' ', text)):
            words = m.group(1).split()
            # A program or command group named in prose, not a command.
            if len(words) > 2 and '...' not in words:
                found.append((doc, 0, m.group(1).strip()))
        for m in re.finditer(r'^    (.*scheduler-\w+.*)$', text, re.M):
            line = text.count('\n', 0, m.start()) + 1
            for part in re.split(r'&&|\|', m.group(1)):
                part = part.strip()
                if part.split(' ', 1)[0] in PARSERS:
                    found.append((doc, line, part))
    for doc, line, _lang, text in _blocks(lambda lang: lang in SHELL_LANGS):
        joined = re.sub(r'\\\n\s*', ' ', text)
        for raw in joined.splitlines():
            cmd = raw.strip()
            if cmd.startswith(('$ ', '# ')):
                cmd = cmd[2:]
            elif raw.startswith((' ', '\t')) or not cmd:
                continue
            # The last command of a pipeline or chain is what we check.
            for part in re.split(r'&&|\||;', cmd):
                # Without its redirections.
                part = re.split(r'\s\d?>', part)[0].strip()
                if os.path.basename(part.split(' ', 1)[0]) in PARSERS:
                    found.append((doc, line, part))
    return found


def _parser(script: str):
    """The parser of ``scheduler.cmd.<script>``, imported without
    greening this test process (see ``fixtures.import_unpatched``)."""
    def make():
        module = fixtures.import_unpatched('scheduler.cmd.%s' % script)
        return module.make_parser()
    return make


_manage_parser = _parser('manage')
_sim_parser = _parser('compute_sim')
_demo_parser = _parser('demo')


PARSERS = {'scheduler-manage': _manage_parser,
           'scheduler-compute-sim': _sim_parser,
           'scheduler-demo': _demo_parser}
COMMAND_LINES = _command_lines()


def test_the_docs_show_commands():
    assert len(COMMAND_LINES) >= 15


@pytest.mark.parametrize('doc,line,cmd', COMMAND_LINES,
                         ids=['%s:%d:%s' % (c[0], c[1], c[2][:40])
                              for c in COMMAND_LINES])
def test_documented_command_lines_parse(doc, line, cmd):
    words = shlex.split(cmd, comments=True)
    # Placeholders the reader replaces (HOST, <uuid>) parse as words.
    parser = PARSERS[os.path.basename(words[0])]()
    try:
        parser.parse_args(words[1:])
    except SystemExit as e:
        pytest.fail('%s:%d: %r does not parse (exit %s)'
                    % (doc, line, cmd, e.code))


def _explain_samples() -> list:
    """(doc, line, filters of the sample, filters the config enables)."""
    found = []
    for path in DOCS:
        text = open(path).read()
        enabled = None
        for m in FENCE.finditer(text):
            body = m.group(2)
            if m.group(1) == 'ini':
                for section, key, value in _ini_items(body):
                    if key == 'enabled_filters':
                        enabled = [f.strip() for f in value.split(',')]
            elif 'Filters, in order:' in body:
                table = body.split('Filters, in order:', 1)[1]
                rows = re.findall(r'^\| (\w+Filter)\s*\| \d+\s*\| (\d+)',
                                  table, re.M)
                names = [name for name, _ in rows]
                # The walk stops at a filter that leaves no host.
                stopped = bool(rows) and rows[-1][1] == '0'
                found.append((os.path.relpath(path, REPO),
                              text.count('\n', 0, m.start()) + 1,
                              names, enabled, stopped))
    return found


EXPLAIN_SAMPLES = _explain_samples()


@pytest.mark.parametrize('doc,line,shown,enabled,stopped', EXPLAIN_SAMPLES,
                         ids=['%s:%d' % s[:2] for s in EXPLAIN_SAMPLES])
def test_sample_explain_output_lists_the_enabled_filters(
        doc, line, shown, enabled, stopped):
    if enabled is None:
        from scheduler.conf import filter_scheduler
        opts = list(filter_scheduler.list_opts().values())[0]
        enabled = [o for o in opts if o.name == 'enabled_filters'][0].default
    if stopped:
        enabled = enabled[:len(shown)]
    assert shown == enabled, (
        '%s:%d: the sample output walks %s, the configuration before it '
        'enables %s' % (doc, line, shown, enabled))


def test_rpc_api_object_table_gives_the_versions_sent():
    from scheduler import objects
    objects.register_all()
    from scheduler.objects import base
    classes = base.SchedulerObjectRegistry.obj_classes()
    text = open(os.path.join(REPO, 'doc', 'rpc-api.md')).read()
    rows = re.findall(r'^\| (`[^|]+) \| (\d+\.\d+) \|', text, re.M)
    assert rows, 'the object table of doc/rpc-api.md was not found'
    checked = 0
    for names, version in rows:
        for name in re.findall(r'`(\w+)`', names):
            if name not in classes:
                continue
            newest = max(cls.VERSION for cls in classes[name])
            assert newest == version, (
                'doc/rpc-api.md lists %s %s; the code sends %s'
                % (name, version, newest))
            checked += 1
    assert checked >= 10


#: Sentences the docs once said that the code does not do (issue 29,
#: item 9), each with what is true instead.  They must not come back.
RETIRED = [
    ('Claims are per process',
     'claims are in the shared inventory database: every worker and '
     'every service sees them'),
    ('nothing deduplicates by uuid',
     'a retry with the same instance uuids finds its pending claims'),
    ('stevedore warns when that fails',
     "the line to look for is the loader's own: Could not load "
     "<namespace> '<name>': not importable: ...; no entry point (...)"),
    ('WARNING stevedore.named [-] Could not load',
     "the line to look for is the loader's own: Could not load "
     "<namespace> '<name>': not importable: ...; no entry point (...)"),
    ('num_instances` outside 1..1000',
     'the bound is [limits] max_instances_per_request, 100 by default'),
    ('identical instances (1 to 1000)',
     'the bound is [limits] max_instances_per_request, 100 by default'),
]


@pytest.mark.parametrize('sentence, truth', RETIRED)
def test_retired_statements_stay_out_of_the_docs(sentence, truth):
    for path in DOCS:
        with open(path, encoding='utf-8') as f:
            text = ' '.join(f.read().split())
        assert sentence not in text, '%s says %r; %s' % (
            os.path.relpath(path, REPO), sentence, truth)
