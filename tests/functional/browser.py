"""A real headless browser (the distribution's Chromium) for HTML reports.

Missing Chromium skips the test loudly (listed in the final banner), and
fails it under ``CI=true`` (``.ci/run`` installs it where missing).
"""

import os
import re
import shutil
import subprocess

from tests.functional import services

#: Console messages Chromium logs with ``--enable-logging=stderr``.
_CONSOLE = re.compile(r'INFO:CONSOLE[^\]]*\] (.*)')


def chromium() -> str:
    for name in ('chromium', 'chromium-browser'):
        path = shutil.which(name)
        if path:
            return path
    services.unreachable('chromium is not installed (apt-get install '
                         'chromium): the HTML report is not checked in a '
                         'browser')
    raise AssertionError('unreachable')


def _run(args: list, tmp_dir: str) -> subprocess.CompletedProcess:
    # A profile of its own under the test's directory: nothing shared
    # with another test's browser, nothing left in $HOME.
    profile = os.path.join(tmp_dir, 'chromium-profile')
    return subprocess.run(
        [chromium(), '--headless', '--no-sandbox', '--disable-gpu',
         '--no-first-run', '--disable-extensions',
         '--user-data-dir=%s' % profile, '--enable-logging=stderr',
         '--v=0'] + args, capture_output=True, text=True, timeout=120)


def load(path: str, tmp_dir: str, fragment: str = '') -> tuple:
    """``(DOM after the scripts ran, console messages)`` of a local file."""
    done = _run(['--virtual-time-budget=5000', '--dump-dom',
                 'file://%s%s' % (os.path.abspath(path), fragment)],
                tmp_dir)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout, _CONSOLE.findall(done.stderr)


def screenshot(path: str, out: str, tmp_dir: str) -> str:
    """A PNG of the page at ``out`` (kept as the test's artifact)."""
    done = _run(['--window-size=1400,2400', '--hide-scrollbars',
                 '--virtual-time-budget=5000', '--screenshot=%s' % out,
                 'file://%s' % os.path.abspath(path)], tmp_dir)
    assert done.returncode == 0 and os.path.exists(out), \
        done.stderr[-3000:]
    return out


def check_report(path: str, tmp_dir: str, configs: list,
                 explained: int = 0) -> str:
    """The replay report loads with no console message (no script
    error), draws its three plots with a line per configuration, opens
    request ``explained`` (one the replay explained) with its filter walk
    and ranking, and a screenshot is kept; returns the screenshot's
    path."""
    dom, console = load(path, tmp_dir)
    assert console == [], console
    assert 'data-ready="yes"' in dom, 'the report script did not finish'
    for plot in ('plot-fill', 'plot-refusals', 'plot-stranded'):
        assert 'id="%s"' % plot in dom, plot
    assert dom.count('class="replay-plot"') == 3
    for name in configs:
        assert dom.count('data-config="%s"' % name) == 3, name
    assert '<td>' in dom.split('id="requests"')[1], 'no request rows'
    # The click-through: a request's explain, opened by its address.
    dom, console = load(path, tmp_dir, '#request=%d' % explained)
    assert console == [], console
    detail = dom.split('id="detail"')[1].split('id="requests"')[0]
    assert 'data-request="%d"' % explained in dom
    for part in ('Filter walk:', 'Ranking (best first)', 'weight'):
        assert part in detail, part
    shot = screenshot(path, os.path.join(tmp_dir, 'replay-report.png'),
                      tmp_dir)
    print('replay report screenshot: %s' % shot)
    return shot
