"""The replay report as one self-contained HTML file.

No network: the styles, the script and the data are inline, and the
plots are SVG the page's script draws from the data.  It shows the
configurations side by side (the comparison table), four plots over
the trace (fleet fill, refusals, stranded RAM and vCPU), and the
requests:
a click on one (or an address ending in ``#request=N``) shows, per
configuration, where it went, its filter walk and, when it was
explained, the per-host filter results and weights.
"""

import html
import json

from scheduler.replay import compare

_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;font-size:.9em}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}
th{background:#f2f2f2}
.plots{display:flex;flex-wrap:wrap;gap:1em}
.plot{border:1px solid #ddd;padding:.4em}
.legend span{margin-right:1em}
#requests tr{cursor:pointer}#requests tr:hover{background:#eef}
.nvh{color:#b00;font-weight:bold}
#detail{border:1px solid #99c;padding:.6em;margin-top:1em;display:none}
.cols{display:flex;gap:1.5em;flex-wrap:wrap}
"""

_SCRIPT = r"""
(function(){
var D = JSON.parse(document.getElementById('replay-data').textContent);
var COLORS = ['#1f77b4','#d62728','#2ca02c','#9467bd','#ff7f0e','#8c564b'];
var names = D.configs.map(function(c){return c.name;});
function el(tag, attrs, text){
  var e = document.createElement(tag);
  for (var k in (attrs||{})) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}
function svgEl(tag, attrs){
  var e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (var k in attrs) e.setAttribute(k, attrs[k]);
  return e;
}
function plot(id, title, key, fmt){
  var W = 420, H = 220, L = 55, B = 30;
  var box = el('div', {'class': 'plot', 'id': id});
  box.appendChild(el('div', {}, title));
  var svg = svgEl('svg', {width: W, height: H, 'class': 'replay-plot',
                          'data-key': key});
  var maxX = 1, maxY = 0;
  names.forEach(function(n){ (D.timeline[n]||[]).forEach(function(p){
    maxX = Math.max(maxX, p.event); maxY = Math.max(maxY, p[key]); });});
  if (maxY <= 0) maxY = 1;
  svg.appendChild(svgEl('line', {x1: L, y1: H-B, x2: W-5, y2: H-B,
                                 stroke: '#888'}));
  svg.appendChild(svgEl('line', {x1: L, y1: 5, x2: L, y2: H-B,
                                 stroke: '#888'}));
  var top = svgEl('text', {x: 2, y: 14, 'font-size': 11});
  top.textContent = fmt(maxY); svg.appendChild(top);
  var zero = svgEl('text', {x: 2, y: H-B, 'font-size': 11});
  zero.textContent = fmt(0); svg.appendChild(zero);
  var xl = svgEl('text', {x: W-150, y: H-8, 'font-size': 11});
  xl.textContent = 'trace events (' + maxX + ')'; svg.appendChild(xl);
  names.forEach(function(n, i){
    var pts = (D.timeline[n]||[]).map(function(p){
      return (L + (W-5-L) * p.event / maxX).toFixed(1) + ',' +
             (H-B - (H-B-5) * p[key] / maxY).toFixed(1); });
    var line = {points: pts.join(' '), fill: 'none',
      stroke: COLORS[i % COLORS.length], 'stroke-width': 2,
      'data-config': n};
    // Dashed after the first: a line on top of another (the same
    // figures) leaves the one below visible.
    if (i) line['stroke-dasharray'] = (2 + 4 * i) + ',' + (2 + 2 * i);
    svg.appendChild(svgEl('polyline', line));
  });
  box.appendChild(svg);
  var legend = el('div', {'class': 'legend'});
  names.forEach(function(n, i){
    var s = el('span', {}, '\u25a0 ' + n);
    s.style.color = COLORS[i % COLORS.length]; legend.appendChild(s); });
  box.appendChild(legend);
  return box;
}
var pct = function(v){ return (100*v).toFixed(0) + '%'; };
var num = function(v){ return String(Math.round(v)); };
var plots = document.getElementById('plots');
plots.appendChild(plot('plot-fill', 'Fleet fill (RAM used / RAM allowed)',
                       'ram_fill', pct));
plots.appendChild(plot('plot-refusals', 'Refusals (NoValidHost, cumulative)',
                       'refused', num));
plots.appendChild(plot('plot-stranded',
  'Stranded RAM MB (free on hosts that cannot take the most common flavor)',
  'stranded_memory_mb', num));
plots.appendChild(plot('plot-stranded-vcpu',
  'Stranded vCPU (free on hosts that cannot take the most common flavor)',
  'stranded_vcpus', num));

var tbody = document.querySelector('#requests tbody');
var shown = 0, next = 0, current = 'all', LIMIT = 500;
function requestRow(r){
  var tr = el('tr', {'data-index': r.index});
  tr.appendChild(el('td', {}, r.index));
  tr.appendChild(el('td', {}, r.flavor));
  tr.appendChild(el('td', {}, r.instances));
  tr.appendChild(el('td', {}, r.availability_zone || ''));
  names.forEach(function(n){
    var res = r.results[n];
    var td = el('td', {}, res.hosts ? res.hosts.join(', ') : 'NoValidHost');
    if (!res.hosts) td.className = 'nvh';
    tr.appendChild(td);
  });
  tr.addEventListener('click', function(){
    // The address names the request: a link to the report opens it.
    history.replaceState(null, '', '#request=' + r.index);
    showDetail(r);
  });
  return tr;
}
function matches(r, filter){
  if (filter === 'refused') return names.some(function(n){
    return !r.results[n].hosts; });
  if (filter === 'differ') return !names.every(function(n){
    return JSON.stringify(r.results[n].hosts) ===
           JSON.stringify(r.results[names[0]].hosts); });
  if (filter === 'explained') return names.some(function(n){
    return r.results[n].explain; });
  return true;
}
// Rows LIMIT at a time: "more" adds the next ones, so that every
// request of a long trace can be reached (and "go to" opens one).
function more(){
  var added = 0;
  for (; next < D.requests.length && added < LIMIT; next++){
    if (!matches(D.requests[next], current)) continue;
    tbody.appendChild(requestRow(D.requests[next])); shown++; added++;
  }
  var left = 0;
  for (var i = next; i < D.requests.length; i++)
    if (matches(D.requests[i], current)) left++;
  document.getElementById('shown').textContent = shown + ' shown' +
    (left ? ', ' + left + ' more' : '');
  document.getElementById('more').style.display = left ? '' : 'none';
}
function fill(filter){
  tbody.textContent = ''; shown = 0; next = 0; current = filter;
  more();
}
document.getElementById('filter').addEventListener('change', function(e){
  fill(e.target.value); });
document.getElementById('more').addEventListener('click', more);
document.getElementById('goto').addEventListener('change', function(e){
  var r = D.requests[+e.target.value];
  if (r){ history.replaceState(null, '', '#request=' + r.index);
          showDetail(r); }
});
fill('all');

function table(rows, cols){
  var t = el('table'), h = el('tr');
  cols.forEach(function(c){ h.appendChild(el('th', {}, c)); });
  t.appendChild(h);
  rows.forEach(function(row){
    var tr = el('tr');
    row.forEach(function(v){ tr.appendChild(el('td', {}, v)); });
    t.appendChild(tr);
  });
  return t;
}
function showDetail(r){
  var d = document.getElementById('detail');
  d.textContent = ''; d.style.display = 'block';
  d.setAttribute('data-request', r.index);
  d.appendChild(el('h3', {}, 'Request ' + r.index + ': ' + r.instances +
    ' x ' + r.flavor + ' (' + r.memory_mb + ' MB, ' + r.vcpus +
    ' vCPU, ' + r.disk_gb + ' GB)' +
    (r.availability_zone ? ' in ' + r.availability_zone : '') +
    (r.recorded ? '; recorded: ' + r.recorded : '')));
  var cols = el('div', {'class': 'cols'});
  names.forEach(function(n){
    var res = r.results[n], box = el('div', {'class': 'explain'});
    box.appendChild(el('h4', {}, n + ': ' + (res.hosts ?
      res.hosts.join(', ') : 'NoValidHost') + ' (' + res.ms + ' ms)'));
    box.appendChild(el('div', {}, 'Filter walk:'));
    box.appendChild(table(res.walk, ['filter', 'hosts in', 'hosts out']));
    var x = res.explain;
    if (x && !x.error){
      box.appendChild(el('div', {}, 'Explained before placing: ' +
        x.candidates + ' candidates, ' + x.passed + ' passed'));
      if (x.rejected.length){
        box.appendChild(el('div', {}, 'Rejected hosts (' +
          x.rejected_total + ', first ' + x.rejected.length + '):'));
        box.appendChild(table(x.rejected.map(function(h){
          return [h.host, h.filter, h.reason]; }),
          ['host', 'filter', 'reason']));
      }
      if (x.ranking.length){
        var ws = Object.keys(x.ranking[0].weighers).sort();
        box.appendChild(el('div', {}, 'Ranking (best first), ' +
                                      'contribution per weigher:'));
        box.appendChild(table(x.ranking.map(function(h){
          return [h.host, h.weight.toFixed(4)].concat(ws.map(function(w){
            var s = h.weighers[w]; return s ? s[3].toFixed(4)
              + ' (raw ' + s[0] + ', x' + s[2] + ')' : ''; })); }),
          ['host', 'weight'].concat(ws)));
      }
    } else {
      box.appendChild(el('div', {}, x && x.error ? x.error :
        '(not explained: see --explain; the filter walk above is '
        + 'the counts)'));
    }
    cols.appendChild(box);
  });
  d.appendChild(cols);
  d.scrollIntoView();
}
var wanted = /^#request=(\d+)$/.exec(window.location.hash);
if (wanted && D.requests[+wanted[1]]) showDetail(D.requests[+wanted[1]]);
window.replayReportReady = true;
document.body.setAttribute('data-ready', 'yes');
})();
"""


def _cell(value) -> str:
    if isinstance(value, dict):
        return ', '.join('%s %s' % kv for kv in value.items()) or '-'
    if isinstance(value, float):
        return '%.3f' % value
    return str(value)


def _summary_table(configs: list) -> str:
    out = ['<table id="summary"><tr><th></th>']
    out += ['<th>%s</th>' % html.escape(c['name']) for c in configs]
    out.append('</tr>')
    for label, get in compare.figures(configs):
        out.append('<tr><th>%s</th>' % html.escape(label))
        out += ['<td>%s</td>' % html.escape(_cell(get(c))) for c in configs]
        out.append('</tr>')
    out.append('</table>')
    return ''.join(out)


def render(document: dict) -> str:
    """The report of ``scheduler.replay.compare.compare``'s document."""
    names = [c['name'] for c in document['configs']]
    data = json.dumps(document, separators=(',', ':'), default=str)
    # Inside <script>, "</" would end the element early.
    data = data.replace('</', '<\\/')
    head_cells = ''.join('<th>%s</th>' % html.escape(n) for n in names)
    fleet = document.get('fleet', {})
    trace = document.get('trace', {})
    return ''.join([
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        '<title>Scheduler replay: %s</title>' % html.escape(
            ' vs '.join(names)),
        '<style>%s</style></head><body>' % _STYLE,
        '<h1>Scheduler replay: %s</h1>' % html.escape(' vs '.join(names)),
        '<p>Fleet %s: %s nodes, %s aggregates, %s instances at the start. '
        'Trace: %s requests, %s releases.</p>' % tuple(
            html.escape(str(v)) for v in (
                fleet.get('source'), fleet.get('nodes'),
                fleet.get('aggregates'), fleet.get('instances'),
                trace.get('requests'), trace.get('releases'))),
        '<h2>Side by side</h2>', _summary_table(document['configs']),
        '<h2>Over the trace</h2><div class="plots" id="plots"></div>',
        '<h2>Requests</h2><p>Click a request for its filter walk and, '
        'when explained, the per-host results and weights. Show: '
        '<select id="filter"><option value="all">all</option>'
        '<option value="refused">refused by any</option>'
        '<option value="differ">placed differently</option>'
        '<option value="explained">explained</option></select> '
        '<span id="shown"></span> <button id="more">more</button> '
        'Go to request #<input id="goto" type="number" min="0" '
        'max="%d" style="width:6em"></p>' % max(
            0, len(document.get('requests', [])) - 1),
        '<div id="detail"></div>',
        '<table id="requests"><thead><tr><th>#</th><th>flavor</th>'
        '<th>n</th><th>zone</th>%s</tr></thead><tbody></tbody></table>'
        % head_cells,
        '<script type="application/json" id="replay-data">%s</script>'
        % data,
        '<script>%s</script>' % _SCRIPT,
        '</body></html>',
    ])
