"""Figures as headless Chromium lays them out, with this machine's fonts (DejaVu Sans for gnuplot's "Helvetica", wider
than Helvetica itself): no text outside its figure, no two texts over each other, no key entry (sample and title) over
another. Used by the smoke tests on report.html and on the figures of commands the report does not run."""
import html
import json
import pathlib
import re
import shutil
import subprocess
import tempfile


def chromium(*arguments):
    """Runs headless Chromium. scripts/install-deps.sh installs it: its absence is a failure, not a skip."""
    if shutil.which("chromium") is None:
        raise AssertionError("Debian's chromium package is not installed")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tempfile.mkdtemp(prefix='rankscope-chromium-')}", "--window-size=1280,2400",
             "--enable-logging=stderr", "--v=0"]
    return subprocess.run(["chromium", *flags, *arguments], capture_output=True, text=True, timeout=120)


# Appended to a page of inlined SVG figures: for each, the boxes (in the figure's own viewBox units) of every text and
# of every key entry (gnuplot's group of sample and title, the groups whose <title> is the entry's title), with the box
# of the entry's marker if it has one.
LAYOUT_SCRIPT = """<script>
(() => {
  const figures = [];
  document.querySelectorAll('svg').forEach(svg => {
    const view = svg.viewBox.baseVal, frame = svg.getBoundingClientRect(), scale = view.width / frame.width;
    const boxOf = (element, text) => {
      const r = element.getBoundingClientRect();
      return {text, x0: (r.left - frame.left) * scale, y0: (r.top - frame.top) * scale,
              x1: (r.right - frame.left) * scale, y1: (r.bottom - frame.top) * scale};
    };
    const texts = [...svg.querySelectorAll('text')].filter(t => t.getBoundingClientRect().width > 0)
                                                   .map(t => boxOf(t, t.textContent));
    const entries = [];
    svg.querySelectorAll('g[id*="gnuplot_plot_"]').forEach(group => {
      const title = group.querySelector(':scope > title');
      if (!title || title.textContent.startsWith('gnuplot_plot_')) return;
      const entry = boxOf(group, title.textContent), marker = group.querySelector('use');
      if (marker) entry.marker = boxOf(marker, '');
      entries.push(entry);
    });
    figures.push({title: texts.length ? texts[0].text : '', width: view.width, height: view.height, texts, entries});
  });
  const pre = document.createElement('pre');
  pre.id = 'figure-layout';
  pre.textContent = JSON.stringify(figures);
  document.body.appendChild(pre);
})();
</script>"""


def svg_page(svg_paths):
    """An HTML page with each SVG file inlined (gnuplot's point definitions, repeated under one id, are identical)."""
    parts = []
    for path in svg_paths:
        text = pathlib.Path(path).read_text()
        parts.append('<div style="width:900px">' + text[text.index("<svg"):] + "</div>")
    return "<html><body>" + "".join(parts) + "</body></html>"


def figure_layout(page_html):
    """The figures of an HTML page as Chromium lays them out: [{title, width, height, texts, entries}]."""
    page = pathlib.Path(tempfile.mkdtemp(prefix="rankscope-layout-"), "page.html")
    page.write_text(page_html.replace("</body>", LAYOUT_SCRIPT + "</body>"))
    dom = chromium("--dump-dom", page.as_uri())
    found = re.search(r'<pre id="figure-layout">(.*?)</pre>', dom.stdout, re.S)
    if found is None:
        raise AssertionError("Chromium laid out no figure: " + dom.stderr[-2000:])
    return json.loads(html.unescape(found.group(1)))


def overlap(a, b, axis):
    return min(a[axis + "1"], b[axis + "1"]) - max(a[axis + "0"], b[axis + "0"])


def layout_problems(figures):
    """What is wrong with the figures' layout, one line each; [] when nothing is."""
    problems = []
    for figure in figures:
        for box in figure["texts"]:
            if box["x0"] < -0.5 or box["y0"] < -0.5 or box["x1"] > figure["width"] + 0.5 or \
                    box["y1"] > figure["height"] + 0.5:
                problems.append(f"{figure['title']}: {box['text']!r} outside the figure")
        for kind in ("texts", "entries"):
            boxes = figure[kind]
            for i, a in enumerate(boxes):
                for b in boxes[i + 1:]:
                    if a == b:
                        continue  # gnuplot draws a boxed label's text twice, in one place
                    # A text's box is its line box, which pads DejaVu Sans's glyphs by 2.7 units above the ascenders
                    # and 0.45 below the descenders at the 16-unit font: boxes that meet by less than 3 units leave the
                    # glyphs apart.
                    if overlap(a, b, "x") > 0.5 and overlap(a, b, "y") > 3:
                        problems.append(f"{figure['title']}: {a['text']!r} over {b['text']!r}")
    return problems
