"""etc/scheduler/logging.conf.sample, loaded as log_config_append does."""

import logging
import logging.config
import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SAMPLE = os.path.join(REPO, 'etc', 'scheduler', 'logging.conf.sample')


def test_plugin_info_lines_show_with_milliseconds_once(tmp_path):
    log = tmp_path / 'scheduler.log'
    text = open(SAMPLE).read().replace('/var/log/scheduler/scheduler.log',
                                       str(log))
    conf = tmp_path / 'logging.conf'
    conf.write_text(text)
    # fileConfig reconfigures these for the whole process: put them back.
    touched = [logging.getLogger(name) for name in (
        '', 'scheduler', 'scheduler.filters', 'oslo_messaging', 'amqp',
        'kombu', 'stevedore')]
    saved = [(lg, lg.level, list(lg.handlers), lg.propagate)
             for lg in touched]
    try:
        logging.config.fileConfig(str(conf),
                                  disable_existing_loggers=False)
        logging.getLogger('acme_filters.filters').info('plugin says hi')
        logging.getLogger('amqp').info('library chatter')
        for handler in logging.getLogger().handlers:
            handler.flush()
    finally:
        for lg, level, handlers, propagate in saved:
            for handler in lg.handlers:
                if handler not in handlers:
                    handler.close()
            lg.handlers[:] = handlers
            lg.setLevel(level)
            lg.propagate = propagate
    lines = log.read_text().splitlines()
    assert len(lines) == 1, lines
    assert 'plugin says hi' in lines[0]
    assert re.match(r'^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \d+ INFO ',
                    lines[0]), lines[0]
