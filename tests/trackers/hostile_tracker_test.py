#!/usr/bin/python3
"""`gputriage record --mlflow URL` against tracker servers that misbehave (issue 24):
whatever the server does, the job starts within 6 s, `record` exits within 15 s of
the job's end, and its exit status is the job's.

Servers (raw sockets on 127.0.0.1, one thread per connection):
  trickle-headers  answers every request with a status line sent one byte a second
  trickle-later    answers the calls that open a run at once, then trickles every
                   later call (the run's points and its end)
  huge             a 64 MiB reply to every call
  garbage          bytes that are not HTTP
  redirect         302 to another port (credentials must not follow)
  long-run-id      a run id of 5 MB

Usage: hostile_tracker_test.py GPUTRIAGE FAKE_NVML
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

JOB_EXIT = 3


def read_request(conn):
    """Reads one request (headers and a Content-Length body); returns its path, or None."""
    conn.settimeout(10)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = 0
    for line in lines[1:]:
        if line.lower().startswith("content-length:"):
            length = int(line.split(":", 1)[1])
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    parts = lines[0].split(" ")
    return parts[1] if len(parts) > 1 else "/"


def reply(conn, obj, status="200 OK"):
    body = json.dumps(obj).encode()
    conn.sendall(f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)


def opening_reply(path, run_id="0123456789abcdef0123456789abcdef"):
    if "experiments/get-by-name" in path:
        return {"experiment": {"experiment_id": "1", "name": "x"}}
    if "experiments/create" in path:
        return {"experiment_id": "1"}
    if "runs/create" in path:
        return {"run": {"info": {"run_id": run_id, "experiment_id": "1", "artifact_uri": ""}}}
    return {}


def trickle(conn, payload, stop):
    for b in payload:
        if stop.is_set():
            return
        conn.sendall(bytes([b]))
        time.sleep(1.0)


def handle(mode, conn, stop):
    try:
        while not stop.is_set():
            path = read_request(conn)
            if path is None:
                return
            if mode == "trickle-headers":
                trickle(conn, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", stop)
                return
            if mode == "trickle-later":
                if any(k in path for k in ("experiments/", "runs/create")):
                    reply(conn, opening_reply(path))
                    continue
                body = b"{}"
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body))
                trickle(conn, body * 50, stop)
                return
            if mode == "huge":
                size = 64 << 20
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size)
                block = b" " * (1 << 20)
                for _ in range(64):
                    conn.sendall(block)
                return
            if mode == "garbage":
                conn.sendall(b"\x00\xffnot http at all\r\n\r\n" * 100)
                return
            if mode == "redirect":
                conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:9/steal\r\nContent-Length: 0\r\n\r\n")
                continue
            if mode == "long-run-id":
                reply(conn, opening_reply(path, run_id="a" * (5 << 20)))
                continue
    except OSError:
        return
    finally:
        conn.close()


def serve(mode, stop):
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    sock.settimeout(0.2)

    def loop():
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            threading.Thread(target=handle, args=(mode, conn, stop), daemon=True).start()
        sock.close()

    threading.Thread(target=loop, daemon=True).start()
    return sock.getsockname()[1]


def main():
    binary, fake_nvml = sys.argv[1], sys.argv[2]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        scenario = os.path.join(tmp, "scenario")
        with open(scenario, "w") as f:
            f.write('device name="NVIDIA H100 80GB HBM3" uuid=GPU-trk0 bus=00000000:18:00.0 power_limit_w=700 max_sm_mhz=1980\n'
                    "series gpu_util 90 95 0 96\nseries power_w 500 520 100 510\n")
        for mode in ("trickle-headers", "trickle-later", "huge", "garbage", "redirect", "long-run-id"):
            stop = threading.Event()
            port = serve(mode, stop)
            started = os.path.join(tmp, f"{mode}.started")
            job = f"date +%s.%N > {started}; sleep 1; exit {JOB_EXIT}"
            env = dict(os.environ, GPUTRIAGE_FAKE_NVML_SCENARIO=scenario)
            t0 = time.time()
            proc = subprocess.run(
                [binary, "record", "--nvml-library", fake_nvml, "--store", os.path.join(tmp, f"{mode}.db"),
                 "--mlflow", f"http://127.0.0.1:{port}", "--interval", "0.1", "--", "/bin/sh", "-c", job],
                capture_output=True, text=True, env=env, timeout=120)
            t_end = time.time()
            stop.set()
            try:
                with open(started) as f:
                    t_start = float(f.read().strip())
            except (OSError, ValueError):
                t_start = None
            job_end = (t_start + 1.0) if t_start else None
            problems = []
            if t_start is None:
                problems.append("the job never started")
            elif t_start - t0 > 6.0:
                problems.append(f"the job started {t_start - t0:.1f} s after record (limit 6 s)")
            if job_end and t_end - job_end > 15.0:
                problems.append(f"record exited {t_end - job_end:.1f} s after the job (limit 15 s)")
            if proc.returncode != JOB_EXIT:
                problems.append(f"record exited {proc.returncode}, the job {JOB_EXIT}")
            said = [line for line in proc.stderr.splitlines() if "MLflow" in line or "mlflow" in line][:2]
            status = "ok  " if not problems else "FAIL"
            print(f"{status} {mode:16s} job started after {((t_start or t_end) - t0):5.1f} s, record done "
                  f"{(t_end - (job_end or t_end)):5.1f} s after the job, exit {proc.returncode}"
                  + ("; " + "; ".join(problems) if problems else "") + (f" | {said[0][:160]}" if said else ""))
            if problems:
                failures += 1
                print(proc.stderr[-2000:])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
