# SPDX-License-Identifier: MIT
"""The page of `gpumon report --html` (cli/report_html.c) rendered in headless Chromium.

Each input make_fixtures.py writes (a recording with known rows, a CSV) is turned into a page by
`gpumon report --html`, loaded by Chromium with networking off, and its DOM after the scripts ran
is read back: the summary's figures, the number of charts drawn, no script error (the page
lists each in #gpumon-errors, and Chromium's console log must stay empty), and the hostile
strings shown as text, never run. A screenshot of each page is saved for a person to look at.

Environment (set by ctest):
  GPUMON_BIN        the built gpumon
  TEST_RECORDING_BIN  the test program that writes a recording of the library (tests/unit/test_recording)
  REPORT_HTML_OUT   where the pages and screenshots go (default: pytest's temporary folder)
"""
import html.parser
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_fixtures  # noqa: E402

GPUMON_BIN = os.environ.get("GPUMON_BIN", os.path.join(HERE, "../../build/cli/gpumon"))
EXAMPLES = os.path.join(HERE, "../../examples")
HOSTILE = make_fixtures.HOSTILE


# ---- Chromium ---------------------------------------------------------------------------------

def chromium_binary():
    """The headless Chromium of Debian's chromium-headless-shell (or chromium); fails, never skips."""
    for name in ("chromium-headless-shell", "chromium"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("headless Chromium is not installed: install the Debian package chromium-headless-shell "
                "(`make deps-test` does)")


def run_chromium(url, profile, extra):
    args = [chromium_binary(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
            "--user-data-dir=" + str(profile),
            # networking off: no name resolves and every connection goes to a closed local port
            "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
            "--proxy-bypass-list=<-loopback>",
            "--enable-logging=stderr", "--v=0", "--virtual-time-budget=20000",
            "--window-size=1280,2400"] + extra + [url]
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=180, env=dict(os.environ, LC_ALL="C"))
    except subprocess.TimeoutExpired:
        pytest.fail("headless Chromium did not finish within 180 s: " + " ".join(args))
    if r.returncode != 0:
        pytest.fail("headless Chromium could not start or render (exit %d): %s\n%s"
                    % (r.returncode, " ".join(args), r.stderr[-3000:]))
    return r


def console_messages(stderr):
    """What the page wrote to the console (Chromium logs each as INFO:CONSOLE... "text", source: ...)."""
    return re.findall(r':CONSOLE[^\]]*\] (.*)', stderr)


# ---- the DOM ----------------------------------------------------------------------------------

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Node:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent, self.children = tag, dict(attrs), parent, []

    def text(self):
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def walk(self):
        yield self
        for c in self.children:
            if isinstance(c, Node):
                yield from c.walk()


class DomParser(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {}, None)
        self.cur = self.root

    def handle_starttag(self, tag, attrs):
        n = Node(tag, attrs, self.cur)
        self.cur.children.append(n)
        if tag not in VOID:
            self.cur = n

    def handle_endtag(self, tag):
        n = self.cur
        while n is not self.root and n.tag != tag:
            n = n.parent
        if n is not self.root:
            self.cur = n.parent

    def handle_data(self, data):
        self.cur.children.append(data)


class Page:
    """A rendered page: its DOM after the scripts ran, and what Chromium logged."""

    def __init__(self, dom_text, stderr, html_path, png_path):
        p = DomParser()
        p.feed(dom_text)
        self.root, self.dom_text, self.stderr = p.root, dom_text, stderr
        self.html_path, self.png_path = html_path, png_path
        self.nodes = list(self.root.walk())

    def by_id(self, ident):
        for n in self.nodes:
            if n.attrs.get("id") == ident:
                return n
        return None

    def text_of(self, ident):
        n = self.by_id(ident)
        assert n is not None, "no element #%s in the page" % ident
        return " ".join(n.text().split())

    def tags(self, tag):
        return [n for n in self.nodes if n.tag == tag]

    def html_attr(self, name):
        return self.tags("html")[0].attrs.get(name)


def make_page(input_path, out_dir, name, cwd=None):
    """`gpumon report INPUT --html` into out_dir/name.html."""
    html_path = os.path.abspath(os.path.join(out_dir, name + ".html"))
    r = subprocess.run([GPUMON_BIN, "report", input_path, "--html", html_path], capture_output=True, text=True,
                       cwd=cwd, env=dict(os.environ, LC_ALL="C"))
    assert r.returncode == 0, r.stderr
    return html_path


def render(input_path, name, tmp_path, cwd=None):
    """Writes the page of input_path, renders it (DOM and screenshot) and returns a Page."""
    out_dir = os.environ.get("REPORT_HTML_OUT") or str(tmp_path)
    os.makedirs(out_dir, exist_ok=True)
    html_path = make_page(input_path, out_dir, name, cwd)
    png_path = os.path.join(out_dir, name + ".png")
    if os.path.exists(png_path):
        os.unlink(png_path)
    r = run_chromium("file://" + os.path.abspath(html_path), tmp_path / "profile",
                     ["--dump-dom", "--screenshot=" + png_path, "--hide-scrollbars"])
    assert os.path.exists(png_path) and os.path.getsize(png_path) > 1000, \
        "no screenshot was written: " + r.stderr[-2000:]
    print("screenshot of %s: %s" % (name, png_path))
    page = Page(r.stdout, r.stderr, html_path, png_path)
    check_healthy(page)
    return page


def check_healthy(page):
    """Loaded, no script error or console message, and as many chart canvases as charts drawn."""
    errors = page.by_id("gpumon-errors")
    assert errors is not None, "the page has no error box (did it load at all?)"
    assert "data-count" not in errors.attrs and "hidden" in errors.attrs, \
        "the page reported errors: " + errors.text()
    assert console_messages(page.stderr) == [], "console messages: %s" % console_messages(page.stderr)
    assert page.html_attr("data-gpumon-state") == "ready", \
        "the timelines' script did not finish (state %r)" % page.html_attr("data-gpumon-state")
    assert len(page.tags("canvas")) == int(page.html_attr("data-gpumon-charts"))
    # self-contained: nothing in the page names another file or address to load
    assert [n.tag for n in page.nodes if n.attrs.get("src") or n.attrs.get("href")] == []


def legend_entries(page, label):
    """The classes of the legend entries named label (uPlot marks a hidden line "u-off")."""
    return [n.attrs.get("class", "") for n in page.nodes
            if n.tag == "tr" and "u-series" in n.attrs.get("class", "")
            and any(c.attrs.get("class") == "u-label" and c.text() == label for c in n.walk())]


def embedded(page):
    """The document the page embeds for its charts."""
    raw = open(page.html_path, encoding="utf-8").read()
    start = raw.index('<script type="application/json" id="gpumon-data">')
    return json.loads(raw[raw.index(">", start) + 1:raw.index("</script>", start)])


# ---- the inputs ---------------------------------------------------------------------------------

def test_leak_run(tmp_path):
    """make_fixtures.leak_run: a job on 2 GPUs whose allocator leaks 4 MiB a step from step 120."""
    make_fixtures.leak_run(str(tmp_path))
    page = render("train-2026-12-02.gpumon", "leak_run", tmp_path, cwd=str(tmp_path))
    # 2 GPUs, the processes of GPU 0 stacked (GPU 1 lists none), 1 framework source
    assert page.html_attr("data-gpumon-charts") == "4"
    leak = page.by_id("leak")
    assert leak.attrs["data-verdict"] == "leak"
    # the verdict in the words every front end uses (the library's)
    assert page.text_of("leak") == (
        "LEAK on the framework's allocated memory (torch, pid 1234): +3.98 MiB a step from step 123 "
        "(confidence 1.00, sustained); out of memory in about 29008 more steps (16 h 21 min) at this rate, "
        "against the GPU's free memory (113 GiB left)")
    # every series judged, one line each
    assert [n.attrs["data-verdict"] for n in page.by_id("series").walk() if n.tag == "li"] == \
        ["leak", "other", "other", "other"]
    assert "none: pid 1240 on GPU 0 (NVML) does not keep rising" in page.text_of("series")
    t = page.text_of("peak")
    for part in ("27.0 GiB at 0:24.4", "(the job's processes on GPU 0)", "the rise of pid 1234 (alice)",
                 "python train.py --batch-size 64"):
        assert part in t, (part, t)
    assert page.text_of("fragmentation") == "5.00 GiB reserved by the allocator but not allocated, at 6:15.6 (pid 1234)"
    assert page.text_of("unaccounted") == "600 MiB held outside the allocator (NVML - reserved), at 0:00.0 (pid 1234)"
    assert page.text_of("source-duration") == "13 min 32 s"
    devices = page.text_of("devices")
    assert "GPU 1 NVIDIA H200, 140 GiB" in devices
    assert ("the job at most 27.0 GiB at 0:24.4, 26.1 GiB on average; the other processes 0 B at the job's "
            "peak, at most 24.6 GiB") in devices
    assert page.by_id("oom") is None and page.by_id("damage") is None
    # no distributed job: no Ranks section, no rank chart
    assert page.by_id("ranks") is None and page.by_id("rank-chart") is None
    # the model's alert once, given live (the "alert" event at its moment is not listed again)
    alerts = page.text_of("alerts")
    assert alerts.startswith("Alerts (1) 10:33.4 leak the framework's allocated memory (torch, pid 1234) rises by "
                             "3.99 MiB a step from step 123"), alerts
    assert alerts.endswith("(given live)")
    assert "13:32.4 exit exit status 0" in page.text_of("events")
    # the legends name the job's processes apart from the others
    legend = " ".join(n.text() for n in page.nodes if "u-legend" in n.attrs.get("class", ""))
    assert "job pid 1234 alice python train.py --batch-size 64" in legend
    assert "other pid 5555 bob python eval.py" in legend
    assert "used, exact peak" in legend and "max allocated" in legend
    # far below the total: its line starts hidden so that it does not flatten the used line
    assert ["u-off" in c for c in legend_entries(page, "total")] == [True, True]


def test_real_h200_recording(tmp_path):
    """The bundled recording of a real H200 (examples/recordings/h200_train_leak.gpumon)."""
    page = render(os.path.join(EXAMPLES, "recordings/h200_train_leak.gpumon"), "h200_record", tmp_path)
    assert page.html_attr("data-gpumon-charts") == "2"
    assert page.by_id("leak").attrs["data-verdict"] == "leak"
    t = page.text_of("leak")
    assert re.match(r"LEAK on pid 678 on GPU 0 \(NVML\): \+17\d MiB a second from 8\.\d s", t), t
    assert re.search(r"out of memory in about 1[23] min \d\d s at this rate, against the GPU's free memory", t), t
    t = page.text_of("peak")
    assert t.startswith("7.99 GiB at 0:47.2 (GPU 0's used memory), the rise of pid 678 (root)"), t
    assert page.text_of("source-duration") == "53 s"
    assert page.text_of("fragmentation") == "n/a"
    # a real recording of a job that is no distributed one: ranks [], and no Ranks section
    assert embedded(page)["ranks"] == []
    assert page.by_id("ranks") is None


def test_oom(tmp_path):
    """make_fixtures.oom: the job ran out of memory next to a colleague's job that grew into its GPU."""
    page = render(make_fixtures.oom(str(tmp_path)), "oom", tmp_path)
    assert page.html_attr("data-gpumon-charts") == "2"
    assert page.by_id("leak").attrs["data-verdict"] == "none"
    assert "139 GiB at 0:59.5, the rise of pid 9999 (bob)" in page.text_of("devices")
    assert page.text_of("oom-cause") == "co-tenant"
    assert "Out of memory at 0:59.9 on GPU 0" in page.text_of("oom")
    assert page.text_of("oom-message") == "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert page.text_of("oom-diagnosis").startswith(
        "Another process held the memory: other processes had 79.0 GiB of the 140 GiB card when the job ran out, "
        "the largest pid 9999 (79.0 GiB, user bob: python big_eval.py); the job itself held 60.0 GiB")
    assert page.text_of("oom-said") == "The framework said: torch: tried to allocate 2.00 GiB"
    assert page.text_of("alerts") == "Alerts (1) 0:59.9 oom torch.OutOfMemoryError: CUDA out of memory. " \
                                     "Tried to allocate 2.00 GiB"
    rows = [" ".join(" ".join(c.text() for c in r.children if isinstance(c, Node)).split())
            for r in page.by_id("oom-holders").walk() if r.tag == "tr"]
    assert rows[1:] == ["9999 bob 79.0 GiB python big_eval.py", "4321 alice 60.0 GiB job python train.py"]
    assert "0:59.9 oom torch.OutOfMemoryError" in page.text_of("events")
    # near the total: its line shows
    assert ["u-off" in c for c in legend_entries(page, "total")] == [False]


def test_csv_minimal(tmp_path):
    make_fixtures.csv_minimal(str(tmp_path))
    page = render("alloc.csv", "csv_minimal", tmp_path, cwd=str(tmp_path))
    assert page.html_attr("data-gpumon-charts") == "1"
    assert page.by_id("leak").attrs["data-verdict"] == "insufficient_data"
    assert "not enough data to tell" in page.text_of("leak")
    # a CSV names no process: "the process", never its stand-in pid
    assert page.text_of("peak") == "3.48 GiB at 0:49.0 (the framework's highest allocated), the rise of the process"
    assert "pid" not in page.text_of("windows")
    # nor does the copy the charts read name it: its stand-in pid is null there
    assert [f["pid"] for f in embedded(page)["timeline"]["framework"]] == [None]
    assert "pid" not in page.text_of("summary")
    assert page.text_of("source-path") == "alloc.csv (CSV)"
    assert page.text_of("source-command") == "n/a"
    assert page.text_of("devices") == "n/a"
    legend = " ".join(n.text() for n in page.nodes if "u-legend" in n.attrs.get("class", ""))
    assert "allocated" in legend


def test_hostile_strings_stay_text(tmp_path):
    """make_fixtures.hostile: markup in the file's name, the command, users, the host, the rank's
    job id, events and the out-of-memory message."""
    name, path = make_fixtures.hostile(str(tmp_path))
    page = render(name, "hostile", tmp_path, cwd=str(tmp_path))
    cmd = "python train.py --name '" + HOSTILE + "' \"quoted\" & more \u2028 \u8bad\u7ec3 \u00fc"
    # shown as text, byte for byte (quotes, &, U+2028 and CJK included)
    assert page.text_of("source-command") == " ".join(cmd.split())
    assert HOSTILE in page.text_of("oom-diagnosis") and page.text_of("oom-message") == HOSTILE
    assert "<script>alert(2)</script>" in page.text_of("alerts")
    assert "exit<b> " + HOSTILE in page.text_of("events")
    assert "<i>host</i>" in page.text_of("source")
    assert page.tags("title")[0].text() == "gpumon report: " + name
    # and never run or parsed as markup: no image, no handler, only the page's own 4 scripts
    assert page.tags("img") == []
    assert [n for n in page.nodes if any(a.startswith("on") for a in n.attrs)] == []
    assert len(page.tags("script")) == 4
    # the GPU, its processes, the framework source named in markup, the rank chart of its one rank
    assert page.html_attr("data-gpumon-charts") == "4"
    # the job's id is text too
    assert page.text_of("ranks").startswith("Ranks (torchrun job " + HOSTILE + ", world size 2)")
    assert [c[:3] for _, c in table_rows(page, "rank-table")] == [["0", "0", "31337"]]
    legend = " ".join(n.text() for n in page.nodes if "u-legend" in n.attrs.get("class", ""))
    assert "job pid 31337 eve<b>\"' " + " ".join(cmd.split()) in " ".join(legend.split())
    # the embedded copy of the document: nothing in it can end its <script>, and it reads back whole
    raw = open(page.html_path, encoding="utf-8").read()
    assert HOSTILE not in raw
    start = raw.index('<script type="application/json" id="gpumon-data">')
    text = raw[raw.index(">", start) + 1:raw.index("</script>", start)]
    for c in "<>&\u2028\u2029":
        assert c not in text, "%r left unescaped in the embedded document" % c
    doc = json.loads(subprocess.run([GPUMON_BIN, "report", name, "--json"], capture_output=True, text=True,
                                    cwd=str(tmp_path), check=True).stdout)
    assert {k: v for k, v in json.loads(text).items() if k != "timeline"} == doc


def test_nulls_everywhere(tmp_path):
    """A CSV whose fields are mostly empty: what it does not say is n/a, never 0."""
    page = render(make_fixtures.nulls(str(tmp_path)), "nulls", tmp_path)
    # the one device series with samples; the empty ones draw nothing
    assert page.html_attr("data-gpumon-charts") == "1"
    assert page.by_id("leak").attrs["data-verdict"] == "n/a"
    summary = page.text_of("summary")
    assert "0 B" not in summary and "0:00.0" not in summary, summary
    for ident in ("leak", "fragmentation", "unaccounted", "source-command"):
        assert "n/a" in page.text_of(ident), ident
    assert page.text_of("devices").startswith("GPU 0 n/a, n/aused at most 7.00 GiB at 0:03.0")
    assert "n/a" in page.text_of("windows")
    assert page.by_id("oom") is None



def test_64_processes_of_4000_points(tmp_path):
    """The largest timeline the document carries: 64 process series of 4,000 points on one GPU."""
    page = render(make_fixtures.many_processes(str(tmp_path)), "big_64x4000", tmp_path)
    assert page.html_attr("data-gpumon-charts") == "2"
    legend = " ".join(n.text() for n in page.nodes if "u-legend" in n.attrs.get("class", ""))
    assert legend.count("job pid 10") == 8 and legend.count("other pid 10") == 56


# ---- a distributed job's ranks --------------------------------------------------------------------

def table_rows(page, ident):
    """The rows of table #ident below its heading: each {attrs, cells (text, blanks joined)}."""
    rows = []
    for r in page.by_id(ident).walk():
        if r.tag == "tr" and any(c.tag == "td" for c in r.children if isinstance(c, Node)):
            rows.append((r.attrs, [" ".join(c.text().split()) for c in r.children
                                   if isinstance(c, Node) and c.tag == "td"]))
    return rows


def legend_labels(page, box_id):
    box = page.by_id(box_id)
    assert box is not None, "no element #%s in the page" % box_id
    return [n.text() for n in box.walk() if n.attrs.get("class") == "u-label"][1:]  # past the x axis


def test_ranks(tmp_path):
    """make_fixtures.ranks: 8 ranks of one torchrun job; rank 3 leaks, rank 5 ran out of memory,
    rank 6 has no figure (n/a, never 0). Two nodes' recordings read together:
    test_gpumon_report_html_of_two_nodes."""
    page = render(make_fixtures.ranks(str(tmp_path)), "ranks", tmp_path)
    # the rank chart, 8 GPUs' charts and their process charts
    assert page.html_attr("data-gpumon-charts") == "17"
    assert page.text_of("ranks").startswith("Ranks (torchrun job job7, world size 8) 8 workers seen")
    rows = table_rows(page, "rank-table")
    assert [a["data-rank"] for a, _ in rows] == [str(r) for r in range(8)]
    cells = {int(a["data-rank"]): c for a, c in rows}
    # rank, GPU, pid, peak, mean, latest, verdict, out of memory
    assert cells[0][:3] == ["0", "0", "1000"] and cells[0][6:] == ["no leak", ""], cells[0]
    assert cells[3][:3] == ["3", "3", "1003"] and cells[3][6:] == ["LEAK +2.00 MiB/s", ""], cells[3]
    assert cells[5][:3] == ["5", "5", "1005"] and cells[5][7] == "ran out of memory", cells[5]
    assert cells[6][3:] == ["n/a", "n/a", "n/a", "n/a", ""], cells[6]
    assert [a.get("data-oom") for a, _ in rows].count("true") == 1 and rows[5][0]["data-oom"] == "true"
    assert rows[3][0]["data-verdict"] == "leak" and rows[6][0]["data-verdict"] == "n/a"
    # byte figures as the page writes them everywhere, with their value for scripts
    peak3 = [r for r in embedded(page)["ranks"] if r["rank"] == 3][0]["peak_bytes"]
    assert cells[3][3:6] == ["8.77 GiB", "8.48 GiB", "8.77 GiB"] and \
        any(n.attrs.get("data-bytes") == str(peak3) for n in page.by_id("rank-table").walk())
    assert page.text_of("rank-skew") == (
        "Skew over 7 ranks: peaks 8.00 GiB (rank 0) to 66.5 GiB (rank 5), 58.5 GiB apart; "
        "means 8.00 GiB (rank 0) to 37.2 GiB (rank 5), 29.2 GiB apart.")
    # one host: no host column, no hosts list
    assert [" ".join(n.text().split()) for n in page.by_id("rank-table").walk() if n.tag == "th"][:3] == \
        ["rank", "GPU", "pid"]
    assert page.by_id("hosts") is None
    # one line per rank with a timeline, the leaking and the one that ran out named so
    assert legend_labels(page, "rank-chart-box") == [
        "rank 0", "rank 1", "rank 2", "rank 3 (leak)", "rank 4", "rank 5 (leak, ran out)", "rank 6", "rank 7"]
    assert page.by_id("rank-chart-box").attrs["data-ranks-drawn"] == "8"
    # on the page's one time axis
    ranges = {(n.attrs["data-x-min"], n.attrs["data-x-max"]) for n in page.nodes
              if "uplot" in n.attrs.get("class", "").split()}
    assert len(ranges) == 1, ranges


def test_many_ranks_stay_readable(tmp_path):
    """40 ranks: all drawn thin, the leak, the one that ran out and the lowest and highest peak
    highlighted and named; the chart says how many it draws."""
    path = make_fixtures.ranks(str(tmp_path), n=40, leak_rank=9, oom_rank=17, silent_rank=None,
                                oom_growth=0)
    page = render(str(path), "many_ranks", tmp_path)
    box = page.by_id("rank-chart-box")
    assert (box.attrs["data-ranks-drawn"], box.attrs["data-ranks-highlighted"]) == ("40", "4")
    assert "all 40 ranks with a timeline drawn thin, 4 highlighted" in page.text_of("rank-chart-box")
    labels = legend_labels(page, "rank-chart-box")
    assert len(labels) == 40 and labels[-4:] == ["rank 0 (lowest peak)", "rank 9 (leak)", "rank 17 (ran out)",
                                                 "rank 39 (highest peak)"], labels
    # one host: no host column
    assert [" ".join(n.text().split()) for n in page.by_id("rank-table").walk() if n.tag == "th"][:3] == \
        ["rank", "GPU", "pid"]
    assert page.by_id("hosts") is None

# ---- the writer's errors ------------------------------------------------------------------------

def test_write_error_is_one_sentence(tmp_path):
    r = subprocess.run([GPUMON_BIN, "report", make_fixtures.csv_minimal(str(tmp_path)), "--html", "/dev/full"],
                       capture_output=True, text=True, env=dict(os.environ, LC_ALL="C"))
    assert r.returncode == 255
    assert r.stderr == "gpumon: report: could not write the HTML report: No space left on device\n"


# ---- interaction --------------------------------------------------------------------------------

# Run in the page after its own scripts: hovers, drag-zooms, wheel-zooms, double-clicks and switches
# the framework chart to steps, noting each chart's x range (data-x-min/max) and legend after each.
PROBE = r"""
(function () {
  var out = {};
  function charts() {
    return Array.prototype.map.call(document.querySelectorAll('.uplot'), function (r) {
      return [r.getAttribute('data-x-axis'), Number(r.getAttribute('data-x-min')), Number(r.getAttribute('data-x-max'))];
    });
  }
  function legend(i) {
    return Array.prototype.map.call(document.querySelectorAll('.uplot')[i].querySelectorAll('.u-legend .u-value'),
                                    function (v) { return v.textContent; });
  }
  function mouse(type, el, fx, extra) {
    var r = el.getBoundingClientRect(), o = {bubbles: true, cancelable: true, view: window, button: 0,
      clientX: r.left + r.width * fx, clientY: r.top + r.height / 2, movementX: 1};
    for (var k in extra || {}) o[k] = extra[k];
    el.dispatchEvent(type === 'wheel' ? new WheelEvent(type, o) : new MouseEvent(type, o));
  }
  function select(value) {
    var sel = document.querySelector('.chart select');
    sel.value = value;
    sel.dispatchEvent(new Event('change'));
  }
  function over(i) {
    return document.querySelectorAll('.u-over')[i || 0];
  }
  /* each step acts, then the next one (after uPlot's deferred redraw) notes what it did */
  var steps = [
    function () { out.initial = charts(); mouse('mousemove', over(), 0.5); },
    function () { out.hover = [legend(0), legend(2)]; mouse('mousemove', over(), document.querySelector('#peak time').getAttribute('data-t') / 812.4); },
    function () {
      out.mark = document.querySelector('.markinfo').textContent;
      mouse('mousedown', over(), 0.25); mouse('mousemove', over(), 0.5); mouse('mouseup', over(), 0.5);
    },
    function () { out.dragged = charts(); mouse('wheel', over(1), 0.5, {deltaY: -100}); },
    function () {
      out.wheeled = charts();
      mouse('mousedown', over(), 0.5, {shiftKey: true}); mouse('mousemove', over(), 0.25, {shiftKey: true});
      mouse('mouseup', over(), 0.25, {shiftKey: true});
    },
    function () { out.panned = charts(); select('step'); },
    function () { out.step = charts(); select('time'); },
    function () { out.back = charts(); mouse('dblclick', over(), 0.5); },
    function () {
      out.reset = charts();
      var pre = document.createElement('pre');
      pre.id = 'probe';
      pre.textContent = JSON.stringify(out);
      document.body.appendChild(pre);
    }
  ];
  (function next(i) {
    if (i < steps.length)
      setTimeout(function () { steps[i](); next(i + 1); }, 30);
  })(0);
})();
"""


def test_zoom_pan_hover_and_steps(tmp_path):
    html_path = make_page(make_fixtures.leak_run(str(tmp_path)), str(tmp_path), "leak_probe")
    raw = open(html_path, encoding="utf-8").read()
    nonce = re.search(r'<script nonce="([0-9a-f]+)">', raw).group(1)
    with open(html_path, "w", encoding="utf-8") as f:
        f.write(raw.replace("</body>", '<script nonce="%s">%s</script>\n</body>' % (nonce, PROBE)))
    r = run_chromium("file://" + html_path, tmp_path / "profile", ["--dump-dom"])
    page = Page(r.stdout, r.stderr, html_path, None)
    check_healthy(page)
    probe = json.loads(page.text_of("probe"))

    def near(a, b):
        return abs(a - b) <= 0.02 * 812.4

    assert probe["initial"] == [["time", 0, 812.4]] * 4
    # hovering the middle of the first chart: the time there (the GPU's sample at 406 s is missing:
    # its previous one shows) and figures with units, on the synced process chart too
    hover0, hover2 = probe["hover"]
    assert hover0[0] == "6:43.970" and hover2[0] == "6:46.000", probe["hover"]
    assert re.fullmatch(r"\d+\.\d GiB", hover0[1]) and hover0[3:] == ["--", "140 GiB"], hover0
    assert re.fullmatch(r"\d+(\.\d+)? GiB", hover2[-1]), hover2
    # the pointer on the peak's mark names it
    assert probe["mark"] == "0:24.4 peak: 27.0 GiB"
    # dragging over 25 % .. 50 % zooms every chart there
    for axis, lo, hi in probe["dragged"]:
        assert axis == "time" and near(lo, 0.25 * 812.4) and near(hi, 0.5 * 812.4), probe["dragged"]
    # the wheel zooms in around the cursor (the middle): 80 % of the range, all charts alike
    (_, lo0, hi0), (_, lo1, hi1) = probe["dragged"][0], probe["wheeled"][0]
    assert near(hi1 - lo1, 0.8 * (hi0 - lo0)) and near((lo1 + hi1) / 2, (lo0 + hi0) / 2)
    assert len({(lo, hi) for _, lo, hi in probe["wheeled"]}) == 1
    # shift-drag by a quarter of the width pans right by a quarter of the range
    (_, lo2, hi2) = probe["panned"][0]
    assert near(hi2 - lo2, hi1 - lo1) and near(lo2 - lo1, 0.25 * (hi1 - lo1)), probe["panned"]
    # the framework chart by step shows steps 0 .. 399; the others keep their time and zoom; back
    # on time it takes the others' zoom
    assert probe["step"][:3] == probe["panned"][:3]
    assert probe["step"][3] == ["step", 0, 399]
    assert probe["back"] == probe["panned"]
    # a double-click shows everything again
    assert probe["reset"] == [["time", 0, 812.4]] * 4


# ---- the page as `gpumon report --html` writes it ------------------------------------------------

@pytest.mark.parametrize("name,recording,charts", [
    ("cli_h200_record", "recordings/h200_train_leak.gpumon", "2"),
    ("cli_leak_graph", "traces/leak_graph.gpumon", "3"),
])
def test_gpumon_report_html(tmp_path, name, recording, charts):
    """the real command on real H200 recordings: the page renders, and --html leaves the text and
    JSON outputs as they are without it"""
    out_dir = os.environ.get("REPORT_HTML_OUT") or str(tmp_path)
    os.makedirs(out_dir, exist_ok=True)
    html_path = os.path.join(out_dir, name + ".html")
    png_path = os.path.join(out_dir, name + ".png")
    src = os.path.join(EXAMPLES, recording)
    plain = subprocess.run([GPUMON_BIN, "report", src, "--json"], capture_output=True, text=True)
    with_html = subprocess.run([GPUMON_BIN, "report", src, "--json", "--html", html_path],
                               capture_output=True, text=True)
    assert with_html.returncode == 0, with_html.stderr
    assert json.loads(with_html.stdout) == json.loads(plain.stdout)
    assert "timeline" not in json.loads(with_html.stdout)
    r = run_chromium("file://" + os.path.abspath(html_path), tmp_path / "profile",
                     ["--dump-dom", "--screenshot=" + png_path, "--hide-scrollbars"])
    print("screenshot of %s: %s" % (name, png_path))
    page = Page(r.stdout, r.stderr, html_path, png_path)
    check_healthy(page)
    assert page.html_attr("data-gpumon-charts") == charts
    assert page.by_id("leak").attrs["data-verdict"] == json.loads(plain.stdout)["leak"]["verdict"] == "leak"


def test_gpumon_report_html_errors(tmp_path):
    src = os.path.join(EXAMPLES, "recordings/h200_train_leak.gpumon")
    r = subprocess.run([GPUMON_BIN, "report", src, "--html", str(tmp_path / "no/such/dir/x.html")],
                       capture_output=True, text=True)
    assert r.returncode == 255 and "cannot create" in r.stderr and "x.html" in r.stderr
    r = subprocess.run([GPUMON_BIN, "report", src, "--html"], capture_output=True, text=True)
    assert r.returncode == 2 and "needs a value" in r.stderr
    copy = tmp_path / "rec.gpumon"
    shutil.copy(src, copy)
    r = subprocess.run([GPUMON_BIN, "report", str(copy), "--html", str(copy)], capture_output=True, text=True)
    assert r.returncode == 2 and "overwrite" in r.stderr
    r = subprocess.run([GPUMON_BIN, "report", src, "--html", "/dev/full"], capture_output=True, text=True)
    assert r.returncode == 255 and "No space left" in r.stderr


# Run in the page after its own scripts: for the legend entry of each process named in `labels`,
# the columns of its chart's canvas where that process's band (its fill colour, from the legend's
# marker) shows, as a share of the canvas width, and the leftmost and rightmost such column.
BAND_PROBE = r"""
(function () {
  function rgb(s) { return (s.match(/\d+/g) || []).slice(0, 3).map(Number); }
  setTimeout(function () {
    var out = {};
    Array.prototype.forEach.call(document.querySelectorAll('.uplot'), function (root) {
      var canvas = root.querySelector('canvas'), ctx = canvas.getContext('2d');
      var img = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
      Array.prototype.forEach.call(root.querySelectorAll('.u-legend .u-series'), function (row) {
        var label = row.querySelector('.u-label'), marker = row.querySelector('.u-marker');
        if (!label || !marker || !/^(job|other) /.test(label.textContent))
          return;
        var want = rgb(getComputedStyle(marker).backgroundColor), cols = 0, lo = -1, hi = -1;
        for (var x = 0; x < canvas.width; x++) {
          for (var y = 0; y < canvas.height; y++) {
            var i = 4 * (y * canvas.width + x);
            if (Math.abs(img[i] - want[0]) <= 2 && Math.abs(img[i + 1] - want[1]) <= 2 &&
                Math.abs(img[i + 2] - want[2]) <= 2) {
              cols++;
              if (lo < 0) lo = x;
              hi = x;
              break;
            }
          }
        }
        out[label.textContent] = {share: cols / canvas.width, lo: lo / canvas.width, hi: hi / canvas.width};
      });
    });
    var pre = document.createElement('pre');
    pre.id = 'probe';
    pre.textContent = JSON.stringify(out);
    document.body.appendChild(pre);
  }, 200);
})();
"""


def test_flat_co_tenant_is_drawn(tmp_path):
    """A process whose memory never changed has one stored point; the document holds its value to
    the end of the run (change-only figures are step functions), and the page draws it as a band
    across the chart, not only as a legend entry. The recording is a real H200 run next to a
    co-tenant that held 20.6 GiB throughout (examples/traces/leak_cotenant_oom.gpumon)."""
    src = os.path.join(EXAMPLES, "traces/leak_cotenant_oom.gpumon")
    html_path = str(tmp_path / "cotenant.html")
    r = subprocess.run([GPUMON_BIN, "report", src, "--html", html_path], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    raw = open(html_path, encoding="utf-8").read()
    nonce = re.search(r'<script nonce="([0-9a-f]+)">', raw).group(1)
    with open(html_path, "w", encoding="utf-8") as f:
        f.write(raw.replace("</body>", '<script nonce="%s">%s</script>\n</body>' % (nonce, BAND_PROBE)))
    r = run_chromium("file://" + html_path, tmp_path / "profile", ["--dump-dom"])
    page = Page(r.stdout, r.stderr, html_path, None)
    check_healthy(page)
    bands = json.loads(page.text_of("probe"))
    other = [v for k, v in bands.items() if k.startswith("other ") and " 1507 " in k]
    job = [v for k, v in bands.items() if k.startswith("job ") and " 1564 " in k]
    assert len(other) == 1 and len(job) == 1, bands
    # the co-tenant's band runs from the start of the run to its end ...
    assert other[0]["lo"] < 0.15 and other[0]["hi"] > 0.95, bands
    assert other[0]["share"] > 0.8, bands
    # ... as the job's band does from when it appeared (3 s into the 43.5 s run) to its end
    assert job[0]["hi"] > 0.95 and job[0]["share"] > 0.7, bands


# A distributed job under `gpumon run` on the fake NVML, one `gpumon run` a node: each node its own
# UTS namespace (host name) and PID namespace, where the launcher starts worker `local` as pid 1000 +
# local (through ns_last_pid, after gpumon's threads took theirs) with torchrun's variables.
NODE_LAUNCHER = r"""
import os, subprocess, sys, time
node, oom_rank, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
time.sleep(1.0)
procs = []
for local in range(2):
    rank = 2 * node + local
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(999 + local))
    env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(local), WORLD_SIZE="4", GROUP_RANK=str(node),
               TORCHELASTIC_RUN_ID="job7", MASTER_ADDR="node-a", MASTER_PORT="29500")
    if rank == oom_rank:
        code = ("import sys, time; time.sleep(%f); sys.stderr.write('[rank%d]: torch.OutOfMemoryError: CUDA out of "
                "memory. Tried to allocate 2.00 GiB. GPU %d has a total capacity of 79.11 GiB of which 20.00 MiB "
                "is free.\\n'); sys.exit(1)" % (seconds - 1, rank, local))
        procs.append(subprocess.Popen([sys.executable, "-c", code], env=env))
    else:
        procs.append(subprocess.Popen(["sleep", str(seconds)], env=env))
sys.exit(max(p.wait() for p in procs))
"""

FAKE_NVML_LIB = os.environ.get("FAKE_NVML_LIB", os.path.join(HERE, "../../build/tests/fake_nvml/libnvidia-ml-fake.so"))


def node_scenario(oom_local=None):
    gpus = "".join('gpu %d name="NVIDIA H200" uuid=GPU-%08x-2222-3333-4444-555555555555 bus=00000000:%02X:00.0 '
                   'total=80GiB reserved=512MiB used=10GiB\n' % (i, i, 0x10 + i) for i in range(2))
    # once the workers run (made 1 s in; listed 1.5 s later, time enough for a loaded machine to
    # have made them): node-a's rank 1 grows, node-b's rank 3 fills its GPU before it fails
    procs = "at 2.5 proc 0 1000 used=8GiB\nat 2.5 proc 1 1001 used=9GiB grow=300MiB\n"
    if oom_local is not None:
        procs = "at 2.5 proc 0 1000 used=7GiB\nat 2.5 proc 1 1001 used=12GiB\nat 4.0 gpu 1 used=79GiB\n" \
                "at 4.0 proc 1 1001 used=78GiB\n"
    return gpus + procs


def test_gpumon_report_html_of_two_nodes(tmp_path):
    """Two nodes of one torchrun job recorded by `gpumon run`, read together by `gpumon report A B
    --html`: the page's rank table has the document's 4 ranks with their hosts, the chart one line a
    rank with the one that ran out named, and the hosts are listed."""
    if subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "--uts", "true"],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot create PID and UTS namespaces here")
    (tmp_path / "launcher.py").write_text(NODE_LAUNCHER)
    runs = []
    for node, host in enumerate(("node-a", "node-b")):
        scn = tmp_path / (host + ".scn")
        scn.write_text(node_scenario(oom_local=1 if node == 1 else None))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMON_", "FAKE_NVML_"))}
        env.update(LC_ALL="C", GPUMON_NVML_LIBRARY=os.path.abspath(FAKE_NVML_LIB), FAKE_NVML_SCENARIO=str(scn))
        inner = "hostname %s; exec %s run -q -o %s -- %s %s %d 3 4" % (
            host, os.path.abspath(GPUMON_BIN), tmp_path / (host + ".gpumon"), sys.executable,
            tmp_path / "launcher.py", node)
        runs.append(subprocess.Popen(["unshare", "--uts", "--pid", "--fork", "--mount-proc", "sh", "-c", inner],
                                     env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    said = [p.communicate(timeout=60)[1] for p in runs]
    # node-b's rank 3 ran out of memory and failed its node's run
    assert [p.returncode for p in runs] == [0, 1], said
    recordings = [str(tmp_path / "node-a.gpumon"), str(tmp_path / "node-b.gpumon")]
    out_dir = os.environ.get("REPORT_HTML_OUT") or str(tmp_path)
    html_path = os.path.join(out_dir, "cli_two_nodes.html")
    r = subprocess.run([GPUMON_BIN, "report", *recordings, "--json", "--html", html_path],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [(w["rank"], w["dev"], w["pid"], w["host"], w["oom"]) for w in doc["ranks"]] == [
        (0, 0, 1000, 0, False), (1, 1, 1001, 0, False), (2, 2, 1000, 1, False), (3, 3, 1001, 1, True)], doc["ranks"]
    png_path = os.path.join(out_dir, "cli_two_nodes.png")
    rc = run_chromium("file://" + os.path.abspath(html_path), tmp_path / "profile",
                      ["--dump-dom", "--screenshot=" + png_path, "--hide-scrollbars"])
    print("screenshot of cli_two_nodes: %s" % png_path)
    page = Page(rc.stdout, rc.stderr, html_path, png_path)
    check_healthy(page)
    rows = table_rows(page, "rank-table")
    assert [c[:4] for _, c in rows] == [["0", "node-a", "0", "1000"], ["1", "node-a", "1", "1001"],
                                        ["2", "node-b", "2", "1000"], ["3", "node-b", "3", "1001"]], rows
    assert [c[8] for _, c in rows] == ["", "", "", "ran out of memory"]
    assert rows[3][1][4] == "78.0 GiB"
    assert legend_labels(page, "rank-chart-box") == ["rank 0", "rank 1", "rank 2", "rank 3 (ran out)"]
    assert page.by_id("ranks-undrawn") is None
    hosts = [" ".join(n.text().split()) for n in page.by_id("hosts").walk() if n.tag == "li"]
    assert hosts[0] == "node-a: GPUs 0-1 (the clock of this report)", hosts
    assert hosts[1].startswith("node-b: GPUs 2-3; its times moved by "), hosts
    # the page's hosts say what the text report says
    text = subprocess.run([GPUMON_BIN, "report", *recordings], capture_output=True, text=True).stdout
    assert "Hosts:          %s\n                %s\n" % tuple(hosts) in text, text
