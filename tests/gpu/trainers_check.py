#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The trainer callbacks on a real GPU (run by tests/gpu/trainers_check.sh): a small Lightning
model and a small BERT (built locally from a BertConfig, no download) under the Hugging Face
Trainer, each clean and with a planted leak of 2 MiB a step, the four runs side by side:

  <t>-leak     the leak is told within 200 optimizer steps at its rate (within 10 %), once, as one
               line on stderr through the trainer's logging (no LeakWarning)
  <t>-clean    the clean run is not told
  <t>-figures  the figures the callback logged (Lightning: trainer.loggers, and the CSVLogger's
               file; HF: the logs and state.log_history, and TensorBoard's file when tensorboard
               is installed) equal torch.cuda.memory_allocated() at the same step
  <t>-action   adjust=True with a 2 GiB allocator cap (torch.cuda.set_per_process_memory_fraction):
               the leak's projected out-of-memory brings the checkpoint (Lightning:
               trainer.save_checkpoint; HF: control.should_save, output_dir/checkpoint-N)

Steps take about 0.2 s (a sleep): the detector tells no leak before a series is 20 s old.
`--job NAME` runs one run and writes NAME.json (the parent starts them); without it the parent
runs the four, checks, prints PASS/FAIL per check and writes trainers_check.json and
trainers_check.txt under --out. Exit status 1 when a check failed.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import time

MIB = 1 << 20
LEAK = 2 * MIB
STEP_S = 0.2
STEPS = 230
CAP = 2 << 30          # the leak runs' allocator cap: out-of-memory projected within 1,000 steps
RESULTS = {"checks": [], "figures": {}}
LINES = []


def say(msg):
    print(msg, flush=True)
    LINES.append(msg)


def check(name, ok, detail):
    RESULTS["checks"].append({"name": name, "ok": bool(ok), "detail": detail})
    say(f"{'PASS' if ok else 'FAIL'} {name}: {detail}")


# ---- the runs (each in a process of its own) ------------------------------------------------------

def cap_allocator(torch):
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(CAP / total, 0)


def run_lightning(kind, out):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torch.utils.data
    try:
        import lightning.pytorch as L
        from lightning.pytorch.loggers import CSVLogger, Logger
    except ImportError:
        import pytorch_lightning as L
        from pytorch_lightning.loggers import CSVLogger, Logger
    from gpumon.lightning import GPUMonitorCallback

    torch.manual_seed(0)
    if kind == "leak":
        cap_allocator(torch)
    kept = []

    class Net(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.batch_size = 64
            self.net = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 10))

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = F.cross_entropy(self.net(x), y)
            if kind == "leak":  # the planted leak: 2 MiB kept each step
                kept.append(torch.empty(LEAK, dtype=torch.uint8, device=self.device))
            return loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-3)

    class Probe(L.Callback):
        """torch's counter at each optimizer step, read right after gpumon's callback; and the
        step's time."""

        def __init__(self):
            self.allocated = {}

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            self.allocated[trainer.global_step] = torch.cuda.memory_allocated()
            time.sleep(STEP_S)

    class Keep(Logger):
        """What the Trainer's loggers are given."""

        def __init__(self):
            super().__init__()
            self.rows = []

        @property
        def name(self):
            return "keep"

        @property
        def version(self):
            return 0

        def log_hyperparams(self, params, *args, **kwargs):
            pass

        def log_metrics(self, metrics, step=None):
            self.rows.append((step, dict(metrics)))

    x = torch.randn(64 * 40, 256)
    y = torch.randint(0, 10, (64 * 40,))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=64, shuffle=True)
    events = []
    cb = GPUMonitorCallback(every_n_steps=1, on_alert=events.append, adjust=(kind == "leak"),
                            checkpoint_dir=os.path.join(out, f"lightning-{kind}-ckpt"))
    probe, keep = Probe(), Keep()
    csv = CSVLogger(os.path.join(out, f"lightning-{kind}-csv"))
    trainer = L.Trainer(max_steps=STEPS, accelerator="gpu", devices=1, logger=[keep, csv], callbacks=[cb, probe],
                        log_every_n_steps=10, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=out)
    trainer.fit(Net(), train_dataloaders=loader)
    csv_files = glob.glob(os.path.join(out, f"lightning-{kind}-csv", "**", "metrics.csv"), recursive=True)
    csv_columns = open(csv_files[0]).readline().strip().split(",") if csv_files else []
    logged = [(step, m["memory/allocated_mib"]) for step, m in keep.rows if "memory/allocated_mib" in m]
    return {"steps": trainer.global_step, "events": [event_dict(e) for e in events],
            "alerts": cb.monitor.alerts if cb.monitor else None, "adjustments": cb.adjustments,
            "checkpoints": [a["checkpoint"] for a in cb.adjustments if os.path.exists(a["checkpoint"])],
            "logged": logged, "probe": probe.allocated, "csv_columns": csv_columns,
            "names": sorted({k for _, m in keep.rows for k in m}), "version": L.__version__}


def run_hf(kind, out):
    import torch
    import torch.utils.data
    import transformers
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainerCallback, TrainingArguments
    from gpumon.hf import GPUMonitorCallback

    torch.manual_seed(0)
    if kind == "leak":
        cap_allocator(torch)
    kept = []

    def leak(module, inputs):
        """The planted leak, before each training forward: 2 MiB kept each step. (A hook rather
        than a subclass: the Trainer keeps only the batch's keys that forward() names.)"""
        if module.training:
            kept.append(torch.empty(LEAK, dtype=torch.uint8, device=module.device))

    class Data(torch.utils.data.Dataset):
        def __init__(self, n=32 * 40):
            g = torch.Generator().manual_seed(1)
            self.ids = torch.randint(5, 1000, (n, 32), generator=g)
            self.labels = torch.randint(0, 2, (n,), generator=g)

        def __len__(self):
            return len(self.labels)

        def __getitem__(self, i):
            return {"input_ids": self.ids[i], "attention_mask": torch.ones(32, dtype=torch.long),
                    "labels": self.labels[i]}

    class Probe(TrainerCallback):
        """torch's counter at each optimizer step, read after gpumon's callback; the logs; the
        step's time."""

        def __init__(self):
            self.allocated, self.logs = {}, []

        def on_step_end(self, args, state, control, **kwargs):
            self.allocated[state.global_step] = torch.cuda.memory_allocated()
            time.sleep(STEP_S)

        def on_log(self, args, state, control, logs=None, **kwargs):
            self.logs.append((state.global_step, dict(logs or {})))

    cfg = BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=128, max_position_embeddings=64, num_labels=2)
    model = BertForSequenceClassification(cfg)
    if kind == "leak":
        model.register_forward_pre_hook(leak)
    have_tb = _importable("tensorboard")
    args = TrainingArguments(output_dir=os.path.join(out, f"hf-{kind}"), max_steps=STEPS,
                             per_device_train_batch_size=32, logging_steps=10, save_strategy="no",
                             report_to=["tensorboard"] if have_tb else [], disable_tqdm=True, seed=0,
                             dataloader_num_workers=0, learning_rate=1e-3)
    events = []
    cb = GPUMonitorCallback(every_n_steps=1, on_alert=events.append, adjust=(kind == "leak"))
    probe = Probe()
    trainer = Trainer(model=model, args=args, train_dataset=Data(), callbacks=[cb, probe])
    trainer.train()
    logged = [(step, m["memory/allocated_mib"]) for step, m in probe.logs if "memory/allocated_mib" in m]
    history = [(h["step"], h["memory/allocated_mib"]) for h in trainer.state.log_history
               if "memory/allocated_mib" in h]
    return {"steps": trainer.state.global_step, "events": [event_dict(e) for e in events],
            "alerts": cb.monitor.alerts if cb.monitor else None, "adjustments": cb.adjustments,
            "checkpoints": [a["checkpoint"] for a in cb.adjustments if os.path.isdir(a["checkpoint"])],
            "logged": logged, "history": history, "probe": probe.allocated,
            "tb": read_tb(os.path.join(out, f"hf-{kind}")) if have_tb else None,
            "callbacks": [type(c).__name__ for c in trainer.callback_handler.callbacks],
            "version": transformers.__version__}


def _importable(name):
    import importlib.util
    return importlib.util.find_spec(name) is not None


def read_tb(logdir):
    """(step, value) of train/memory/allocated_mib in the TensorBoard files, when tensorboard reads them."""
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError:
        return None
    rows = []
    for d in sorted({os.path.dirname(p) for p in glob.glob(os.path.join(logdir, "**", "events.out.*"),
                                                            recursive=True)}):
        acc = EventAccumulator(d)
        acc.Reload()
        if "train/memory/allocated_mib" in acc.Tags().get("scalars", []):
            rows += [(e.step, e.value) for e in acc.Scalars("train/memory/allocated_mib")]
    return rows


def event_dict(e):
    return {"kind": e.kind, "step": e.step, "rate_bytes_per_step": e.rate_bytes_per_step,
            "steps_to_oom": e.steps_to_oom, "room": e.room, "message": e.message}


# ---- the parent ---------------------------------------------------------------------------------------

def start_jobs(out, names, deadline):
    procs = {}
    for name in names:
        err = open(os.path.join(out, f"{name}.stderr"), "w")
        procs[name] = (subprocess.Popen([sys.executable, __file__, "--job", name, "--out", out],
                                        stdout=err, stderr=subprocess.STDOUT), err)
    for name, (p, err) in procs.items():
        try:
            p.wait(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            say(f"{name}: ran past the deadline, killed")
        err.close()
    runs = {}
    for name in names:
        path = os.path.join(out, f"{name}.json")
        runs[name] = json.load(open(path)) if os.path.exists(path) else None
        if runs[name] is None:
            tail = open(os.path.join(out, f"{name}.stderr")).read()[-1500:]
            say(f"{name}: no result; the end of its output:\n{tail}")
    return runs


def told_lines(out, name):
    text = open(os.path.join(out, f"{name}.stderr")).read()
    return ([line for line in text.splitlines() if "memory leak suspected" in line], "LeakWarning" in text)


def equal_figures(logged, probe):
    """Every logged allocated figure (MiB) against torch's counter at its step; the mismatches."""
    return [(s, v) for s, v in logged if str(s) not in probe or abs(v * MIB - probe[str(s)]) > 0.5]


def judge(out, t, runs):
    leak, clean = runs.get(f"{t}-leak"), runs.get(f"{t}-clean")
    if leak is None or clean is None:
        check(f"{t}-leak", False, "a run gave no result (see its .stderr)")
        return
    alerts = [e for e in leak["events"] if e["kind"] == "leak"]
    a = alerts[0] if alerts else {}
    rate = (a.get("rate_bytes_per_step") or 0) / MIB
    lines, warned = told_lines(out, f"{t}-leak")
    RESULTS["figures"][f"{t}_alert_step"] = a.get("step")
    RESULTS["figures"][f"{t}_rate_mib_per_step"] = rate if a else None
    check(f"{t}-leak", len(alerts) == 1 and a["step"] <= 200 and abs(rate - 2) <= 0.2 and len(lines) == 1
          and not warned,
          f"alert at step {a.get('step')} of {leak['steps']}, rate {rate:.3f} MiB/step (planted 2), "
          f"{len(lines)} line(s) on stderr, LeakWarning {'seen' if warned else 'not seen'}: {lines[:1]}")
    clines, _ = told_lines(out, f"{t}-clean")
    cl = [e for e in clean["events"] if e["kind"] == "leak"]
    check(f"{t}-clean", not cl and not clines, f"{clean['steps']} steps, {len(cl)} leak alert(s), {len(clines)} line(s)")
    for name, run in ((f"{t}-clean", clean), (f"{t}-leak", leak)):
        bad = equal_figures(run["logged"], run["probe"])
        detail = f"{len(run['logged'])} logged steps, {len(bad)} unequal {bad[:3]}"
        ok = len(run["logged"]) >= 20 and not bad
        if t == "lightning":
            ok = ok and "memory/allocated_mib" in run["csv_columns"]
            detail += f"; CSVLogger columns with memory/: {[c for c in run['csv_columns'] if c.startswith('memory/')]}"
        else:
            hbad = equal_figures(run["history"], run["probe"])
            ok = ok and len(run["history"]) == len(run["logged"]) and not hbad
            detail += f"; log_history {len(run['history'])} steps, {len(hbad)} unequal"
            if run["tb"] is not None:  # float32 in the file: within 1/128 MiB below 128 GiB
                tbad = [(s, v) for s, v in run["tb"]
                        if str(s) not in run["probe"] or abs(v * MIB - run["probe"][str(s)]) > MIB / 128]
                ok = ok and len(run["tb"]) >= 20 and not tbad
                detail += f"; TensorBoard file {len(run['tb'])} steps, {len(tbad)} unequal"
            detail += f"; callbacks {run['callbacks']}"
        check(f"{name}-figures", ok, detail)
    proj = [e for e in leak["events"] if e["kind"] == "oom_projected"]
    check(f"{t}-action", proj and leak["adjustments"] and leak["adjustments"][0]["kind"] == "oom_projected"
          and leak["checkpoints"],
          f"oom_projected at step {proj[0]['step'] if proj else None} ({proj[0]['steps_to_oom'] if proj else None} "
          f"steps left against {proj[0]['room'] if proj else None}); action {leak['adjustments']}; "
          f"checkpoints on disk {leak['checkpoints']}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="gpu-out")
    ap.add_argument("--job", help="run one run (lightning-leak, lightning-clean, hf-leak, hf-clean)")
    ap.add_argument("--only", help="lightning, hf or both (default)", default="lightning,hf")
    ap.add_argument("--deadline-s", type=float, default=120, help="the runs' time, all together")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.job:
        trainer, kind = a.job.split("-")
        res = (run_lightning if trainer == "lightning" else run_hf)(kind, a.out)
        with open(os.path.join(a.out, f"{a.job}.json"), "w") as f:
            json.dump(res, f, default=str)
        return 0
    t0 = time.time()
    trainers = [t for t in a.only.split(",") if t]
    names = [f"{t}-{k}" for t in trainers for k in ("leak", "clean")]
    runs = start_jobs(a.out, names, t0 + a.deadline_s)
    for t in trainers:
        v = next((r["version"] for n, r in runs.items() if n.startswith(t) and r), None)
        RESULTS["figures"][f"{t}_version"] = v
        judge(a.out, t, runs)
    RESULTS["figures"]["seconds"] = round(time.time() - t0, 1)
    failed = [c["name"] for c in RESULTS["checks"] if not c["ok"]]
    say(f"{len(RESULTS['checks']) - len(failed)} passed, {len(failed)} failed"
        + (f" ({', '.join(failed)})" if failed else "") + f" in {RESULTS['figures']['seconds']} s")
    with open(os.path.join(a.out, "trainers_check.json"), "w") as f:
        json.dump(RESULTS, f, indent=1, default=str)
    with open(os.path.join(a.out, "trainers_check.txt"), "a") as f:
        f.write("\n".join(LINES) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
