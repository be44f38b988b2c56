# SPDX-License-Identifier: MIT
"""The comparison exporter of bench_serve.sh: Python's prometheus_client serving exactly the series
that a `gpumon serve` page holds (read once from URL at start), re-rendered on every scrape as
prometheus_client always does. Usage: python3 bench_serve_py.py URL PORT"""
import sys
import time
import urllib.request

from prometheus_client import start_http_server
from prometheus_client.core import REGISTRY
from prometheus_client.parser import text_string_to_metric_families


class Replay:
    def __init__(self, text):
        self.families = list(text_string_to_metric_families(text))

    def collect(self):
        return iter(self.families)


def main():
    url, port = sys.argv[1], int(sys.argv[2])
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    for c in list(REGISTRY._collector_to_names):  # only the replayed series, not Python's own
        REGISTRY.unregister(c)
    REGISTRY.register(Replay(text))
    start_http_server(port, addr="127.0.0.1")
    print(f"serving {sum(len(f.samples) for f in Replay(text).families)} samples", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
