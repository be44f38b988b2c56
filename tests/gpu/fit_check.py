# SPDX-License-Identifier: MIT
"""`gpumon fit` on a real GPU (run by tests/gpu/fit_check.sh): for each model of fit_train.py, the
answer of `gpumon fit --verify` against the true largest batch found by bisection (runs of the
script alone at 3 steps until out of memory), its predicted peak against the verified run's, the
time it took against Lightning's BatchSizeFinder (binsearch) on the same model; then with a real
60 GiB co-tenant the answer shrinks and a run at it does not run out of memory. Results in
OUT/fit_check.json and OUT/fit_check.txt."""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "fit_train.py")
PY = sys.executable
results = {"checks": [], "models": {}}


def check(name, ok, detail):
    results["checks"].append({"name": name, "ok": bool(ok), "detail": detail})
    print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}", flush=True)


def fits(model, batch, steps=3):
    """True when the script alone runs `steps` steps at batch without running out of memory."""
    r = subprocess.run([PY, TRAIN, "--model", model, "--batch-size", str(batch), "--steps", str(steps)],
                       capture_output=True, text=True, timeout=600)
    if r.returncode not in (0, 1) or (r.returncode == 1 and "out of memory" not in r.stderr.lower()):
        raise RuntimeError(f"{model} at {batch}: status {r.returncode}: {r.stderr[-500:]}")
    return r.returncode == 0


def true_largest(model, start):
    """Bisection from a batch known to fit: doubles until one does not, then halves the gap down
    to 1 % of the answer (or 1)."""
    lo, hi = start, start * 2
    while fits(model, hi):
        lo, hi = hi, hi * 2
    while hi - lo > max(1, lo // 100):
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(model, mid) else (lo, mid)
    return lo


def gpumon_fit(gpumon, model, extra=()):
    t0 = time.monotonic()
    r = subprocess.run([gpumon, "fit", "--json", "--verify", *extra, "--", PY, TRAIN, "--model", model,
                        "--batch-size", "{batch}"], capture_output=True, text=True, timeout=1800)
    took = time.monotonic() - t0
    if r.returncode != 0:
        raise RuntimeError(f"gpumon fit {model}: status {r.returncode}: {r.stderr[-1000:]}")
    return json.loads(r.stdout), took


def lightning_time(model):
    """Seconds Lightning's BatchSizeFinder (binsearch, 3 steps a trial) takes on the same model, and
    the batch it found."""
    code = f"""
import sys, time, torch
sys.argv = ["x", "--model", {model!r}, "--batch-size", "1"]
sys.path.insert(0, {HERE!r})
import fit_train, lightning as L
from lightning.pytorch.tuner import Tuner
build = {{"mlp": fit_train.mlp, "resnet": fit_train.resnet, "bert": lambda: fit_train.bert(512),
         "gpt2": lambda: fit_train.gpt2(512)}}[{model!r}]
class M(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net, self.data = build()
        self.batch_size = 2
    def train_dataloader(self):
        n = self.batch_size
        x, y = self.data(n)
        ds = [(x[i], y[i] if y is not None else x[i]) for i in range(n)] * 4
        return torch.utils.data.DataLoader(ds, batch_size=n)
    def training_step(self, b, i):
        x, y = b
        if {model!r} in ("mlp", "resnet"):
            return torch.nn.functional.cross_entropy(self.net(x), y)
        return self.net(input_ids=x, labels=y).loss
    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-4)
t = L.Trainer(accelerator="gpu", devices=1, max_epochs=1, logger=False, enable_checkpointing=False,
              enable_progress_bar=False)
t0 = time.monotonic()
found = Tuner(t).scale_batch_size(M(), mode="binsearch", steps_per_trial=3, init_val=2, max_trials=25)
print(time.monotonic() - t0, found)
"""
    r = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        return None, None, r.stderr[-800:]
    secs, found = r.stdout.strip().splitlines()[-1].split()
    return float(secs), int(found), ""


def one_model(gpumon, model):
    doc, took = gpumon_fit(gpumon, model)
    ans, pred = doc["max_batch"], doc["predicted_peak_bytes"]
    verified = [r for r in doc["runs"] if r["verify"]]
    m = results["models"][model] = {"fit": doc, "fit_seconds": took}
    check(f"{model}: an answer", ans and verified and not verified[0]["out_of_memory"],
          f"batch {ans}, {len(doc['runs'])} runs, {took:.1f} s")
    if not ans or not verified:
        return
    measured = verified[0]["peak_bytes"]
    err = (pred - measured) / measured
    check(f"{model}: predicted peak within 3 % of the measured", abs(err) <= 0.03,
          f"predicted {pred}, measured {measured} ({err:+.2%}, from {verified[0]['peak_source']})")
    true = true_largest(model, ans)
    m["true_largest"] = true
    check(f"{model}: within 5 % of the true largest batch, never above", true * 0.95 <= ans <= true,
          f"answer {ans}, true {true} ({(ans - true) / true:+.1%})")
    secs, found, why = lightning_time(model)
    m["lightning"] = {"seconds": secs, "batch": found, "error": why}
    print(f"  {model}: gpumon fit {took:.1f} s -> {ans}; Lightning BatchSizeFinder "
          f"{secs if secs is None else round(secs, 1)} s -> {found} {why}", flush=True)


def cotenant(gpumon, model):
    """60 GiB held by another process: the answer shrinks by about 60 GiB's worth, and runs."""
    alone = results["models"].get(model, {}).get("fit")
    holder = subprocess.Popen([PY, "-c", "import torch, time; x = torch.empty(60 << 30, dtype=torch.uint8, "
                               "device='cuda'); print('held', flush=True); time.sleep(3600)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        holder.stdout.readline()
        doc, took = gpumon_fit(gpumon, model)
        results["cotenant"] = {"fit": doc, "seconds": took}
        ans = doc["max_batch"]
        ok_run = fits(model, ans, steps=5) if ans else False
        shrink = alone and ans and alone["max_batch"] > ans
        per = doc["per_sample_bytes"] or 1
        expect = (60 << 30) / per if per > 0 else 0
        check(f"{model} next to a 60 GiB co-tenant: the answer shrinks and runs",
              shrink and ok_run, f"alone {alone and alone['max_batch']}, shared {ans} (60 GiB is ~{expect:.0f} "
              f"samples), room {doc['room_bytes']}, a run at it {'fits' if ok_run else 'RAN OUT OF MEMORY'}")
    finally:
        holder.kill()
        holder.wait()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gpumon", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--models", default="mlp,resnet,bert,gpt2")
    a = p.parse_args()
    for model in a.models.split(","):
        try:
            one_model(a.gpumon, model)
        except Exception as e:  # noqa: BLE001 - a model's failure is a finding, the others still run
            check(f"{model}: ran", False, str(e)[-800:])
        json.dump(results, open(os.path.join(a.out, "fit_check.json"), "w"), indent=1)
    try:
        cotenant(a.gpumon, "gpt2")
    except Exception as e:  # noqa: BLE001
        check("co-tenant: ran", False, str(e)[-800:])
    json.dump(results, open(os.path.join(a.out, "fit_check.json"), "w"), indent=1)
    bad = [c for c in results["checks"] if not c["ok"]]
    print(f"{len(results['checks']) - len(bad)} of {len(results['checks'])} checks passed")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
