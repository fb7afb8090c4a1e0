"""Line charts as plain SVG text, for the benchmark's figures.

Plain SVG written by hand so that regenerating the figures needs no
plotting library in the project's (or a reader's) environment.  Pure:
numbers in, text out; nothing here measures anything.
"""

import dataclasses
import math
from xml.sax import saxutils

WIDTH, HEIGHT = 820, 480
LEFT, RIGHT, BOTTOM = 70, 250, 60
COLOURS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#8c564b',
           '#ff7f0e', '#7f7f7f']


@dataclasses.dataclass
class Series:
    """One curve: ``ys[i]`` at ``xs[i]``; a None y is a gap (not
    measured there).  ``dashed`` draws a lighter dashed line, for a
    secondary figure (a p95 beside its median)."""
    name: str
    xs: list
    ys: list
    colour: str | None = None
    dashed: bool = False


def _nice_step(span: float) -> float:
    """A step of 1, 2 or 5 times a power of ten giving 4 to 10 ticks."""
    raw = span / 5 if span > 0 else 1.0
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if raw <= factor * power:
            return factor * power
    return 10 * power


class _Axis:
    """Maps values to pixels along one axis, linear or log10."""

    def __init__(self, values: list, log: bool, start: float,
                 length: float, zero: bool):
        self.log = log
        self.start, self.length = start, length
        if log:
            values = [v for v in values if v > 0]
            low, high = min(values), max(values)
            self.low = 10 ** math.floor(math.log10(low))
            self.high = 10 ** math.ceil(math.log10(high))
            if self.high == self.low:
                self.high *= 10
        else:
            low, high = min(values), max(values)
            self.low = 0.0 if zero else low
            step = _nice_step(high - self.low)
            self.high = math.ceil(high / step) * step
            if self.high <= self.low:
                self.high = self.low + step
            self.step = step

    def fraction(self, v: float) -> float:
        if self.log:
            v = max(v, self.low)
            return (math.log10(v) - math.log10(self.low)) / (
                math.log10(self.high) - math.log10(self.low))
        return (v - self.low) / (self.high - self.low)

    def ticks(self) -> list:
        if self.log:
            found, decade = [], self.low
            while decade <= self.high * 1.0001:
                found += [decade * m for m in (1, 2, 5)
                          if decade * m <= self.high * 1.0001]
                decade *= 10
            return found
        count = int(round((self.high - self.low) / self.step))
        return [self.low + i * self.step for i in range(count + 1)]


def _fmt(v: float) -> str:
    if v >= 1000 and float(v).is_integer():
        return '{:,}'.format(int(v))
    return '%g' % v


def _esc(text: str) -> str:
    return saxutils.escape(text)


def line_chart(series: list, title: str, notes: list, x_label: str,
               y_label: str, log_x: bool = True,
               log_y: bool = True) -> str:
    """An SVG document: ``series`` (``Series``) against a shared x axis
    whose ticks are the x values measured, a legend on the right,
    ``title`` and the ``notes`` lines (date, load, source) on top."""
    points = [(x, y) for s in series for x, y in zip(s.xs, s.ys)
              if y is not None and (y > 0 or not log_y)]
    if not points:
        raise ValueError('nothing to draw')
    # The plot starts below the title and the notes.
    top = 48 + 13 * len(notes)
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - top - BOTTOM
    xaxis = _Axis([x for x, _y in points], log_x, LEFT, plot_w, False)
    if log_x:
        # The x values measured, not whole decades: the plot starts at
        # the first size and ends at the last.
        xaxis.low = min(x for x, _y in points)
        xaxis.high = max(x for x, _y in points)
        if xaxis.high == xaxis.low:
            xaxis.high = xaxis.low * 10
    yaxis = _Axis([y for _x, y in points], log_y, top, plot_h, True)

    def px(x: float) -> float:
        return LEFT + plot_w * xaxis.fraction(x)

    def py(y: float) -> float:
        return top + plot_h * (1 - yaxis.fraction(y))

    bottom, right = top + plot_h, LEFT + plot_w
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif" font-size="12">' % (WIDTH, HEIGHT),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="22" font-size="15">%s</text>'
           % (LEFT, _esc(title))]
    for n, note in enumerate(notes):
        out.append('<text x="%d" y="%d" font-size="11" fill="#444">%s'
                   '</text>' % (LEFT, 40 + 13 * n, _esc(note)))
    for tick in yaxis.ticks():
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" '
                   'stroke="#e4e4e4"/>' % (LEFT, py(tick), right, py(tick)))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>'
                   % (LEFT - 6, py(tick) + 4, _fmt(tick)))
    for tick in sorted({x for x, _y in points}):
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" '
                   'stroke="#e4e4e4"/>' % (px(tick), top, px(tick), bottom))
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>'
                   % (px(tick), bottom + 18, _fmt(tick)))
    out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>'
               % (LEFT, bottom, right, bottom))
    out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>'
               % (LEFT, top, LEFT, bottom))
    out.append('<text x="%d" y="%d" text-anchor="middle">%s</text>'
               % (LEFT + plot_w // 2, HEIGHT - 18,
                  _esc(x_label + (' (log)' if log_x else ''))))
    middle = top + plot_h // 2
    out.append('<text x="18" y="%d" transform="rotate(-90 18 %d)" '
               'text-anchor="middle">%s</text>'
               % (middle, middle, _esc(y_label + (' (log)' if log_y
                                                  else ''))))
    for n, s in enumerate(series):
        colour = s.colour or COLOURS[n % len(COLOURS)]
        style = ('stroke-width="1.5" stroke-dasharray="5,4" '
                 'stroke-opacity="0.6"' if s.dashed else 'stroke-width="2"')
        kept = [(x, y) for x, y in zip(s.xs, s.ys)
                if y is not None and (y > 0 or not log_y)]
        if kept:
            out.append('<polyline points="%s" fill="none" stroke="%s" %s/>'
                       % (' '.join('%.1f,%.1f' % (px(x), py(y))
                                   for x, y in kept), colour, style))
        for x, y in kept:
            out.append('<circle cx="%.1f" cy="%.1f" r="%d" fill="%s"/>'
                       % (px(x), py(y), 2 if s.dashed else 3, colour))
        legend_y = top + 8 + 18 * n
        if s.xs:
            # (A series of no points continues the legend line above.)
            out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" '
                       '%s/>' % (right + 12, legend_y - 4, right + 32,
                                 legend_y - 4, colour, style))
        out.append('<text x="%d" y="%d" fill="%s" font-size="11">%s</text>'
                   % (right + 36, legend_y, colour, _esc(s.name)))
    out.append('</svg>')
    return '\n'.join(out) + '\n'


def markdown_table(header: list, rows: list) -> str:
    """A Markdown table; the first column left-aligned, the others
    right-aligned (numbers); a None cell is left empty."""
    lines = ['| ' + ' | '.join(header) + ' |',
             '| --- |' + ' ---: |' * (len(header) - 1)]
    for row in rows:
        lines.append('| ' + ' | '.join('' if c is None else str(c)
                                       for c in row) + ' |')
    return '\n'.join(lines) + '\n'
