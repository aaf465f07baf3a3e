"""Checks a tfc-grid report.html (tests/test_grid.c): it parses as HTML, its table has a
header and one row per line of results.csv, the SVG has a curve per trial, rung marks when
the scheduler's log (asha.csv, median.csv, hyperband.csv) has results, and nothing refers outside the file (no http:, https:, src= or href=).
Usage: report_check.py SWEEP_DIR"""
import csv
import sys
from html.parser import HTMLParser


class Report(HTMLParser):
    def __init__(self):
        super().__init__()
        self.rows = 0
        self.head = []
        self.in_th = False
        self.polylines = 0
        self.rungs = 0
        self.outside = []

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if k in ("src", "href") or (v and ("http:" in v or "https:" in v)):
                self.outside.append((tag, k, v))
        if tag == "tr":
            self.rows += 1
        if tag == "th":
            self.in_th = True
            self.head.append("")
        if tag == "polyline":
            self.polylines += 1
        if tag == "circle" and ("class", "rung") in attrs:
            self.rungs += 1

    def handle_endtag(self, tag):
        if tag == "th":
            self.in_th = False

    def handle_data(self, data):
        if self.in_th:
            self.head[-1] += data


def main():
    sweep = sys.argv[1]
    text = open(sweep + "/report.html", encoding="utf-8").read()
    r = Report()
    r.feed(text)
    results = list(csv.reader(open(sweep + "/results.csv", encoding="utf-8")))
    problems = []
    if r.head != results[0]:
        problems.append(f"table header {r.head} != results.csv header {results[0]}")
    if r.rows != len(results):
        problems.append(f"{r.rows} table rows for {len(results)} results.csv lines")
    if r.polylines != len(results) - 1:
        problems.append(f"{r.polylines} curves for {len(results) - 1} trials")
    asha = []
    for log in ("asha.csv", "median.csv", "hyperband.csv"):
        try:
            asha = [l for l in open(sweep + "/" + log)
                    if l.startswith("result,") and not l.strip().endswith(",nan")]
            break
        except OSError:
            pass
    if asha and r.rungs != len(asha):
        problems.append(f"{r.rungs} rung marks for {len(asha)} asha.csv results")
    if r.outside or "http:" in text or "https:" in text:
        problems.append(f"refers outside the file: {r.outside}")
    for p in problems:
        print(p)
    print(f"report: {r.rows - 1} rows, {r.polylines} curves, {r.rungs} rung marks")
    sys.exit(1 if problems else 0)


main()
