#!/usr/bin/env python3
"""A stand-in dcgm-exporter for the record --dcgm-exporter tests (stdlib only).

  fake_dcgm_exporter.py PORT_FILE

Listens on 127.0.0.1 (a free port, written to PORT_FILE) and serves, in
dcgm-exporter's legacy text format:
  /metrics   two GPUs; GPU 0 alternates busy (97 %) and starved (0 %) on every
             request, an input-bound sawtooth; GPU 1 idles. Each reply differs.
  /static    the same reply every time (an exporter between collect intervals)
  /notdcgm   a Prometheus text without DCGM series
  /error     HTTP 500
  /huge      70 MiB of comment lines (no metrics page is that large)
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


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        global requests
        with lock:
            requests += 1
            n = requests
        if self.path == "/metrics":
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
