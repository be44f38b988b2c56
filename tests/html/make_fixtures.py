#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The inputs the HTML page tests hand to `gpumon report --html`: recordings with known rows (a
recording the library writes, emptied and refilled with sqlite3, as tests/cli/test_report.py does)
and CSVs, made by formulas (no randomness) so that every run reads the same. Each function writes
its input under a folder and returns the path to give gpumon report. Recordings need the test
program that writes the library's recording (TEST_RECORDING_BIN)."""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../cli"))
import test_report  # noqa: E402  (its Rec: a recording of the library refilled with known rows)

GIB = 1 << 30
MIB = 1 << 20
S = 10**9
H200_TOTAL = 150754820096
HOSTILE = "</script><img src=x onerror=alert(1)>"


class Rec(test_report.Rec):
    """A recording with known rows (tests/cli/test_report.py's), on devices H200s, with the job's
    command and host when given; device and process figures of any GPU."""

    def __init__(self, path, kind="run", exit_status=None, command=None, host=None, devices=1):
        super().__init__(path, kind, exit_status)
        self.db.execute("DELETE FROM devices")
        self.db.execute("DELETE FROM meta WHERE key IN ('command', 'host')")
        for key, value in (("command", command), ("host", host)):
            if value is not None:
                self.db.execute("INSERT INTO meta VALUES (?, ?)", (key, value))
        for d in range(devices):
            self.db.execute("INSERT INTO devices VALUES (?, ?, 'NVIDIA H200', ?, ?, NULL)",
                            (d, "GPU-%08x-59f0-8f43-a379-7bd1cb7dae51" % (0x04b38c5d + d), "00000000:%02X:00.0" % d,
                             H200_TOTAL))

    def t(self, s):
        return self.start + int(round(s * S))

    def device(self, s, dev, used, used_max=None):
        self.db.execute("INSERT INTO device_samples (t_ns, dev, memory_api, used_bytes, free_bytes, total_bytes,"
                        " used_min_bytes, used_max_bytes, used_max_t_ns, samples) VALUES (?, ?, 2, ?, ?, ?, ?, ?, ?, 1)",
                        (self.t(s), dev, used, H200_TOTAL - used, H200_TOTAL, used, used_max or used, self.t(s)))

    def process(self, s, dev, pid, used, user="alice", command="python train.py", job=False):
        """used None: listed, without a figure."""
        if not self.db.execute("SELECT 1 FROM processes WHERE dev = ? AND pid = ?", (dev, pid)).fetchone():
            self.db.execute("INSERT INTO processes (dev, pid, first_t_ns, flags, foreign_pid, user, command)"
                            " VALUES (?, ?, ?, 49, 0, ?, ?)", (dev, pid, self.t(s), user, command))
            if job:  # a pid of the job's tree, as the library's writer stores it
                self.db.execute("INSERT INTO events (t_ns, kind, text) VALUES (?, 'job', ?)", (self.t(s), f"pid {pid}"))
        self.db.execute("INSERT INTO process_samples VALUES (?, ?, ?, ?, 0)", (self.t(s), dev, pid, used))


ALERT_SAMPLE = 312  # the sample at which the model's leak alert comes


def leak_run(folder):
    """A training job on 2 GPUs whose allocator gains 4 MiB a step from step 120, its data loader,
    and a colleague's job on GPU 0 for a while; the leak alert was given live."""
    rec = Rec(os.path.join(folder, "train-2026-12-02.gpumon"), exit_status=0, command="python train.py --batch-size 64",
              devices=2)
    n = 400
    for i in range(n):
        s = i * 2.03
        alloc = 20 * GIB + max(0, i - 120) * 4 * MIB + (i % 7) * 256 * MIB
        reserved = int(math.ceil((alloc + 3 * GIB) / (2 * GIB)) * 2 * GIB)
        rec.framework(s, 1234, i, alloc, reserved, alloc + 3 * GIB)
        job = reserved + 600 * MIB
        rec.process(s, 0, 1234, job, command="python train.py --batch-size 64", job=True)
        loader = 400 * MIB if i >= 10 else 0
        if loader:
            rec.process(s, 0, 1240, loader, command="python train.py (data loader)", job=True)
        other = 10 * GIB if 100 <= i < 250 else 0
        if 100 <= i <= 250:
            rec.process(s, 0, 5555, other, user="bob", command="python eval.py")
        if i != 200:  # a missed sample: a gap, not 0
            rec.device(s, 0, job + loader + other + 644939776)
        dev1 = int(5 * GIB + 2 * GIB * math.sin(i / 30))
        rec.device(s, 1, dev1)
    rec.event(ALERT_SAMPLE * 2.03, "alert", "leak suspected: 4 MiB a step")  # the model's alert, given live
    rec.event(812.4, "exit", "exit status 0")
    return rec.close()


def oom(folder):
    """A job that ran out of memory next to a colleague's job that grew into its GPU."""
    rec = Rec(os.path.join(folder, "oom.gpumon"), exit_status=1, command="python train.py", host="node7")
    for i in range(120):
        s = i * 0.5
        job = 60 * GIB + (i % 3) * MIB
        other = 60 * GIB + ((i - 60) * 330 * MIB if i > 60 else 0)
        rec.process(s, 0, 4321, job, command="python train.py", job=True)
        rec.process(s, 0, 9999, other, user="bob", command="python big_eval.py")
        rec.device(s, 0, job + other)
    rec.event(59.9, "oom", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
    return rec.close()


def hostile(folder):
    """Markup and escapes everywhere a recording keeps text: its file's name, the command, the user,
    the host, a framework's name, a rank's job id, the events' kinds and texts, the OOM message."""
    cmd = "python train.py --name '" + HOSTILE + "' \"quoted\" & more \u2028 \u8bad\u7ec3 \u00fc"
    name = "evil</title><script>alert(3)</script>.gpumon"
    os.makedirs(os.path.join(folder, os.path.dirname(name)), exist_ok=True)
    rec = Rec(os.path.join(folder, name), exit_status=0, command=cmd, host="<i>host</i>")
    for i in range(20):  # another process fills the GPU: the diagnosis names it
        rec.process(i, 0, 31337, 5 * GIB + (i % 2) * MIB, user="eve<b>\"'", command=cmd, job=True)
        rec.process(i, 0, 666, GIB + i * 7 * GIB, user=HOSTILE, command=HOSTILE + " \u2029 end")
        rec.device(i, 0, 6 * GIB + i * 7 * GIB)
    rec.framework(0, 31337, None, None, None)
    rec.db.execute("UPDATE framework_sources SET framework = ?", (HOSTILE[:15],))
    rec.rank(31337, 0, 2, job=HOSTILE)
    rec.event(5, "alert", "<script>alert(2)</script>")
    rec.event(18.5, "oom", HOSTILE)
    rec.event(19, "exit<b>", HOSTILE)
    return name, rec.close()


def csv_minimal(folder):
    """A CSV of the framework's allocated figure: its one process is named by no pid."""
    path = os.path.join(folder, "alloc.csv")
    with open(path, "w", encoding="utf-8") as f:
        f.write("time,allocated\n")
        for i in range(8):  # too few points to tell a leak
            f.write("%d,%d\n" % (i * 7, 3 * GIB + i * 70 * MIB))
    return path


def nulls(folder):
    """A CSV whose fields are mostly empty: every figure it lacks is n/a, never 0."""
    path = os.path.join(folder, "nulls.csv")
    with open(path, "w", encoding="utf-8") as f:
        f.write("time,allocated,reserved,process_used,device_used,device_total\n")
        f.write("0,,,,,\n1,,,,%d,\n2,,,,,\n3,,,,%d,\n" % (5 * GIB, 7 * GIB))
    return path


def ranks(folder, n=8, leak_rank=3, oom_rank=5, silent_rank=6, oom_growth=400 * MIB):
    """A torchrun job of n ranks on 8 GPUs: leak_rank leaks, oom_rank ran out of memory (its figure
    growing by oom_growth a sample), silent_rank is listed without a figure."""
    rec = Rec(os.path.join(folder, "ranks.gpumon"), exit_status=1, command="torchrun train.py", devices=min(n, 8))
    for i in range(150):
        s = 1 + i * 2
        for r in range(n):
            dev, pid = r % 8, 1000 + r
            used = 8 * GIB + r * 64 * MIB + (i % 3) * MIB
            if r == leak_rank:
                used += i * 4 * MIB
            if r == oom_rank:
                used += i * oom_growth
            rec.process(s, dev, pid, None if r == silent_rank else used, job=True)
        for d in range(min(n, 8)):
            rec.device(s, d, 9 * GIB)
    for r in range(n):
        rec.rank(1000 + r, r, n)
    rec.event(299.5, "oom", "[rank%d]: torch.OutOfMemoryError: CUDA out of memory" % oom_rank)
    return rec.close()


def many_processes(folder, n=64, points=4000):
    """n processes of points samples each on one GPU, the first 8 the job's."""
    rec = Rec(os.path.join(folder, "big.gpumon"), exit_status=0)
    for i in range(points):
        s = 1 + i * 0.25
        total = 0
        for p in range(n):
            if (i + p * 37) % 997 == 0:
                continue
            used = (1 + p % 5) * (1 << 28) + (i * (p + 1) % 300) * MIB
            total += used
            rec.process(s + p * 0.001, 0, 1000 + p, used, user="user%d" % p, command="python job%d.py" % p, job=p < 8)
        rec.device(s, 0, total)
    return rec.close()
