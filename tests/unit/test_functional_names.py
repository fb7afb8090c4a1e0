"""The functional tests' names on the shared broker: their own, and only
theirs, are checked for leftovers at the end of a session."""

from oslo_config import cfg

from tests.functional import daemons


def test_own_names_are_the_unique_names_and_what_derives_from_them():
    topic = daemons.unique_topic('scheduler')
    assert topic in daemons.UNIQUE_NAMES
    on_broker = [topic, topic + '.sched-0', topic + '_reports_fanout',
                 topic + '_fanout_0123abcd', 'scheduler', 'reply_0123',
                 topic + 'x', 'compute-0123456789', 'amq.topic']
    assert daemons.own_names(on_broker, {topic}) == sorted(
        [topic, topic + '.sched-0', topic + '_reports_fanout',
         topic + '_fanout_0123abcd'])


def test_config_files_name_the_control_exchange_when_one_is_set(
        tmp_path, monkeypatch):
    path = str(tmp_path / 'a.conf')
    monkeypatch.setattr(daemons, 'CONTROL_EXCHANGE', None)
    daemons.write_multi_config(path, '[DEFAULT]\nhost = a\n')
    assert 'control_exchange' not in open(path).read()
    monkeypatch.setattr(daemons, 'CONTROL_EXCHANGE', 'scheduler-tests-x')
    daemons.write_multi_config(path, '[DEFAULT]\ncontrol_exchange = own\n')
    # First, so that a test's own exchange (later in the file) wins.
    parsed = cfg.ConfigOpts()
    parsed.register_opt(cfg.StrOpt('control_exchange'))
    parsed(['--config-file', path])
    assert parsed.control_exchange == 'own'
    daemons.write_multi_config(path, '[DEFAULT]\nhost = a\n')
    parsed.reload_config_files()
    assert parsed.control_exchange == 'scheduler-tests-x'
