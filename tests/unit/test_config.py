"""Command-line and config-file parsing shared by every command."""

import importlib.util

import pytest

from scheduler import config


def _write(tmp_path, text: str) -> str:
    path = tmp_path / 'scheduler.conf'
    path.write_text(text)
    return str(path)


def test_config_files_may_set_messaging_options(conf, tmp_path):
    path = _write(tmp_path,
                  '[DEFAULT]\ntransport_url = rabbit://u:p@127.0.0.1:5672/\n'
                  '[oslo_messaging_notifications]\ndriver = messagingv2\n')
    conf.conf.clear_override('transport_url')  # the fixture's fake://
    config.parse_args(['--config-file', path], default_config_files=[],
                      setup_logging=False)
    assert conf.conf.transport_url.startswith('rabbit://')
    assert conf.conf.oslo_messaging_notifications.driver == ['messagingv2']


@pytest.mark.skipif(importlib.util.find_spec('systemd') is not None,
                    reason='the systemd bindings are installed here')
def test_use_journal_without_bindings_is_one_clear_error(conf, tmp_path):
    path = _write(tmp_path, '[DEFAULT]\nuse_journal = true\n')
    with pytest.raises(SystemExit) as exit_info:
        config.parse_args(['--config-file', path], default_config_files=[])
    assert 'python3-systemd' in str(exit_info.value)
    assert 'use_journal' in str(exit_info.value)


def test_servers_take_a_bounded_prefetch_unless_told_otherwise(conf,
                                                               tmp_path):
    """oslo's default (0) has the broker push a server every message
    queued for it; ours bounds it, and a config file still decides."""
    config.parse_args([], default_config_files=[], setup_logging=False)
    rabbit = conf.conf.oslo_messaging_rabbit
    assert rabbit.rabbit_qos_prefetch_count == config.PREFETCH_COUNT
    path = _write(tmp_path, '[oslo_messaging_rabbit]\n'
                            'rabbit_qos_prefetch_count = 0\n')
    config.parse_args(['--config-file', path], default_config_files=[],
                      setup_logging=False)
    assert conf.conf.oslo_messaging_rabbit.rabbit_qos_prefetch_count == 0


def test_reconnection_pauses_are_short_unless_told_otherwise(conf,
                                                             tmp_path):
    """A connection's heartbeat thread re-establishes it under the
    connection's lock, pauses between attempts included: with oslo's
    30 s ceiling a reply or a build waited up to 30 s after the broker
    was back, and so did a stopping service.  Ours is short; a config
    file still decides."""
    config.parse_args([], default_config_files=[], setup_logging=False)
    rabbit = conf.conf.oslo_messaging_rabbit
    assert rabbit.rabbit_interval_max == config.RECONNECT_INTERVAL_MAX
    assert config.RECONNECT_INTERVAL_MAX <= 2
    path = _write(tmp_path, '[oslo_messaging_rabbit]\n'
                            'rabbit_interval_max = 30\n')
    config.parse_args(['--config-file', path], default_config_files=[],
                      setup_logging=False)
    assert conf.conf.oslo_messaging_rabbit.rabbit_interval_max == 30


@pytest.mark.parametrize('value, warned', [
    (1, False), (config.RECONNECT_INTERVAL_MAX, False),
    (config.RECONNECT_INTERVAL_WARN_ABOVE, False),
    (config.RECONNECT_INTERVAL_WARN_ABOVE + 1, True), (30, True)])
def test_a_long_reconnection_pause_is_a_problem(conf, tmp_path, value,
                                                warned):
    path = _write(tmp_path, '[oslo_messaging_rabbit]\n'
                            'rabbit_interval_max = %d\n' % value)
    config.parse_args(['--config-file', path], default_config_files=[],
                      setup_logging=False)
    problem = config.reconnect_interval_problem()
    assert bool(problem) is warned
    if warned:
        assert '[oslo_messaging_rabbit] rabbit_interval_max is %d s' \
            % value in problem
        assert 'SIGTERM' in problem


def test_the_warning_bound_keeps_the_stop_within_its_budget():
    """One pause, the reply's retry while stopping and the consumers'
    half second must leave time to save the state within STOP_WITHIN."""
    assert config.RECONNECT_INTERVAL_MAX <= \
        config.RECONNECT_INTERVAL_WARN_ABOVE
    assert config.RECONNECT_INTERVAL_WARN_ABOVE + \
        config.REPLY_RETRY_SECONDS + 0.5 < config.STOP_WITHIN - 2


def test_a_reload_refuses_a_value_its_option_cannot_take(
        conf, tmp_path, caplog):
    """SIGHUP with a typo in a mutable option: the option keeps its
    running value and the log says so; the rest of the file applies.
    (oslo.config takes the new text unchecked, and every request then
    failed reading it.)"""
    path = _write(tmp_path, '[filter_scheduler]\nhost_subset_size = 2\n'
                  'ram_weight_multiplier = 1.0\n')
    config.parse_args(['--config-file', path], default_config_files=[],
                      setup_logging=False)
    group = conf.conf.filter_scheduler
    _write(tmp_path, '[filter_scheduler]\nhost_subset_size = abc\n'
                     'ram_weight_multiplier = 2.5\n')
    conf.conf.mutate_config_files()
    assert group.host_subset_size == 2
    assert group.ram_weight_multiplier == 2.5
    refused = [r.getMessage() for r in caplog.records
               if r.levelname == 'ERROR']
    assert len(refused) == 1, refused
    assert "[filter_scheduler] host_subset_size = 'abc'" in refused[0]
    assert 'keeping 2' in refused[0]
    # Another bad value: still the last good one.
    _write(tmp_path, '[filter_scheduler]\nhost_subset_size = 0\n')
    conf.conf.mutate_config_files()
    assert group.host_subset_size == 2
    # Fixed in the file: applied at the next reload.
    _write(tmp_path, '[filter_scheduler]\nhost_subset_size = 3\n')
    conf.conf.mutate_config_files()
    assert group.host_subset_size == 3
    # An option the file did not set keeps its default.
    _write(tmp_path, '[filter_scheduler]\nhost_subset_size = 3\n'
                     'shuffle_best_same_weighed_hosts = perhaps\n')
    conf.conf.mutate_config_files()
    assert group.shuffle_best_same_weighed_hosts is False


@pytest.mark.parametrize('text', [
    '[DEFAULT]\ndebug = maybe\n',   # a command-line option: argparse exits
    '[filter_scheduler\n',          # a file that no longer parses
])
def test_a_reload_of_files_that_do_not_parse_keeps_everything(
        conf, tmp_path, caplog, text):
    """SIGHUP after an edit that breaks the files: the service keeps
    running on what it had (the launcher used to exit on it, taking the
    workers down), and says it."""
    path = _write(tmp_path, '[filter_scheduler]\nhost_subset_size = 2\n')
    config.parse_args(['--config-file', path], default_config_files=[],
                      setup_logging=False)
    _write(tmp_path, '[filter_scheduler]\nhost_subset_size = 3\n' + text)
    assert conf.conf.mutate_config_files() == {}
    assert conf.conf.filter_scheduler.host_subset_size == 2
    refused = [r.getMessage() for r in caplog.records
               if r.levelname == 'ERROR']
    assert len(refused) == 1, refused
    assert refused[0].startswith('Reload: the configuration files were not '
                                 'reloaded'), refused
    # Fixed: the next reload applies.
    _write(tmp_path, '[filter_scheduler]\nhost_subset_size = 3\n')
    conf.conf.mutate_config_files()
    assert conf.conf.filter_scheduler.host_subset_size == 3


def test_a_reload_applies_new_compute_and_admin_users(conf, tmp_path):
    """Day two: a new rack's credential, or an operator's, is bound by
    ``systemctl reload``, without restarting the schedulers."""
    from scheduler import trust
    path = _write(tmp_path, '[trust]\ncompute_users = rack1:rack1-*\n')
    config.parse_args(['--config-file', path], default_config_files=[],
                      setup_logging=False)
    assert not trust.speaker_of('rack2', trust.REPORTS_TOPIC)('rack2-01')
    _write(tmp_path, '[trust]\ncompute_users = rack1:rack1-*,'
                     'rack2:rack2-*\nadmin_users = ops-alice\n')
    conf.conf.mutate_config_files()
    assert trust.speaker_of('rack2', trust.REPORTS_TOPIC)('rack2-01')
    assert 'ops-alice' in trust.operator_users()


def test_a_reload_of_an_option_named_with_dashes_is_applied(
        conf, tmp_path, capsys):
    """oslo.log's ``log-config-append`` (its attribute is
    ``log_config_append``): the reload applies it, and is not reported
    as not reloaded."""
    config.register_logging_options()
    path = _write(tmp_path, '[filter_scheduler]\nhost_subset_size = 2\n')
    config.parse_args(['--config-file', path], default_config_files=[],
                      setup_logging=False)
    # An empty logging file, which oslo.log's own hook refuses (it
    # raised out of the reload, which ended the launching process).
    sample = tmp_path / 'logging.conf'
    sample.write_text('')
    _write(tmp_path, '[DEFAULT]\nlog_config_append = %s\n'
                     '[filter_scheduler]\nhost_subset_size = 3\n' % sample)
    conf.conf.mutate_config_files()
    assert conf.conf.filter_scheduler.host_subset_size == 3
    # oslo.log took every handler away before it failed: the line goes
    # to stderr (Python's last resort, the journal under systemd).
    errors = capsys.readouterr().err.splitlines()
    assert len(errors) == 1, errors
    assert errors[0].startswith('Reload: the options are reloaded, but '
                                'applying them failed (Error loading '
                                'logging config'), errors
