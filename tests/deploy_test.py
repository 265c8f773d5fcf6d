"""The deployment files (deploy/) hold together: the DaemonSet asks for what NVML
and process attribution need and no more, every command line they give the
agent is one this build accepts, and the container image installs the Debian
runtime package of every shared library the binary needs.

    /usr/bin/python3 tests/deploy_test.py GPUTRIAGE_BINARY
"""
import configparser
import re
import subprocess
import sys
from pathlib import Path

import yaml

root = Path(__file__).resolve().parent.parent
binary = sys.argv[1]
agent_help = subprocess.run([binary, "agent", "--help"], capture_output=True, text=True, check=True).stdout


def check_agent_args(args, where):
    assert args[0] == "agent", (where, args)
    for flag in [a.split("=")[0] for a in args[1:] if a.startswith("--")]:
        assert re.search(rf"(^|\s|,){re.escape(flag)}\b", agent_help), f"{where}: {flag} is not an agent option"


# Kubernetes DaemonSet.
ds = yaml.safe_load((root / "deploy/kubernetes/gputriage-agent-daemonset.yaml").read_text())
assert ds["apiVersion"] == "apps/v1" and ds["kind"] == "DaemonSet", ds["kind"]
spec = ds["spec"]
assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
pod = spec["template"]["spec"]
assert pod["hostPID"] is True, "NVML's pids are the host's: hostPID is needed to read their cgroups"
assert not pod.get("hostNetwork"), "the agent needs no host network"
# One host path, read-only: the kubelet's pod-resources socket (pod names).
(volume,) = pod.get("volumes", [])
assert volume["hostPath"]["path"] == "/var/lib/kubelet/pod-resources", volume
mounts = {m["name"]: m for m in pod["containers"][0].get("volumeMounts", [])}
assert mounts[volume["name"]]["readOnly"] is True and mounts[volume["name"]]["mountPath"] == "/var/lib/kubelet/pod-resources", mounts
assert pod.get("automountServiceAccountToken") is False
(container,) = pod["containers"]
check_agent_args(container["args"], "DaemonSet")
env = {e["name"]: e for e in container["env"]}
assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
assert env["NVIDIA_DRIVER_CAPABILITIES"]["value"] == "utility"
assert "NODE_NAME" in agent_help, "--hostname must read $NODE_NAME"
(port,) = container["ports"]
assert port["containerPort"] == 9401 and port["name"] == "metrics"
for probe in ("livenessProbe", "readinessProbe"):
    assert container[probe]["httpGet"]["path"] == "/healthz", probe
sc = container["securityContext"]
assert sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
# Two capabilities, measured (see the manifest): other users' /proc/PID/environ and fd/N for step markers.
assert sc["capabilities"]["drop"] == ["ALL"] and sorted(sc["capabilities"].get("add", [])) == ["DAC_READ_SEARCH", "SYS_PTRACE"], sc
assert spec["updateStrategy"]["rollingUpdate"]["maxUnavailable"] == "10%", spec["updateStrategy"]
assert "nvidia.com/gpu" not in str(container.get("resources", {})), "monitoring must not take a GPU from the jobs"
print("ok: DaemonSet: hostPID for attribution, no host network, only the pod-resources directory read-only, all capabilities dropped"
      " but DAC_READ_SEARCH and SYS_PTRACE, not privileged, /healthz probes, NODE_NAME, no GPU requested, 10 % unavailable at most"
      " in a rollout; its args are agent options")

# PodMonitor: the agent's namespace/pod labels (the job's) must win over the target's.
pm = yaml.safe_load((root / "deploy/kubernetes/gputriage-agent-podmonitor.yaml").read_text())
assert pm["kind"] == "PodMonitor" and pm["spec"]["selector"]["matchLabels"] == spec["selector"]["matchLabels"], pm
(endpoint,) = pm["spec"]["podMetricsEndpoints"]
assert endpoint["honorLabels"] is True and endpoint["port"] == "metrics", endpoint
# NetworkPolicy: ingress to the agents' port only.
np = yaml.safe_load((root / "deploy/kubernetes/gputriage-agent-networkpolicy.yaml").read_text())
assert np["kind"] == "NetworkPolicy" and np["spec"]["podSelector"]["matchLabels"] == spec["selector"]["matchLabels"], np
assert np["spec"]["policyTypes"] == ["Ingress"] and [p["port"] for r in np["spec"]["ingress"] for p in r["ports"]] == [9401], np
print("ok: PodMonitor with honorLabels; NetworkPolicy admitting only the metrics port")

# systemd unit.
unit = configparser.ConfigParser(strict=False, interpolation=None)
unit.optionxform = str
unit.read_string((root / "deploy/systemd/gputriage-agent.service").read_text())
exec_start = unit["Service"]["ExecStart"].split()
assert exec_start[0].endswith("/gputriage"), exec_start
check_agent_args(exec_start[1:], "systemd unit")
for key, value in {"NoNewPrivileges": "yes", "DynamicUser": "yes", "ProtectSystem": "strict", "KillSignal": "SIGTERM"}.items():
    assert unit["Service"].get(key) == value, (key, unit["Service"].get(key))
assert unit["Service"].get("CapabilityBoundingSet") == ""
print("ok: systemd unit: a dynamic user without capabilities, read-only system; its ExecStart is an agent command line")

# Container image: the wheel's own CLI, built by scripts/build_wheel.sh, in a runtime that adds only CA certificates.
dockerfile = (root / "deploy/container/Dockerfile").read_text()
froms = re.findall(r"^FROM (\S+)", dockerfile, re.M)
assert len(froms) == 2 and all(re.search(r"@sha256:[0-9a-f]{64}$", f) for f in froms), f"base images not pinned by digest: {froms}"
build, runtime = dockerfile.split("FROM " + froms[1], 1)
assert "bash scripts/build_wheel.sh" in build, "the image's build stage does not build the wheel"
copied = re.findall(r"^COPY --from=build (\S+) /usr/local/bin/gputriage$", runtime, re.M)
assert copied == ["/wheel/gputriage/_bin/gputriage"], f"the image's gputriage is not the wheel's CLI: {copied}"
assert re.search(r"^USER 65534:65534$", runtime, re.M), "the image does not drop root by default"
ignored = (root / ".dockerignore").read_text().split()
assert {"build", "node_modules", ".venv", ".git"} <= set(ignored), ignored
cmd = re.search(r'CMD \[(.*)\]', runtime).group(1)
check_agent_args([a.strip().strip('"') for a in cmd.split(",")], "Dockerfile CMD")
# The wheel's CLI (a portable build: the release tree) takes only glibc's libraries and libgcc_s
# from the system, which every Debian image has; a development build (the sanitizer tree) links
# Debian's shared libraries and is not what the image holds.
version = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True).stdout
if "manylinux_2_28" in version:
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", subprocess.run(
        ["readelf", "-d", binary], capture_output=True, text=True, check=True).stdout)
    system = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "libgcc_s.so.1",
              "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}
    assert set(needed) <= system, f"the portable CLI needs libraries beyond glibc and libgcc_s: {set(needed) - system}"
    print(f"ok: Dockerfile: the image's CLI is the wheel's; it needs only {sorted(needed)}; its CMD is an agent command line")
else:
    print("ok: Dockerfile: the image's CLI is the wheel's; its CMD is an agent command line "
          "(this binary is a development build: the libraries check runs on the release build's)")
