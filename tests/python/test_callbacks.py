# SPDX-License-Identifier: MIT
"""The trainer callbacks (gpumon.lightning, gpumon.hf) against stand-ins of Lightning and
transformers (fake_lightning/, fake_transformers/): figures at optimizer steps under the sinks'
names, equal to the allocator's at that step; every rank's figures with the rank in the name; the
leak alert told once through the trainer's logging; the built-in action (checkpoint, smaller next
batch size) and the auto-adjust recipe of docs/python.md; no trainer imported by `import gpumon`."""
import logging
import math
import os
import re
import subprocess
import sys
import tempfile
import warnings

import pytest

from conftest import GIB, MIB, ROOT, Clock, child_env, h200

import gpumon
from gpumon._sinks import TB_TAGS

HERE = os.path.dirname(os.path.abspath(__file__))
FAKES = [os.path.join(HERE, "fake_lightning"), os.path.join(HERE, "fake_transformers")]
for p in FAKES:
    if p not in sys.path:
        sys.path.insert(0, p)

NAMES = {tag for tag, _ in TB_TAGS} | {"gpu/util_pct"}
WEIGHTS = 2 * GIB
PER_SAMPLE = 16 * MIB   # activations of one sample, freed at the step's end


def fitted(limit, fixed, per_sample, margin=0.10):
    """suggest_batch_size on an exact line: the room is limit x (1 - margin), of which libgpumon's
    fit keeps 1 % free."""
    room = int(limit * (1 - margin))
    return int((room - math.ceil(room / 100) - fixed) // per_sample)


@pytest.fixture
def fresh(torch, monkeypatch):
    """Fresh stand-ins of the trainers (over this test's torch), and no callback class kept from
    another test's."""
    for m in [m for m in sys.modules if m.split(".")[0] in ("lightning", "pytorch_lightning", "transformers")]:
        monkeypatch.delitem(sys.modules, m)
    import gpumon.hf
    import gpumon.lightning
    monkeypatch.setattr(gpumon.lightning, "_classes", {})
    monkeypatch.setattr(gpumon.hf, "_classes", {})
    return torch


def step_work(torch, batch, leak, clock, step_s):
    """One training step on the fake allocator: activations for the batch, freed; a leak kept."""
    torch._fake.alloc(PER_SAMPLE * batch)
    torch._fake.free(PER_SAMPLE * batch)
    if leak:
        torch._fake.alloc(leak)
    if clock is not None:
        clock.advance(step_s)


# ---- Lightning ------------------------------------------------------------------------------------

def lightning_run(torch, callbacks, steps, batch_size=64, leak=0, clock=None, step_s=0.25, **trainer_kw):
    import lightning.pytorch as L

    class Net(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.batch_size = batch_size
            torch._fake.alloc(WEIGHTS)

        def training_step(self, batch, batch_idx):
            step_work(torch, len(batch), leak, clock, step_s)
            return {"loss": 0.0}

    class Data(L.LightningDataModule):
        def __init__(self):
            self.batch_size = batch_size
            self.sizes = []

        def train_dataloader(self):
            self.sizes.append(self.batch_size)
            return [[0] * self.batch_size for _ in range(10)]

    class Probe(L.Callback):
        """torch's counter at each optimizer step, read right after gpumon's callback."""

        def __init__(self):
            self.allocated = {}

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            self.allocated[trainer.global_step] = torch.cuda.memory_allocated()

    save_dir = trainer_kw.pop("save_dir", None)
    keep = None if save_dir is not None else tempfile.TemporaryDirectory()  # not the test's working directory
    logger = L.loggers.CSVLogger(save_dir if save_dir is not None else keep.name)
    logger.kept_dir = keep
    probe = Probe()
    net, data = Net(), Data()
    trainer = L.Trainer(callbacks=callbacks + [probe], logger=logger, max_steps=steps, **trainer_kw)
    trainer.fit(net, datamodule=data)
    return trainer, logger, probe, net, data


def test_lightning_logs_figures_equal_to_torchs_at_the_step(scenario, fresh, tmp_path):
    scenario(h200())
    from gpumon.lightning import GPUMonitorCallback
    cb = GPUMonitorCallback(every_n_steps=2)
    trainer, logger, probe, _, _ = lightning_run(fresh, [cb], 30, leak=MIB, log_every_n_steps=5,
                                                 default_root_dir=tmp_path, save_dir=tmp_path)
    assert [r["step"] for r in logger.rows] == [5, 10, 15, 20, 25, 30]
    for row in logger.rows:
        assert set(row) - {"step"} <= NAMES and "memory/allocated_mib" in row and "gpu/free_mib" in row
        assert row["memory/allocated_mib"] * MIB == probe.allocated[row["step"]]
        assert row["memory/process_mib"] == 3 * 1024  # the fake card's figure for this process
    # sampled at every 2nd step and at the logging steps: once each
    assert cb.monitor.summary()["samples"] == 15 + 3
    assert os.path.exists(tmp_path / "metrics.csv")


def test_lightning_leak_is_told_once_through_lightnings_logger(scenario, fresh, monkeypatch, caplog):
    scenario(h200())
    clock = Clock(monkeypatch)
    caplog.set_level(logging.WARNING, logger="lightning.pytorch")
    events = []
    from gpumon.lightning import GPUMonitorCallback
    cb = GPUMonitorCallback(every_n_steps=1, on_alert=events.append)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        lightning_run(fresh, [cb], 200, leak=4 * MIB, clock=clock)
    told = [r.getMessage() for r in caplog.records if r.name == "lightning.pytorch"]
    assert len(told) == 1 and told[0].startswith("gpumon: memory leak suspected on GPU 0: the framework's allocated "
                                                 f"memory (torch, pid {os.getpid()}) rises by 4.00 MiB a step"), told
    assert not [x for x in w if issubclass(x.category, gpumon.GpumonWarning)]
    assert [e.kind for e in events] == ["leak"] and events[0].rank == 0 and events[0].step <= 200
    assert events[0].rate_bytes_per_step == pytest.approx(4 * MIB, rel=0.05)


def test_lightning_clean_run_is_not_told(scenario, fresh, monkeypatch, caplog):
    scenario(h200())
    clock = Clock(monkeypatch)
    caplog.set_level(logging.WARNING, logger="lightning.pytorch")
    from gpumon.lightning import GPUMonitorCallback
    cb = GPUMonitorCallback(every_n_steps=1)
    lightning_run(fresh, [cb], 200, clock=clock)
    assert [r for r in caplog.records if r.name == "lightning.pytorch"] == []
    assert cb.monitor.alerts == [] and cb.monitor.leak()["verdict"] != "leak"


def test_lightning_every_rank_in_the_names_and_one_ranks_alert_acts_on_all(scenario, fresh, tmp_path, monkeypatch):
    """Two ranks (rank 0 here; rank 1's row as all_gather would bring it): rank 0's loggers get
    both under /rank0 and /rank1; rank 1 asking for the action makes rank 0 act too, with rank 1's
    batch size when smaller."""
    scenario(h200())
    import gpumon.lightning as gl
    seen = []

    def gather(pl_module, world):
        def both(row):
            other = list(row)
            other[0] = 123.0                    # rank 1's allocated MiB
            other[-2] = 1.0 if len(seen) == 2 else 0.0  # rank 1 asks at the third shared step
            other[-1] = 40.0 if len(seen) == 2 else math.nan
            seen.append(row)
            return [row, other]
        assert world == 2
        return both
    monkeypatch.setattr(gl._Hooks, "_gather", staticmethod(gather))
    cb = gl.GPUMonitorCallback(every_n_steps=5, adjust=True)
    trainer, logger, probe, net, data = lightning_run(fresh, [cb], 20, log_every_n_steps=5, world_size=2,
                                                      default_root_dir=tmp_path, save_dir=tmp_path)
    row = logger.rows[0]
    assert row["memory/allocated_mib/rank1"] == 123.0 and row["memory/allocated_mib/rank0"] * MIB == probe.allocated[5]
    assert not any(k in row for k in NAMES)
    assert trainer.saved == [str(tmp_path / "gpumon-step15.ckpt")]
    assert cb.adjustments == [{"step": 15, "kind": None, "checkpoint": str(tmp_path / "gpumon-step15.ckpt"),
                               "batch_size": 64, "next_batch_size": 40}]
    assert net.batch_size == 40 and data.batch_size == 40


def test_lightning_adjust_checkpoints_and_shrinks_the_next_batch(scenario, fresh, tmp_path, caplog):
    """The built-in action on low headroom: trainer.save_checkpoint, and the batch size from
    suggest_batch_size (one point, this run's peak, with what stays allocated as the fixed part)
    set on the module and the datamodule, which the next epoch's loader uses."""
    scenario(h200(used="139.5GiB"))
    caplog.set_level(logging.WARNING, logger="lightning.pytorch")
    from gpumon.lightning import GPUMonitorCallback
    cb = GPUMonitorCallback(every_n_steps=1, adjust=True, multiple_of=8)
    trainer, _, _, net, data = lightning_run(fresh, [cb], 25, default_root_dir=tmp_path, save_dir=tmp_path)
    # peak 2 GiB + 64 x 16 MiB; the allocator may reach the GPU's free memory plus its 3 GiB reserve
    free = cb.monitor.last.device_free
    want = fitted(free + 3 * GIB, WEIGHTS, PER_SAMPLE) // 8 * 8
    assert 0 < want < 64
    assert trainer.saved == [str(tmp_path / "gpumon-step1.ckpt")] and os.path.exists(trainer.saved[0])
    assert cb.adjustments == [{"step": 1, "kind": "headroom_low", "checkpoint": trainer.saved[0], "batch_size": 64,
                               "next_batch_size": want}]
    assert net.batch_size == want and data.sizes == [64, want, want]
    said = [r.getMessage() for r in caplog.records if "GPU memory low at step 1" in r.getMessage()]
    assert len(said) == 1 and f"next batch size {want} (was 64, set in the LightningModule and the " \
                               "LightningDataModule)" in said[0]


def test_lightning_adjust_checkpoints_before_a_projected_oom(scenario, fresh, tmp_path, monkeypatch):
    scenario(h200())
    fresh.cuda.set_per_process_memory_fraction(0.05)  # 7 GiB: the leak has some 1,100 steps left
    clock = Clock(monkeypatch)
    from gpumon.lightning import GPUMonitorCallback
    cb = GPUMonitorCallback(every_n_steps=1, adjust=True, oom_within_steps=2000, checkpoint_dir=tmp_path / "ck")
    trainer, *_ = lightning_run(fresh, [cb], 200, leak=4 * MIB, clock=clock, default_root_dir=tmp_path)
    assert len(cb.adjustments) == 1 and cb.adjustments[0]["kind"] == "oom_projected"
    step = cb.adjustments[0]["step"]
    assert trainer.saved == [str(tmp_path / "ck" / f"gpumon-step{step}.ckpt")]
    leak_step = cb.monitor.alerts[0]["step"]
    assert step == leak_step  # projected within 2,000 steps as soon as the leak was told


def test_lightning_off_a_gpu_says_so(scenario, fresh, caplog):
    scenario(h200())
    caplog.set_level(logging.WARNING, logger="lightning.pytorch")
    import lightning.pytorch as L
    from gpumon.lightning import GPUMonitorCallback

    class Net(L.LightningModule):
        def training_step(self, batch, batch_idx):
            return None
    net = Net()
    net._device = fresh.device("cpu")
    cb = GPUMonitorCallback()
    L.Trainer(callbacks=[cb], max_steps=3).fit(net, train_dataloaders=[[0], [0], [0]])
    assert cb.monitor is None
    assert [r.getMessage() for r in caplog.records] == [
        "gpumon: the model is on device(type='cpu', index=None), not on a CUDA GPU: not monitored"]


def test_lightning_callback_is_of_the_package_imported(scenario, fresh):
    """A Trainer takes only its own package's callbacks: the class comes from the package the
    program imported (here the older pytorch_lightning)."""
    scenario(h200())
    import pytorch_lightning as PL
    from gpumon.lightning import GPUMonitorCallback
    assert "lightning.pytorch" not in sys.modules
    assert issubclass(GPUMonitorCallback, PL.Callback)
    PL.Trainer(callbacks=[GPUMonitorCallback()])
    import lightning.pytorch as L
    with pytest.raises(TypeError, match="not a"):
        L.Trainer(callbacks=[GPUMonitorCallback()])


def test_callback_arguments_are_checked(fresh):
    from gpumon.hf import GPUMonitorCallback as HF
    from gpumon.lightning import GPUMonitorCallback as PL
    for cls in (PL, HF):
        with pytest.raises(ValueError, match="every_n_steps must be"):
            cls(every_n_steps=0)
        with pytest.raises(ValueError, match="the callback sets device, interval itself"):
            cls(device=1, interval=5)
        with pytest.raises(ValueError, match="on_alert must be callable"):
            cls(on_alert="print")


# ---- Hugging Face --------------------------------------------------------------------------------

def hf_run(torch, steps, callbacks, leak=0, clock=None, step_s=0.25, **args_kw):
    import transformers

    class Probe(transformers.TrainerCallback):
        """torch's counter at each optimizer step, read after gpumon's callback."""

        def __init__(self):
            self.allocated = {}

        def on_step_end(self, args, state, control, **kwargs):
            self.allocated[state.global_step] = torch.cuda.memory_allocated()

    torch._fake.alloc(WEIGHTS)
    args = transformers.TrainingArguments(max_steps=steps, **args_kw)
    probe = Probe()
    trainer = transformers.Trainer(model=lambda batch: step_work(torch, batch, leak, clock, step_s), args=args,
                                   callbacks=callbacks + [probe])
    trainer.train()
    return trainer, probe


def test_hf_figures_reach_the_reporting_callbacks_and_log_history(scenario, fresh, tmp_path):
    """The Trainer calls report_to integrations (TensorBoard here) before the user's callbacks:
    gpumon's callback steps in front of them, so they write its figures in the same log."""
    scenario(h200())
    from gpumon.hf import GPUMonitorCallback
    cb = GPUMonitorCallback(every_n_steps=3)
    trainer, probe = hf_run(fresh, 20, [cb], leak=MIB, logging_steps=5, output_dir=str(tmp_path))
    names = [type(c).__name__ for c in trainer.callback_handler.callbacks]
    assert names[:3] == ["DefaultFlowCallback", "GPUMonitorCallback", "TensorBoardCallback"], names
    tb = [c for c in trainer.callback_handler.callbacks if type(c).__name__ == "TensorBoardCallback"][0]
    got = {(tag, step): v for tag, v, step in tb.scalars}
    for step in (5, 10, 15, 20):
        assert got[("train/memory/allocated_mib", step)] * MIB == probe.allocated[step]
        assert ("train/gpu/free_mib", step) in got
    hist = [h for h in trainer.state.log_history if "memory/allocated_mib" in h]
    assert [h["step"] for h in hist] == [5, 10, 15, 20]
    assert all(h["memory/allocated_mib"] * MIB == probe.allocated[h["step"]] for h in hist)
    assert {k for h in hist for k in h} - {"loss", "learning_rate", "step"} <= NAMES


def test_hf_leak_told_once_through_transformers_logger(scenario, fresh, monkeypatch, caplog, tmp_path):
    scenario(h200())
    clock = Clock(monkeypatch)
    caplog.set_level(logging.WARNING, logger="transformers.trainer")
    from gpumon.hf import GPUMonitorCallback
    cb = GPUMonitorCallback(every_n_steps=1)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        hf_run(fresh, 200, [cb], leak=2 * MIB, clock=clock, output_dir=str(tmp_path))
    told = [r.getMessage() for r in caplog.records if r.name == "transformers.trainer"]
    assert len(told) == 1 and ("memory leak suspected on GPU 0: the framework's allocated memory (torch, pid "
                               f"{os.getpid()}) rises by 2.00 MiB") in told[0]
    assert not [x for x in w if issubclass(x.category, gpumon.GpumonWarning)]
    assert cb.monitor.alerts[0]["rate_bytes_per_step"] == pytest.approx(2 * MIB, rel=0.05)


def test_hf_every_rank_in_the_names(scenario, fresh, monkeypatch, tmp_path):
    scenario(h200())
    import gpumon.hf as gh

    def gather(args):
        assert args.world_size == 4
        return lambda row: [row, row, row, row]
    monkeypatch.setattr(gh._Hooks, "_gather", staticmethod(gather))
    cb = gh.GPUMonitorCallback(every_n_steps=5)
    trainer, _ = hf_run(fresh, 5, [cb], logging_steps=5, world_size=4, process_index=2, output_dir=str(tmp_path))
    hist = trainer.state.log_history[-1]
    assert {f"memory/allocated_mib/rank{r}" for r in range(4)} <= set(hist) and "memory/allocated_mib" not in hist
    assert cb.monitor.rank == 2


def test_hf_adjust_saves_and_shrinks_the_batch(scenario, fresh, tmp_path):
    """The built-in action on low headroom: control.should_save (the Trainer saves
    checkpoint-1), and per_device_train_batch_size from suggest_batch_size."""
    scenario(h200(used="139.5GiB"))
    from gpumon.hf import GPUMonitorCallback
    events = []
    cb = GPUMonitorCallback(every_n_steps=1, adjust=True, on_alert=events.append)
    out = tmp_path / "out"
    trainer, _ = hf_run(fresh, 6, [cb], per_device_train_batch_size=64, output_dir=str(out), save_steps=0)
    free = cb.monitor.last.device_free
    want = fitted(free + 3 * GIB, WEIGHTS, PER_SAMPLE)
    assert 0 < want < 64
    assert [e.kind for e in events] == ["headroom_low"]
    assert sorted(os.listdir(out)) == ["checkpoint-1"]
    assert trainer.args.per_device_train_batch_size == want
    assert cb.adjustments == [{"step": 1, "kind": "headroom_low", "checkpoint": str(out / "checkpoint-1"),
                               "batch_size": 64, "next_batch_size": want}]


def test_hf_adjust_from_the_points_given(scenario, fresh, tmp_path):
    scenario(h200(used="139.5GiB"))
    from gpumon.hf import GPUMonitorCallback
    # measured by the user: 1 GiB + 100 MiB a sample
    cb = GPUMonitorCallback(adjust=True, batch_points=[(8, GIB + 800 * MIB), (16, GIB + 1600 * MIB)])
    trainer, _ = hf_run(fresh, 10, [cb], per_device_train_batch_size=64, output_dir=str(tmp_path), save_steps=0)
    free = cb.monitor.last.device_free
    want = fitted(free + 3 * GIB, GIB, 100 * MIB)
    assert cb.adjustments[0]["step"] == 10 and trainer.args.per_device_train_batch_size == want


# ---- the recipe, the helpers, the imports ------------------------------------------------------------

def test_suggest_batch_size_with_the_fixed_part_needs_one_point():
    # 2 GiB fixed, 1 GiB at 64: 16 MiB a sample; 10 GiB * 0.9 = 9216 MiB, 1 % of it kept free by the
    # library -> (9216 - 92.16 - 2048) / 16 = 442.2
    assert gpumon.suggest_batch_size([(64, 3 * GIB)], limit_bytes=10 * GIB, fixed_bytes=2 * GIB) == 442
    with pytest.raises(ValueError, match="or one, with fixed_bytes"):
        gpumon.suggest_batch_size([(64, 3 * GIB)], limit_bytes=10 * GIB)
    with pytest.raises(ValueError, match="fixed_bytes must be"):
        gpumon.suggest_batch_size([(64, 3 * GIB)], limit_bytes=10 * GIB, fixed_bytes=-1)


def recipe():
    """The auto-adjust recipe's code block in docs/python.md."""
    text = open(os.path.join(ROOT, "docs", "python.md"), encoding="utf-8").read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    found = [b for b in blocks if "on_alert=todo.append" in b]
    assert len(found) == 1, "docs/python.md has one auto-adjust recipe"
    return found[0]


def test_the_auto_adjust_recipe_in_the_docs(scenario, torch, monkeypatch):
    """The recipe as written, in a stand-in training loop on a nearly full GPU: the loop saves a
    checkpoint and carries on with the smaller batch suggest_batch_size gives."""
    scenario(h200(used="139.5GiB"))
    clock = Clock(monkeypatch)
    torch._fake.alloc(WEIGHTS)
    saved, sizes = [], []

    def next_batch(n):
        sizes.append(n)
        return n

    def train_step(n):
        step_work(torch, n, 0, clock, 0.25)

    ns = {"steps": 200, "next_batch": next_batch, "train_step": train_step, "save_checkpoint": saved.append}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(recipe(), "docs/python.md", "exec"), ns)
    ns["mon"].close()
    free = ns["mon"].last.device_free
    want = fitted(free + 3 * GIB, WEIGHTS, PER_SAMPLE)
    assert saved == ["step0.pt"] and sizes == [64] + [want] * 199 and 0 < want < 64


def test_import_gpumon_imports_no_trainer(tmp_path):
    code = ("import sys, gpumon, gpumon.lightning, gpumon.hf\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('lightning', 'pytorch_lightning', 'transformers', 'torch')))\n"
            "gpumon.lightning.GPUMonitorCallback, gpumon.hf.GPUMonitorCallback\n"
            "print('lightning.pytorch' in sys.modules, 'transformers' in sys.modules)\n")
    env = child_env(tmp_path, h200())
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"]] + FAKES)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["[]", "True True"], r.stdout
