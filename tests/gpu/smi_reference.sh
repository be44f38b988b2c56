#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# smi_reference.sh — what nvidia-smi says on this machine, kept as reference files for gpumon's
# fixtures and the fake driver's scenarios: the field help, `-q` (text and XML), `-L`, each
# --query-gpu field alone (with and without units), health and MIG fields, and nvidia-smi `-l` logs
# of --query-gpu and --query-compute-apps while a torch job changes its memory. From the
# repository root:   OUT=gpu-out bash tests/gpu/smi_reference.sh      (about 30 s)
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT/smi"
S=$OUT/smi
PY=${PYTHON:-python3}
nvidia-smi --help-query-gpu >"$S/help-query-gpu.txt" 2>&1
nvidia-smi --help-query-compute-apps >"$S/help-query-compute-apps.txt" 2>&1
nvidia-smi --help-query-remapped-rows >"$S/help-query-remapped-rows.txt" 2>&1
nvidia-smi --help-query-retired-pages >"$S/help-query-retired-pages.txt" 2>&1
nvidia-smi -q >"$S/q.txt" 2>&1
nvidia-smi -q -x >"$S/q.xml" 2>&1
nvidia-smi -L >"$S/L.txt" 2>&1
nvidia-smi >"$S/main.txt" 2>&1
nvidia-smi --query-remapped-rows=gpu_uuid,remapped_rows.correctable,remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure --format=csv >"$S/remapped-rows.csv" 2>&1
nvidia-smi --query-retired-pages=gpu_uuid,retired_pages.address,retired_pages.cause --format=csv >"$S/retired-pages.csv" 2>&1
FIELDS="timestamp power.limit enforced.power.limit power.default_limit power.min_limit power.max_limit power.management fan.speed pstate temperature.memory temperature.gpu clocks.max.sm clocks.max.mem clocks.max.memory clocks.max.graphics clocks.current.sm clocks.sm clocks.current.memory clocks.mem serial vbios_version compute_mode persistence_mode pcie.link.gen.current pcie.link.gen.max pcie.link.width.current pcie.link.width.max mig.mode.current mig.mode.pending ecc.mode.current ecc.mode.pending ecc.errors.corrected.volatile.total ecc.errors.corrected.aggregate.total ecc.errors.uncorrected.volatile.total ecc.errors.uncorrected.aggregate.total ecc.errors.corrected.volatile.device_memory ecc.errors.uncorrected.volatile.device_memory ecc.errors.corrected.aggregate.device_memory ecc.errors.uncorrected.aggregate.device_memory ecc.errors.corrected.volatile.dram ecc.errors.uncorrected.volatile.dram ecc.errors.corrected.volatile.sram ecc.errors.uncorrected.volatile.sram retired_pages.single_bit_ecc.count retired_pages.double_bit.count retired_pages.pending remapped_rows.correctable remapped_rows.uncorrectable remapped_rows.pending remapped_rows.failure name index uuid serial count driver_version pci.bus_id memory.total memory.used memory.free memory.reserved utilization.gpu power.draw gpu_name gpu_bus_id gpu_serial"
for f in $FIELDS; do
	printf '%s\t' "$f" >>"$S/fields.tsv"
	nvidia-smi --query-gpu="$f" --format=csv 2>&1 | tr '\n' '\t' >>"$S/fields.tsv"
	nvidia-smi --query-gpu="$f" --format=csv,noheader,nounits 2>&1 | tr '\n' '\t' >>"$S/fields.tsv"
	echo >>"$S/fields.tsv"
done
# -l logs while a torch job takes memory in steps (512 MiB a second, then frees it all), started
# once the job has its CUDA context (importing torch takes seconds), so that the logs see it move
READY=$(mktemp)
READY=$READY "$PY" -c '
import os, time, torch
x = torch.empty(1 << 20, device="cuda"); torch.cuda.synchronize()
open(os.environ["READY"], "w").write("1")
time.sleep(1.5)
xs = []
for i in range(6):
    xs.append(torch.empty(512 << 20, dtype=torch.uint8, device="cuda")); torch.cuda.synchronize()
    time.sleep(1)
del xs; torch.cuda.empty_cache(); time.sleep(2)
' &
job=$!
for _ in $(seq 300); do [ -s "$READY" ] && break; sleep 0.1; done
timeout 10 nvidia-smi --query-gpu=timestamp,memory.used --format=csv -l 1 >"$S/log-gpu-timestamp-memused.csv" 2>&1 &
timeout 10 nvidia-smi --query-gpu=timestamp,index,uuid,memory.total,memory.used,memory.free --format=csv,nounits -l 1 >"$S/log-gpu-nounits.csv" 2>&1 &
timeout 10 nvidia-smi --query-compute-apps=timestamp,gpu_uuid,pid,process_name,used_memory --format=csv -l 1 >"$S/log-apps.csv" 2>&1 &
timeout 10 nvidia-smi --query-gpu=timestamp,name,pci.bus_id,driver_version,pstate,temperature.gpu,utilization.gpu,utilization.memory,memory.total,memory.free,memory.used --format=csv -l 1 >"$S/log-gpu-wide.csv" 2>&1 &
wait
rm -f "$READY"
ls -l "$S"
