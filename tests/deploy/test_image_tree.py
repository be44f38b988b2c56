# SPDX-License-Identifier: MIT
"""The image of deploy/docker/Dockerfile without a container engine: the tree its build stage
installs (deploy/docker/stage.sh, the same script) runs from an otherwise empty root as the image's
non-root user — `gpumon --version`, and `gpumon serve` against the fake NVML, scraped once over HTTP
and once over TLS — with
only the shared libraries the loader asks for, each of which the runtime stage installs (a package
it names, one of their dependencies, or one every Debian 12 base has).

Where a container engine and the debian:12 images are available, build the image itself instead:
`docker build -f deploy/docker/Dockerfile .` (deploy/README.md).

Environment: GPUMON_BUILD_DIR (a configured and built tree: ctest's), FAKE_NVML_LIB; root (chroot)."""
import os
import re
import shutil
import subprocess
import time
import urllib.request

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DOCKERFILE = os.path.join(ROOT, "deploy/docker/Dockerfile")
STAGE = os.path.join(ROOT, "deploy/docker/stage.sh")
BUILD_DIR = os.environ.get("GPUMON_BUILD_DIR", os.path.join(ROOT, "build"))
FAKE_NVML_LIB = os.environ.get("FAKE_NVML_LIB", os.path.join(BUILD_DIR, "tests/fake_nvml/libnvidia-ml-fake.so"))
IMAGE_USER = "19400:19400"


def dockerfile():
    return open(DOCKERFILE).read()


def runtime_packages():
    """The packages the runtime stage installs (its apt-get install line)."""
    run_stage = dockerfile().split("FROM debian:12-slim", 1)[1]
    m = re.search(r"apt-get install -y --no-install-recommends(.*?)\\\n\s*&& rm -rf", run_stage, re.S)
    assert m, "no apt-get install in the runtime stage"
    return m.group(1).replace("\\", " ").split()


def test_dockerfile_shape():
    text = dockerfile()
    assert re.search(r"^FROM debian:12 AS build$", text, re.M)
    assert re.search(r"^FROM debian:12-slim$", text, re.M)
    assert "deploy/docker/stage.sh /build /staging" in text and "COPY --from=build /staging/ /" in text
    assert re.search(r"^USER 19400:19400$", text, re.M), "the image runs as a non-root user"
    assert re.search(r'^ENTRYPOINT \["/usr/local/bin/gpumon", "serve"\]$', text, re.M)
    cmd = re.search(r"^CMD (.*)$", text, re.M).group(1)
    assert "--insecure-listen" not in cmd and "127.0.0.1" in cmd


def loader_libraries(paths):
    """Every file the dynamic loader maps for these programs and libraries (ldd's answer)."""
    libs = set()
    for p in paths:
        out = subprocess.run(["ldd", p], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            m = re.search(r"(?:=>\s*)?(/\S+)\s+\(0x", line)
            if m:
                libs.add(m.group(1))
    return libs


def system_library(soname):
    out = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True, check=True).stdout
    m = re.search(rf"^\s+{re.escape(soname)} \(libc6,x86-64\) => (\S+)$", out, re.M)
    assert m, f"{soname} is not installed here (make deps installs its Debian package)"
    return m.group(1)


def copy_into(root, path):
    """Copies path (following links) to the same place under root, and the link itself too."""
    dest = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    if not os.path.exists(dest):
        shutil.copy2(os.path.realpath(path), dest)
    real = os.path.realpath(path)
    if real != path:
        rdest = os.path.join(root, real.lstrip("/"))
        os.makedirs(os.path.dirname(rdest), exist_ok=True)
        if not os.path.exists(rdest):
            shutil.copy2(real, rdest)


def package_of(path):
    for p in (path, os.path.realpath(path)):
        r = subprocess.run(["dpkg", "-S", p], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split(":")[0]
        # /lib is /usr/lib on Debian 12 (merged /usr): dpkg knows one of the two names
        alt = p[4:] if p.startswith("/usr/lib") else "/usr" + p if p.startswith("/lib") else None
        r = subprocess.run(["dpkg", "-S", alt], capture_output=True, text=True) if alt else None
        if r and r.returncode == 0:
            return r.stdout.split(":")[0]
    return None


def installed_by_runtime_stage(packages):
    """The packages the runtime stage's apt-get brings (its list and their dependencies)."""
    out = subprocess.run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
                          "--no-breaks", "--no-replaces", "--no-enhances", *packages],
                         capture_output=True, text=True, check=True).stdout
    return {l.strip() for l in out.splitlines() if not l.startswith(" ")} | set(packages)


@pytest.fixture
def staged(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("chroot needs root: run as root (CI does)")
    gpumon = os.path.join(BUILD_DIR, "cli/gpumon")
    if not os.path.exists(gpumon):
        pytest.skip(f"no built tree at {BUILD_DIR}: set GPUMON_BUILD_DIR")
    staging = tmp_path / "staging"
    subprocess.run([STAGE, BUILD_DIR, str(staging)], check=True)
    return staging


def test_installed_tree_runs_from_an_empty_root(staged, tmp_path):
    if os.environ.get("GPUMON_SANITIZED", "").upper() in ("ON", "1", "TRUE", "YES"):
        pytest.skip("a sanitizer build: its runtime needs a /proc the empty root has not, and the image is "
                    "built without one (make test's plain build runs this)")
    root = tmp_path / "root"
    shutil.copytree(staged, root, symlinks=True)
    os.chmod(root, 0o755)  # the image's user must walk /
    prog = os.path.join(root, "usr/local/bin/gpumon")
    lib = [os.path.join(root, "usr/local/lib", f) for f in os.listdir(root / "usr/local/lib") if f.startswith("libgpumon.so")]
    assert lib, os.listdir(root / "usr/local/lib")
    http = system_library("libevent_extra-2.1.so.7")  # loaded with dlopen when the exporter starts
    tls = system_library("libevent_openssl-2.1.so.7")  # and this when it serves TLS
    sql = system_library("libsqlite3.so.0")  # loaded with dlopen by the first recording
    curses = system_library("libncursesw.so.6")  # loaded with dlopen by watch's screen
    needed = loader_libraries([prog, http, tls, sql, curses])
    # the program finds its library in the staged tree (its RPATH $ORIGIN/../lib), nowhere else
    own = {n for n in needed if os.path.basename(n).startswith("libgpumon")}
    assert own and all(n.startswith(str(root)) for n in own), own
    needed = (needed - own) | {http, tls, sql, curses}
    pkgs = {n: package_of(n) for n in needed}
    allowed = installed_by_runtime_stage(runtime_packages())
    missing = {n: p for n, p in pkgs.items() if p not in allowed}
    assert missing == {}, f"libraries the runtime stage does not install: {missing}"
    for n in needed:
        copy_into(root, n)
    # the test double of the driver, where the NVIDIA toolkit would mount the real one
    fake_dir = root / "fake"
    fake_dir.mkdir()
    shutil.copy2(FAKE_NVML_LIB, fake_dir / "libnvidia-ml.so.1")
    for n in loader_libraries([FAKE_NVML_LIB]):
        copy_into(root, n)
    (fake_dir / "h200.scn").write_text(
        'gpu 0 name="NVIDIA H200" uuid=GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51 total=150754820096 '
        "reserved=644939776 used=10GiB\nproc 0 4242 used=10GiB\n")
    os.chmod(fake_dir, 0o755)
    assert set(os.listdir(root)) <= {"fake", "lib", "lib64", "usr"}, os.listdir(root)  # nothing else

    chroot = [shutil.which("chroot") or "/usr/sbin/chroot", f"--userspec={IMAGE_USER}", str(root)]
    env = {"PATH": "/usr/local/bin:/usr/bin", "LC_ALL": "C"}
    r = subprocess.run(chroot + ["/usr/local/bin/gpumon", "--version"], capture_output=True, text=True, env=env,
                       timeout=30)
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        version = re.search(r"project\(gpumon VERSION ([0-9.]+)", f.read()).group(1)
    assert r.returncode == 0 and f"gpumon {version} (libgpumon {version})" in r.stdout, (r.returncode, r.stdout,
                                                                                        r.stderr)

    env.update(GPUMON_NVML_LIBRARY="/fake/libnvidia-ml.so.1", FAKE_NVML_SCENARIO="/fake/h200.scn")
    p = subprocess.Popen(chroot + ["/usr/local/bin/gpumon", "serve", "--listen", "127.0.0.1:0"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stderr.readline()
        m = re.search(r"serving http://(\S+)/metrics", line)
        assert m, line + (p.stderr.read() if p.poll() is not None else "")
        with urllib.request.urlopen(f"http://{m.group(1)}/metrics", timeout=10) as resp:
            body = resp.read().decode()
        assert re.search(r'^gpumon_memory_used_bytes\{gpu="0",uuid="GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51".*\} '
                         r"10737418240$", body, re.M), body[:2000]
        # no /proc in the root: the process is another PID namespace's, counted, not guessed
        assert re.search(r'^gpumon_owner_processes\{gpu="0",.*owner_kind="unresolved"\} 1$', body, re.M)
        with urllib.request.urlopen(f"http://{m.group(1)}/healthz", timeout=10) as resp:
            assert resp.status == 200
    finally:
        p.terminate()
        assert p.wait(timeout=10) == 0

    # TLS with only what the image has: libevent_openssl and OpenSSL load, the handshake is made
    if not shutil.which("openssl"):
        return
    import ssl
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-days", "1", "-subj", "/CN=localhost", "-keyout", str(fake_dir / "key.pem"), "-out",
                    str(fake_dir / "cert.pem")], check=True, capture_output=True)
    for f in ("key.pem", "cert.pem"):
        os.chmod(fake_dir / f, 0o644)
    p = subprocess.Popen(chroot + ["/usr/local/bin/gpumon", "serve", "--listen", "127.0.0.1:0", "--tls-cert",
                                   "/fake/cert.pem", "--tls-key", "/fake/key.pem"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stderr.readline()
        m = re.search(r"serving https://(\S+)/metrics", line)
        assert m, line + (p.stderr.read() if p.poll() is not None else "")
        ctx = ssl.create_default_context(cafile=str(fake_dir / "cert.pem"))
        ctx.check_hostname = False
        with urllib.request.urlopen(f"https://{m.group(1)}/metrics", timeout=10, context=ctx) as resp:
            assert "gpumon_memory_used_bytes" in resp.read().decode()
    finally:
        p.terminate()
        assert p.wait(timeout=10) == 0
