"""A stand-in Prometheus for the fleet benchmark (bench/fleet_scale_benchmark.sh):
N GPUs, as gputriage agents export them, answered through the queries `gputriage
fleet` sends (/api/v1/query, recognised by their functions and metric names), with
the instance=~"a|b" matchers it adds when it reads the fleet a batch of nodes at a
time.

Every GPU's figures depend on its number only, so a fleet of 200,000 GPUs holds
the 10,000 of a smaller one with the same figures: their ranking must agree.

    fake_prometheus.py GPUS PORT_FILE      (prints the port into PORT_FILE)
"""
import http.server
import json
import re
import socketserver
import sys
import urllib.parse

GPUS_PER_NODE = 8
VERDICTS = ("input_bound", "idle", "low_precision", "launch_bound")


def frac(i, salt):
    return ((i * 2654435761 + salt * 40503) % 4294967296) / 4294967296.0


def labels(i):
    node = i // GPUS_PER_NODE
    return {"instance": f"node-{node}:9401", "job": "gputriage-agent", "hostname": f"node-{node}",
            "gpu": str(i % GPUS_PER_NODE), "uuid": f"GPU-{i:08d}", "model_name": "NVIDIA H100 80GB HBM3",
            "namespace": f"team-{(i // 64) % 40}", "pod": f"train-{i // 16}", "container": "pytorch"}


def util(i):
    return 5.0 + 90.0 * frac(i, 1)


def covered_seconds(i, range_s):
    return range_s * (0.25 + 0.75 * frac(i, 2))


class Fleet:
    def __init__(self, gpus):
        self.gpus = gpus

    def selected(self, query):
        """The GPUs a query's instance=~"…" matcher (if any) selects."""
        m = re.search(r'instance=~"((?:[^"\\]|\\.)*)"', query)
        if not m:
            return range(self.gpus)
        nodes = set()
        for alt in m.group(1).split("|"):
            name = alt.replace("\\\\", "")
            nm = re.fullmatch(r"node-(\d+):9401", name)
            if nm:
                nodes.add(int(nm.group(1)))
        out = []
        for node in sorted(nodes):
            out.extend(i for i in range(node * GPUS_PER_NODE, (node + 1) * GPUS_PER_NODE) if i < self.gpus)
        return out

    def answer(self, query, at, range_s, step_s):
        def sample(metric, value):
            return {"metric": metric, "value": [at, repr(float(value))]}

        gpus = self.selected(query)
        if query.startswith("count(last_over_time(gputriage_gpu_utilization_percent"):
            return [sample({}, self.gpus)] if self.gpus else []
        if query.startswith("count(group by (UUID)"):
            return []  # no GPU only in DCGM series
        if query.startswith("count by (instance) (last_over_time(gputriage_gpu_utilization_percent"):
            nodes = sorted({i // GPUS_PER_NODE for i in gpus})
            return [sample({"instance": f"node-{n}:9401"}, min(GPUS_PER_NODE, self.gpus - n * GPUS_PER_NODE))
                    for n in nodes]
        if query.startswith("avg_over_time(gputriage_gpu_utilization_percent"):
            return [sample(labels(i), util(i)) for i in gpus]
        if query.startswith("increase(gputriage_gpu_sampled_seconds_total"):
            return [sample(labels(i), covered_seconds(i, range_s)) for i in gpus]
        if query.startswith("count_over_time((gputriage_gpu_utilization_percent"):
            return [sample(labels(i), round(covered_seconds(i, range_s) / step_s)) for i in gpus]
        if query.startswith("min(min_over_time(timestamp(gputriage_gpu_utilization_percent"):
            return [sample({}, at - range_s)] if gpus else []
        if query.startswith("max(max_over_time(timestamp(gputriage_gpu_utilization_percent"):
            return [sample({}, at)] if gpus else []
        if query.startswith("max without (basis) (avg_over_time(gputriage_price_usd_per_hour"):
            return [sample(labels(i), 2.5) for i in gpus]
        if query.startswith("max by (basis) (last_over_time(gputriage_price_usd_per_hour"):
            return [sample({"basis": "fake table: H100 $2.50/h"}, 2.5)] if gpus else []
        if query.startswith("count_over_time(gputriage_finding"):
            return [sample(dict(labels(i), verdict=VERDICTS[i % 4], severity="moderate"),
                           round(covered_seconds(i, range_s) / 15)) for i in gpus]
        if query.startswith("sum_over_time((gputriage_finding"):
            return [sample(dict(labels(i), verdict=VERDICTS[i % 4], severity="moderate"),
                           (1 - util(i) / 100) * 2.5 * covered_seconds(i, range_s) / step_s) for i in gpus]
        if query.startswith("increase(gputriage_ledger_gpu_seconds_total"):
            # Every fourth GPU's job writes step markers (its ledger has the step
            # buckets); the others' is their utilization's: idle phases and unsplit.
            out = []
            for i in gpus:
                covered = covered_seconds(i, range_s)
                if i % 4 == 0:
                    shares = {"productive": 0.5, "data_wait": 0.2, "communication": 0.05, "between_steps": 0.01,
                              "startup": 0.02, "compile_warmup": 0.02, "checkpoint_restore": 0.0,
                              "checkpoint_save": 0.05, "evaluation": 0.1, "idle": 0.05, "teardown": 0.0}
                else:
                    idle = 1 - util(i) / 100
                    shares = {"idle": idle / 2, "unsplit": 1 - idle / 2}
                out.extend(sample(dict(labels(i), bucket=b), covered * share) for b, share in shares.items())
            return out
        raise ValueError("the fake Prometheus does not know this query: " + query)


def main():
    fleet = Fleet(int(sys.argv[1]))
    port_file = sys.argv[2]

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
            form = urllib.parse.parse_qs(body)
            query = form.get("query", [""])[0]
            at = float(form.get("time", ["0"])[0])
            # The range and step fleet put in the query ([1d], [1d:1m]), in seconds.
            units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}

            def seconds(text):
                return sum(float(n) * units[u] for n, u in re.findall(r"(\d+)(ms|s|m|h|d|w|y)", text))

            rng = re.search(r"\[(\w+)(?::(\w+))?\]", query)
            range_s = seconds(rng.group(1)) if rng else 86400
            step_s = seconds(rng.group(2)) if rng and rng.group(2) else 60
            try:
                result = fleet.answer(query, at, range_s, step_s)
                reply = {"status": "success", "data": {"resultType": "vector", "result": result}}
                code = 200
            except ValueError as e:
                reply = {"status": "error", "errorType": "bad_data", "error": str(e)}
                code = 400
            data = json.dumps(reply, separators=(",", ":")).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True

    server = Server(("127.0.0.1", 0), Handler)
    with open(port_file, "w") as f:
        f.write(str(server.server_address[1]))
    server.serve_forever()


if __name__ == "__main__":
    main()
