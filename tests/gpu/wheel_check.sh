#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# wheel_check.sh — the pip wheel on the GPU machine's own Python, from the repository root:
#   bash tests/gpu/wheel_check.sh                          (results in ./gpu-out, or in $OUT)
#   WHEEL=.whl/gpumon-1.0.0-cp39-abi3-manylinux_2_34_x86_64.whl bash tests/gpu/wheel_check.sh
# Builds the wheel from a clean copy of this tree with the machine's Python ($PYTHON, default
# python3): `pip wheel --no-build-isolation --no-index`, or `python -m build --no-isolation` where
# pip is missing; CMake finds jansson, yajl, sqlite3, protobuf-c, ncurses and Python.h under .deps through
# deps.sh (tests/gpu/README.md; send .deps along). WHEEL= installs a carried wheel instead.
# Then, with no .deps in LD_LIBRARY_PATH and from another directory: installs it into a fresh
# venv, imports it (the bundled libraries from gpumon.libs), GPUMonitor's sample against
# nvidia-smi, `gpumon list` from
# the venv against `nvidia-smi -L`, GPUMonitor(framework="torch") against torch's own counter in a
# venv that sees the system's torch (skipped without torch), and `gpumon serve` from the venv
# scraped once (libevent from the system, else from .deps/libevent alone).
# Prints PASS/FAIL per check; files in $OUT: wheel_check.txt (log), wheel_check.json,
# wheel_contents.txt, and the wheel. Exit status 0 when every check passed. About 1 minute.
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
PY=${PYTHON:-python3}
ROOT=$PWD
start=$(date +%s)
log=$OUT/wheel_check.txt
: >"$log"
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT

# deps.sh adds .deps to LD_LIBRARY_PATH (protoc-c needs it while building); everything after the
# build runs with the machine's own LD_LIBRARY_PATH (torch may need it), none of .deps in it
MACHINE_LD_LIBRARY_PATH=${LD_LIBRARY_PATH-}
. tests/gpu/deps.sh
DEPS_LD_LIBRARY_PATH=${LD_LIBRARY_PATH-}
if [ -n "$MACHINE_LD_LIBRARY_PATH" ]; then
	export LD_LIBRARY_PATH=$MACHINE_LD_LIBRARY_PATH
else
	unset LD_LIBRARY_PATH
fi

fails=0
results=()
say() { echo "$*" | tee -a "$log"; }
check() { # check NAME STATUS DETAIL
	say "$2 $1: $3"
	results+=("$1" "$2" "$3")
	[ "$2" = FAIL ] && fails=$((fails + 1))
	return 0
}
finish() {
	"$PY" - "$OUT/wheel_check.json" "$(($(date +%s) - start))" "${results[@]}" <<'PYEOF'
import json, sys
path, secs, rest = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
checks = {rest[i]: {"status": rest[i + 1], "detail": rest[i + 2]} for i in range(0, len(rest), 3)}
json.dump({"seconds": secs, "checks": checks}, open(path, "w"), indent=1)
PYEOF
	say "total $(($(date +%s) - start)) s, $fails failed; files in $OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
	[ "$fails" -eq 0 ]
	exit $?
}

say "== $("$PY" -VV 2>&1 | head -1); $(ldd --version 2>&1 | head -1); $(cmake --version 2>/dev/null | head -1)"

# ---- the wheel: carried, or built from a clean copy ------------------------------------------------
if [ -n "${WHEEL:-}" ]; then
	if [ ! -f "$WHEEL" ]; then
		check build FAIL "WHEEL=$WHEEL: no such file"
		finish
	fi
	whl=$WHEEL
	check build PASS "carried $(basename "$whl")"
else
	src=$tmp/src
	mkdir -p "$src"
	if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then # what a clone has, with this tree's changes
		git ls-files -z --cached --others --exclude-standard | "$PY" -c '
import os, shutil, sys
for rel in filter(None, sys.stdin.buffer.read().decode().split("\0")):
    if os.path.isfile(rel):  # not a file deleted and not yet committed
        os.makedirs(os.path.join(sys.argv[1], os.path.dirname(rel)), exist_ok=True)
        shutil.copy2(rel, os.path.join(sys.argv[1], rel))' "$src"
	else # a copy without .git: the tree less what builds and runs leave
		tar --exclude=./.git --exclude=./.deps --exclude='./build*' --exclude=./gpu-out --exclude=./.whl \
			--exclude=./dist --exclude='*.egg-info' --exclude=__pycache__ --exclude=./python/gpumon.libs \
			--exclude=./python/gpumon/bin --exclude='./python/gpumon/*.so' -cf - . | tar -C "$src" -xf -
	fi
	cmake_args=$(printf '%q ' "${prefix_args[@]}")
	t0=$(date +%s)
	mkdir -p "$tmp/dist"
	if "$PY" -m pip --version >/dev/null 2>&1; then
		how="pip wheel --no-build-isolation"
		(cd "$src" && env LD_LIBRARY_PATH="$DEPS_LD_LIBRARY_PATH" GPUMON_CMAKE_ARGS="$cmake_args" \
			PIP_CONFIG_FILE=/dev/null timeout 150 "$PY" -m pip wheel --no-build-isolation --no-index --no-deps \
			--no-cache-dir -w "$tmp/dist" .) >"$tmp/build.log" 2>&1
	else
		how="python -m build --no-isolation"
		(cd "$src" && env LD_LIBRARY_PATH="$DEPS_LD_LIBRARY_PATH" GPUMON_CMAKE_ARGS="$cmake_args" \
			timeout 150 "$PY" -m build --wheel --no-isolation --skip-dependency-check --outdir "$tmp/dist" .) \
			>"$tmp/build.log" 2>&1
	fi
	rc=$?
	cat "$tmp/build.log" >>"$log"
	whl=$(ls "$tmp"/dist/gpumon-*.whl 2>/dev/null | head -1)
	if [ $rc -ne 0 ] || [ -z "$whl" ]; then
		tail -n 25 "$tmp/build.log"
		check build FAIL "$how exited $rc (log: $log)"
		finish
	fi
	cp "$whl" "$OUT/"
	check build PASS "$how: $(basename "$whl"), $(stat -c %s "$whl") bytes, $(($(date +%s) - t0)) s"
fi

# ---- its name and contents -------------------------------------------------------------------------
"$PY" - "$whl" "$OUT/wheel_contents.txt" >"$tmp/tag.txt" <<'PYEOF'
import os, re, sys, zipfile
whl, listing = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(whl) as z, open(listing, "w") as f:
    total = 0
    for i in z.infolist():
        f.write(f"{i.file_size:>10}  {oct(i.external_attr >> 16 & 0o777)}  {i.filename}\n")
        total += i.file_size
    f.write(f"{total:>10}  unpacked; {os.path.getsize(whl)} bytes the wheel\n")
m = re.search(r"-(cp\d+)-(abi3)-(manylinux_(\d+)_(\d+)_\w+|linux_\w+)\.whl$", os.path.basename(whl))
glibc = os.confstr("CS_GNU_LIBC_VERSION").split()[-1]
if not m:
    print(f"FAIL not an abi3 wheel: {os.path.basename(whl)}")
elif not m.group(4):
    print(f"FAIL {m.group(1)}-abi3 but tagged {m.group(3)}, not manylinux (readelf missing when it was built?)")
elif (int(m.group(4)), int(m.group(5))) > tuple(int(x) for x in glibc.split(".")[:2]):
    print(f"FAIL {m.group(3)} needs a newer glibc than this machine's {glibc}")
else:
    print(f"PASS {m.group(1)}-abi3-{m.group(3)} (this machine's glibc {glibc})")
PYEOF
read -r st detail <"$tmp/tag.txt"
check tag "${st:-FAIL}" "${detail:-could not read the wheel}"

# ---- a fresh venv; pip from inside it, else the system's pip aimed at it ---------------------------
venv_with() { # venv_with DIR [--system-site-packages]
	local dir=$1
	shift
	if "$PY" -m venv "$@" "$dir" >>"$log" 2>&1; then
		PIP_CONFIG_FILE=/dev/null timeout 60 "$dir/bin/python" -m pip install --no-index --no-cache-dir "$whl" >>"$log" 2>&1
	else
		rm -rf "$dir"
		"$PY" -m venv --without-pip "$@" "$dir" >>"$log" 2>&1 &&
			PIP_CONFIG_FILE=/dev/null timeout 60 "$PY" -m pip --python "$dir/bin/python" install --no-index \
				--no-cache-dir "$whl" >>"$log" 2>&1
	fi
}
venv=$tmp/venv
if venv_with "$venv"; then
	check install PASS "into a venv of $("$venv/bin/python" -c 'import sys; print(sys.version.split()[0])')"
else
	check install FAIL "venv or pip install failed (log: $log)"
	finish
fi
mkdir -p "$tmp/elsewhere"

# ---- import, the bundled libraries, a sample against nvidia-smi -------------------------------------
smi_total=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 2>/dev/null | tr -d ' ')
(cd "$tmp/elsewhere" && timeout 60 "$venv/bin/python" - "$venv" "${smi_total:-}" <<'PYEOF') >"$tmp/import.txt" 2>>"$log"
import os, sys, sysconfig
venv, smi_total = sys.argv[1], sys.argv[2]
site = sysconfig.get_paths()["platlib"]
import gpumon
ok = gpumon.__file__ == os.path.join(site, "gpumon", "__init__.py")
print(("PASS" if ok else "FAIL") + f" import gpumon {gpumon.__version__} from {os.path.dirname(gpumon.__file__)}")
mon = gpumon.GPUMonitor(device=0, framework="none", logger=False)
s = mon.sample()
mon.close()
libs = {l.split()[-1] for l in open("/proc/self/maps") if ".so" in l.rsplit("/", 1)[-1]}
want = ["libgpumon.so.1", "libjansson.so.4", "libyajl.so.2", "libsqlite3.so.0", "libprotobuf-c.so.1"]
where = {n: next((p for p in libs if os.path.basename(p) == n), None) for n in want}
bad = {n: p for n, p in where.items() if not p or os.path.dirname(p) != os.path.join(site, "gpumon.libs")}
print(("FAIL" if bad else "PASS") + " libs " + (f"not from gpumon.libs: {bad}" if bad else
      f"{', '.join(want)} from {os.path.join(site, 'gpumon.libs')}"))
mib = s.device_total / (1 << 20) if s.device_total is not None else None
ok = mib is not None and smi_total and abs(mib - float(smi_total)) <= 1
print(("PASS" if ok else "FAIL") + f" sample GPU 0 total {mib} MiB, nvidia-smi {smi_total or '?'} MiB; used "
      f"{s.device_used}, process {s.process}, util {s.util_gpu}")
PYEOF
rc=$?
while read -r st name detail; do check "$name" "$st" "$detail"; done <"$tmp/import.txt"
[ $rc -eq 0 ] ||
	check import-run FAIL "the venv's Python exited $rc after $(wc -l <"$tmp/import.txt") of 3 checks (log: $log)"

# ---- `gpumon list` from the venv against nvidia-smi -L -----------------------------------------------
(cd "$tmp/elsewhere" && timeout 30 "$venv/bin/gpumon" list) >"$tmp/list.txt" 2>>"$log"
rc=$?
nvidia-smi -L 2>/dev/null | grep '^GPU ' >"$tmp/smi.txt"
if [ $rc -eq 0 ] && [ -s "$tmp/list.txt" ] && diff <(sort "$tmp/list.txt") <(sort "$tmp/smi.txt") >>"$log"; then
	check list PASS "$(wc -l <"$tmp/list.txt") GPU(s), as nvidia-smi -L: $(head -1 "$tmp/list.txt")"
else
	got=$(head -c 300 "$tmp/list.txt" | tr '\n' '|')
	check list FAIL "exit $rc; gpumon list: $got nvidia-smi -L: $(head -c 300 "$tmp/smi.txt" | tr '\n' '|')"
fi

# ---- torch: GPUMonitor(framework="torch") in a venv that sees the system's packages ------------------
if "$PY" -c 'import torch' >/dev/null 2>&1; then
	tvenv=$tmp/venv-torch
	# --system-site-packages gives the base interpreter's packages, not those of a venv the machine's
	# python may itself be (torch often lives in one): a .pth names $PY's own, after the venv's
	if venv_with "$tvenv" --system-site-packages &&
		"$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"]); print(sysconfig.get_paths()["platlib"])' \
			>"$("$tvenv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/zz-gpumon-check-system.pth"; then
		(cd "$tmp/elsewhere" && timeout 90 "$tvenv/bin/python" - <<'PYEOF') >"$tmp/torch.txt" 2>>"$log"
import os, sysconfig
import torch
import gpumon
site = sysconfig.get_paths()["platlib"]
if hasattr(torch, "empty"):
    x = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
else:  # tests/python/fake_torch, where this script is tried without a GPU
    torch._fake.alloc(256 << 20)
mon = gpumon.GPUMonitor(device=0, framework="torch", logger=False)
s = mon.sample()
mon.close()
want = torch.cuda.memory_allocated(0)
ok = gpumon.__file__.startswith(site) and s.allocated == want and s.process is not None
print(("PASS" if ok else "FAIL") + f" torch {torch.__version__}: allocated {s.allocated} (torch {want}), "
      f"reserved {s.reserved}, process {s.process}, gpumon from {os.path.dirname(gpumon.__file__)}")
PYEOF
		[ -s "$tmp/torch.txt" ] || echo "FAIL torch run failed (log: $log)" >"$tmp/torch.txt"
		read -r st detail <"$tmp/torch.txt"
		check torch "$st" "$detail"
	else
		check torch FAIL "venv --system-site-packages or pip install failed (log: $log)"
	fi
else
	check torch SKIP "no torch for $PY"
fi

# ---- `gpumon serve` from the venv: libevent through dlopen ----------------------------------------------
serve_env=()
evl="the system's"
if ! { /sbin/ldconfig -p || ldconfig -p; } 2>/dev/null | grep -q 'libevent_extra-2\.1\.so\.7 '; then
	d=$ROOT/.deps/libevent/usr/lib/x86_64-linux-gnu
	if [ -d "$d" ]; then
		serve_env=(LD_LIBRARY_PATH="$d")
		evl=".deps/libevent (no libevent-extra-2.1-7 on this system)"
	fi
fi
env "${serve_env[@]}" "$venv/bin/gpumon" serve --listen 127.0.0.1:0 2>"$tmp/serve.err" &
pids+=($!)
for _ in $(seq 100); do grep -q serving "$tmp/serve.err" && break; sleep 0.1; done
url=$(grep -o 'http://[^ ]*/metrics' "$tmp/serve.err" | head -1)
if [ -z "$url" ]; then
	check serve FAIL "with $evl libevent: $(head -c 400 "$tmp/serve.err")"
else
	sleep 0.5
	"$PY" - "$url" "${smi_total:-}" >"$tmp/serve.txt" 2>>"$log" <<'PYEOF'
import sys, urllib.request
url, smi_total = sys.argv[1], sys.argv[2]
page = urllib.request.urlopen(url, timeout=10).read().decode()
line = next((l for l in page.splitlines() if l.startswith("gpumon_memory_total_bytes{") and 'gpu="0"' in l), "")
mib = float(line.rsplit(" ", 1)[1]) / (1 << 20) if line else None
ok = mib is not None and smi_total and abs(mib - float(smi_total)) <= 1
print(("PASS" if ok else "FAIL") + f" {url}: GPU 0 total {mib} MiB (nvidia-smi {smi_total or '?'}), {len(page)} bytes")
PYEOF
	[ -s "$tmp/serve.txt" ] || echo "FAIL scrape of $url failed (log: $log)" >"$tmp/serve.txt"
	read -r st detail <"$tmp/serve.txt"
	check serve "$st" "$detail; libevent: $evl"
fi

finish
