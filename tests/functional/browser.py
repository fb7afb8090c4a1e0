"""A real headless browser (the distribution's Chromium) for HTML reports.

Missing Chromium skips the test loudly (listed in the final banner), and
fails it under ``CI=true`` (``.ci/run`` installs it where missing).

Screenshots are kept as the run's artifacts in ``$TEST_ARTIFACTS_DIR``
(default: ``test-artifacts/`` at the top of the source tree, ignored by
git), named after the test that took them.
"""

import json
import os
import re
import shutil
import subprocess

from tests.functional import services

#: Console messages Chromium logs with ``--enable-logging=stderr``.
_CONSOLE = re.compile(r'INFO:CONSOLE[^\]]*\] (.*)')

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

#: A page that opens the report in a frame and clicks a request's row
#: as a user would (a real click event through the row's handler),
#: then writes what the report showed into its own DOM.  Frames of
#: local files may read each other only with
#: ``--allow-file-access-from-files``.
_CLICKER = """<!DOCTYPE html><html><body><pre id="out">not loaded</pre>
<iframe id="f" src="%(report)s" width="1200" height="900"></iframe>
<script>
var f = document.getElementById('f');
f.addEventListener('load', function(){
  var out = document.getElementById('out');
  try {
    var d = f.contentDocument;
    var selector = '#requests tbody tr[data-index="%(index)d"]';
    var row = d.querySelector(selector), pages = 0;
    // Beyond the first rows: "more" until the row is there.
    while (!row && d.getElementById('more').style.display !== 'none'
           && pages < 1000) {
      d.getElementById('more').click(); pages++;
      row = d.querySelector(selector);
    }
    if (!row) { out.textContent = 'error: no row %(index)d'; return; }
    row.dispatchEvent(new MouseEvent('click', {bubbles: true}));
    var detail = d.getElementById('detail');
    out.textContent = JSON.stringify({
      request: detail.getAttribute('data-request'),
      display: detail.style.display,
      hash: f.contentWindow.location.hash, pages: pages,
      text: detail.textContent});
  } catch (e) { out.textContent = 'error: ' + e; }
});
</script></body></html>
"""


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
         '--v=0'] + args, capture_output=True, text=True, timeout=300)


def load(path: str, tmp_dir: str, fragment: str = '') -> tuple:
    """``(DOM after the scripts ran, console messages)`` of a local file."""
    done = _run(['--virtual-time-budget=5000', '--dump-dom',
                 'file://%s%s' % (os.path.abspath(path), fragment)],
                tmp_dir)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout, _CONSOLE.findall(done.stderr)


def click(path: str, tmp_dir: str, index: int) -> dict:
    """Click the row of request ``index`` in the report at ``path``;
    what its detail showed: ``{request, display, hash, pages, text}``
    (``pages``: the clicks on "more" it took to list the row)."""
    page = os.path.join(os.path.dirname(os.path.abspath(path)),
                        'click-%d.html' % index)
    with open(page, 'w', encoding='utf-8') as f:
        f.write(_CLICKER % {'report': os.path.basename(path),
                            'index': index})
    done = _run(['--allow-file-access-from-files',
                 '--virtual-time-budget=5000', '--dump-dom',
                 'file://%s' % page], tmp_dir)
    assert done.returncode == 0, done.stderr[-3000:]
    console = _CONSOLE.findall(done.stderr)
    assert console == [], console[:5]
    found = re.search(r'<pre id="out">(.*?)</pre>', done.stdout, re.S)
    assert found, done.stdout[-3000:]
    text = (found.group(1).replace('&lt;', '<').replace('&gt;', '>')
            .replace('&quot;', '"').replace('&amp;', '&'))
    assert not text.startswith(('error', 'not loaded')), text
    return json.loads(text)


def artifacts_dir() -> str:
    where = os.environ.get('TEST_ARTIFACTS_DIR') or os.path.join(
        ROOT, 'test-artifacts')
    os.makedirs(where, exist_ok=True)
    return where


def screenshot(path: str, out: str, tmp_dir: str,
               fragment: str = '') -> str:
    """A PNG of the page at ``out``, a copy kept in ``artifacts_dir()``
    under the name of the test taking it; returns the copy's path."""
    done = _run(['--window-size=1400,2400', '--hide-scrollbars',
                 '--virtual-time-budget=5000', '--screenshot=%s' % out,
                 'file://%s%s' % (os.path.abspath(path), fragment)],
                tmp_dir)
    assert done.returncode == 0 and os.path.exists(out), \
        done.stderr[-3000:]
    test = os.environ.get('PYTEST_CURRENT_TEST', 'test').split(' ')[0]
    name = re.sub(r'[^A-Za-z0-9_.-]+', '_', test.split('::')[-1])
    kept = os.path.join(artifacts_dir(), '%s-%s' % (
        name, os.path.basename(out)))
    shutil.copyfile(out, kept)
    return kept


def check_report(path: str, tmp_dir: str, configs: list,
                 explained: int = 0) -> str:
    """The replay report loads with no console message (no script
    error), draws its four plots with a line per configuration, opens
    request ``explained`` (one the replay explained) with its filter walk
    and ranking, and a screenshot is kept; returns the screenshot's
    path."""
    dom, console = load(path, tmp_dir)
    assert console == [], console[:5]
    assert 'data-ready="yes"' in dom, 'the report script did not finish'
    plots = ('plot-fill', 'plot-refusals', 'plot-stranded',
             'plot-stranded-vcpu')
    for plot in plots:
        assert 'id="%s"' % plot in dom, plot
    assert dom.count('class="replay-plot"') == len(plots)
    for name in configs:
        assert dom.count('data-config="%s"' % name) == len(plots), name
    assert '<td>' in dom.split('id="requests"')[1], 'no request rows'
    # The click-through: a click on the request's row opens its
    # explain (the filter walk per configuration, the per-host
    # results and weights) and names it in the address ...
    shown = click(path, tmp_dir, explained)
    assert shown['request'] == str(explained), shown
    assert shown['display'] == 'block', shown
    assert shown['hash'] == '#request=%d' % explained, shown
    for name in configs:
        assert '%s: ' % name in shown['text'], name
    for part in ('Filter walk:', 'Explained before placing',
                 'Ranking (best first)'):
        assert part in shown['text'], part
    # ... and that address opens it again.
    dom, console = load(path, tmp_dir, '#request=%d' % explained)
    assert console == [], console[:5]
    detail = dom.split('id="detail"')[1].split('id="requests"')[0]
    assert 'data-request="%d"' % explained in dom
    for part in ('Filter walk:', 'Ranking (best first)', 'weight'):
        assert part in detail, part
    shot = screenshot(path, os.path.join(tmp_dir, 'replay-report.png'),
                      tmp_dir)
    screenshot(path, os.path.join(tmp_dir, 'replay-request.png'), tmp_dir,
               '#request=%d' % explained)
    print('replay report screenshot: %s' % shot)
    return shot
