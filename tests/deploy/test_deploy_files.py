# SPDX-License-Identifier: MIT
"""deploy/ as shipped: the DaemonSet runs the image the Dockerfile builds (its entrypoint, hostPID,
/var/log/pods read-only, every GPU without taking one from the device plugin); the systemd unit
listens on loopback; the Grafana dashboard declares no input it does not use and uses no variable
it does not declare; every alert rule has a promtool unit test. The queries and rules against a
real Prometheus are tests/cluster's."""
import json
import os
import re

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEPLOY = os.path.join(ROOT, "deploy")


def read(*path):
    return open(os.path.join(DEPLOY, *path)).read()


def test_daemonset_runs_the_image():
    docs = [d for d in yaml.safe_load_all(read("kubernetes", "gpumon.yaml")) if d]
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    assert spec["hostPID"] is True
    (c,) = spec["containers"]
    assert c["image"].endswith("/gpumon:1.0.0")
    assert "-t registry.example.com/gpumon:1.0.0" in read("kubernetes", "gpumon.yaml")  # how it is built
    assert "command" not in c and c["args"][0] != "serve"  # the image's entrypoint is `gpumon serve`
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    assert mounts["/var/log/pods"]["readOnly"] is True
    vols = {v["name"]: v for v in spec["volumes"]}
    assert vols[mounts["/var/log/pods"]["name"]]["hostPath"]["path"] == "/var/log/pods"
    env = {e["name"]: e["value"] for e in c["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all" and env["NVIDIA_DRIVER_CAPABILITIES"] == "utility"
    assert env["GPUMON_PODS_DIR"] == "/var/log/pods"
    assert "nvidia.com/gpu" not in json.dumps(c.get("resources", {}))  # takes no GPU from the plugin
    sc = {**spec.get("securityContext", {}), **c["securityContext"]}
    assert sc["runAsNonRoot"] is True and sc["runAsUser"] == 19400  # the image's user
    assert re.search(r"^USER 19400:19400$", read("docker", "Dockerfile"), re.M)
    port = c["ports"][0]["containerPort"]
    assert f"0.0.0.0:{port}" in c["args"]


def test_systemd_unit_on_loopback():
    unit = read("systemd", "gpumon-serve.service")
    execs = [l for l in unit.splitlines() if l.startswith("ExecStart=")]
    assert execs == ["ExecStart=/usr/local/bin/gpumon serve --listen 127.0.0.1:19400"], execs
    assert "--insecure-listen" not in unit
    # the remote way is written down: TLS and basic auth through credentials
    assert "--tls-cert ${CREDENTIALS_DIRECTORY}/cert.pem" in unit and "--basic-auth-file" in unit


def test_dashboard_inputs_and_variables():
    text = read("grafana", "gpumon-dashboard.json")
    d = json.loads(text)
    declared_inputs = {i["name"] for i in d.get("__inputs", [])}
    used_inputs = set(re.findall(r"\$\{(DS_[A-Z0-9_]+)\}", text))
    assert declared_inputs == used_inputs, (declared_inputs, used_inputs)
    variables = {v["name"] for v in d["templating"]["list"]}
    builtin = {"__interval", "__rate_interval", "__range", "__all"}
    used = set(re.findall(r"\$\{?(\w+)", text)) - builtin
    assert used <= variables, used - variables
    for v in variables:  # and every variable declared is used somewhere else than its own definition
        assert text.count(f"${v}") + text.count(f"${{{v}}}") > 1 or v == "datasource", v
    for p in d["panels"]:
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        for t in p["targets"]:
            assert t["datasource"]["uid"] == "${datasource}", p["title"]
    titles = " ".join(p["title"] for p in d["panels"])
    for want in ("per pod", "per Slurm job", "per user"):
        assert want in titles, want


def test_every_alert_has_a_unit_test():
    rules = yaml.safe_load(read("prometheus", "gpumon-rules.yml"))
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r}
    tests = yaml.safe_load(read("prometheus", "gpumon-rules.test.yml"))
    tested = {a["alertname"] for t in tests["tests"] for a in t.get("alert_rule_test", []) if a["exp_alerts"]}
    assert alerts == tested, alerts ^ tested
