#!/usr/bin/env python3
"""A stand-in dcgm-exporter for the record --dcgm-exporter tests (stdlib only).

  fake_dcgm_exporter.py PORT_FILE [fleet-legacy|fleet-ratio HOSTNAME]

Listens on 127.0.0.1 (a free port, written to PORT_FILE) and serves, in
dcgm-exporter's legacy text format:
  /metrics   two GPUs; GPU 0 alternates busy (97 %) and starved (0 %) on every
             request, an input-bound sawtooth; GPU 1 idles. Each reply differs.
  /static    the same reply every time (an exporter between collect intervals)
  /notdcgm   a Prometheus text without DCGM series
  /error     HTTP 500
  /huge      70 MiB of comment lines (no metrics page is that large)

With fleet-legacy or fleet-ratio, /metrics is instead one node (HOSTNAME) of
three H100s as a fleet's dcgm-exporter with its Kubernetes mapping on, under
the legacy names (GPU_UTIL in %, PROF fields as ratios, `Hostname`) or
DCGM 4.7 / exporter 4.9's (every one a 0-1 ratio, `hostname`):
  GPU 0  pod team-a/loader-starved: stop-and-go on the wall clock, 95 % for
         2 s of every 6 s and 0 % otherwise (31.7 % on average)
  GPU 1  pod team-b/bf16-pretrain: 99 %, SM 92 %, tensor 62 %, DRAM 40 %
  GPU 2  no pod, 0 %
"""
import http.server
import sys
import threading

requests = 0
lock = threading.Lock()

HEAD = """# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
"""


def labels(gpu):
    return ('gpu="%d",UUID="GPU-exp-%d",pci_bus_id="00000000:%02X:00.0",device="nvidia%d",'
            'modelName="NVIDIA A100-SXM4-80GB",Hostname="node1"' % (gpu, gpu, 0x18 + gpu, gpu))


def body(n):
    busy = 97 if n % 2 == 0 else 0
    out = HEAD
    out += "DCGM_FI_DEV_GPU_UTIL{%s} %d\n" % (labels(0), busy)
    out += "DCGM_FI_DEV_GPU_UTIL{%s} 0\n" % labels(1)
    out += "# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).\n# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n"
    out += "DCGM_FI_DEV_POWER_USAGE{%s} %.3f\n" % (labels(0), 380.0 if busy else 95.0)
    out += "DCGM_FI_DEV_POWER_USAGE{%s} %.3f\n" % (labels(1), 61.0 + (n % 3) * 0.001)
    return out


FLEET_NAMES = {
    # family: (legacy name, legacy scale from percent, 4.9 name)
    "util": ("DCGM_FI_DEV_GPU_UTIL", 1, "DCGM_FI_DEV_GPU_UTIL_RATIO"),
    "sm": ("DCGM_FI_PROF_SM_ACTIVE", 0.01, "DCGM_FI_PROF_SM_UTIL_RATIO"),
    "tensor": ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0.01, "DCGM_FI_PROF_TENSOR_UTIL_RATIO"),
    "dram": ("DCGM_FI_PROF_DRAM_ACTIVE", 0.01, "DCGM_FI_PROF_DRAM_UTIL_RATIO"),
    "power": ("DCGM_FI_DEV_POWER_USAGE", 1, "DCGM_FI_DEV_BOARD_POWER_WATTS"),
}


def fleet_body(generation, hostname, n):
    import time
    busy = int(time.time()) % 6 < 2
    gpus = [  # percent values (power in W), pod
        ({"util": 95 if busy else 0, "sm": 80 if busy else 0, "tensor": 40 if busy else 0,
          "dram": 30 if busy else 0, "power": 520 if busy else 110}, ("team-a", "loader-starved")),
        ({"util": 99, "sm": 92, "tensor": 62, "dram": 40, "power": 650}, ("team-b", "bf16-pretrain")),
        # Power moves a little on every page, as a real one does: no two pages are the same.
        ({"util": 0, "sm": 0, "tensor": 0, "dram": 0, "power": 70 + (n % 3) * 0.001}, None),
    ]
    host_label = "Hostname" if generation == "fleet-legacy" else "hostname"
    out = ""
    for family, (legacy, scale, renamed) in FLEET_NAMES.items():
        name = legacy if generation == "fleet-legacy" else renamed
        ratio = generation != "fleet-legacy" and family != "power"
        out += "# HELP %s %s\n# TYPE %s gauge\n" % (name, family, name)
        for i, (values, pod) in enumerate(gpus):
            labels = ('gpu="%d",UUID="GPU-%s-%d",pci_bus_id="00000000:%02X:00.0",device="nvidia%d",'
                      'modelName="NVIDIA H100 80GB HBM3",%s="%s"' % (i, hostname, i, 0x18 + i, i, host_label, hostname))
            if pod:
                labels += ',container="main",namespace="%s",pod="%s"' % pod
            value = values[family] * (0.01 if ratio else scale)
            out += "%s{%s} %g\n" % (name, labels, value)
    return out


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        global requests
        with lock:
            requests += 1
            n = requests
        if self.path == "/metrics" and len(sys.argv) > 3:
            text, code = fleet_body(sys.argv[2], sys.argv[3], n), 200
        elif self.path == "/metrics":
            text, code = body(n), 200
        elif self.path == "/static":
            text, code = body(0), 200
        elif self.path == "/huge":
            text, code = ("# " + "x" * 1022 + "\n") * (70 * 1024), 200
        elif self.path == "/notdcgm":
            text, code = "# HELP up Up.\n# TYPE up gauge\nup 1\n", 200
        else:
            text, code = "internal error\n", 500
        data = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(sys.argv[1], "w") as f:
    f.write(str(server.server_address[1]))
server.serve_forever()
