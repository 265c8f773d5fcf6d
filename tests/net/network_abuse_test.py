#!/usr/bin/python3
"""The network-abuse campaign (issue 24): the agent and `serve` on loopback against
clients that misbehave, and `fleet` against a Prometheus that trickles. Bounded
in count and time (about a minute in all).

  header bombs     8 connections at once, each sending 400,000 header lines
                   (12.7 MB), three rounds: each gets 431; the agent's RSS stays
                   within 64 MB of its idle level and comes back to it
  slow and idle    70 clients sending one byte every 2 s and 40 that connect and
                   say nothing, for 8 s: a scrape (or an API call) every 0.25 s
                   beside them is answered 200 within 1 s, every time
  wrong passwords  400 requests with distinct wrong passwords from 16 threads
                   against an agent with bcrypt basic auth: every one is refused
                   (401, or 429 when the bcrypt lane is full); a scrape with the
                   right credentials beside them is answered within 1 s
  TLS + auth       4 header bombs over TLS without credentials: refused, RSS
                   within 64 MB of idle
  protocol         405 with Allow, pipelined requests in order, HTTP/2 preface
                   refused, gzip and q-values on /metrics
  fleet            --timeout 3 against a server that trickles one byte a second:
                   fleet ends within 3 s (plus start-up), with an error that says so;
                   a Prometheus still starting (503) is called not ready

Usage: network_abuse_test.py GPUTRIAGE FAKE_NVML STORE_DB
"""
import base64
import gzip
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from net_test_common import check, failures, free_port, request, rss_mb, start_server  # noqa: E402

BIN, FAKE_NVML, STORE = sys.argv[1], sys.argv[2], sys.argv[3]


def start(args, ready_text, env, stderr_path):
    return start_server(BIN, args, ready_text, env, stderr_path)




class Pressure:
    """70 clients trickling a head one byte every 2 s (reconnecting when the
    server drops them at its head deadline) and 40 that connect and stay silent."""

    def __init__(self, port, slow=70, idle=40):
        self.port, self.stop = port, threading.Event()
        self.threads = [threading.Thread(target=self.trickle, daemon=True) for _ in range(slow)]
        self.threads += [threading.Thread(target=self.silent, daemon=True) for _ in range(idle)]
        self.dropped = 0

    def __enter__(self):
        for t in self.threads:
            t.start()
        time.sleep(1.0)  # all connected
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(5)

    def trickle(self):
        head = b"GET /metrics HTTP/1.1\r\nHost: x\r\nUser-Agent: " + b"s" * 200
        while not self.stop.is_set():
            try:
                s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
                for i in range(len(head)):
                    s.send(head[i:i + 1])
                    if self.stop.wait(2.0):
                        break
                s.close()
            except OSError:
                self.dropped += 1
                self.stop.wait(0.2)

    def silent(self):
        while not self.stop.is_set():
            try:
                s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
                s.settimeout(1.0)
                while not self.stop.is_set():
                    try:
                        if s.recv(1) == b"":
                            break  # closed by the server: come back
                    except socket.timeout:
                        continue
                s.close()
            except OSError:
                self.stop.wait(0.2)


def probe_under_pressure(port, path, seconds, headers=None):
    worst, statuses = 0.0, []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        status, _, _, took = request(port, path, headers, timeout=5)
        statuses.append(status)
        worst = max(worst, took)
        time.sleep(0.25)
    return worst, statuses


def header_bomb(port, results, i):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=20)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        line = b"X-Bomb: " + b"b" * 22 + b"\r\n"  # 32 bytes a line: 400,000 lines = 12.8 MB
        chunk = line * 4000
        try:
            for _ in range(100):
                s.sendall(chunk)
            s.sendall(b"\r\n")
        except OSError:
            pass  # the server has answered and closed: read what it said
        data = b""
        try:
            while True:
                c = s.recv(65536)
                if not c:
                    break
                data += c
        except OSError:
            pass
        s.close()
        results[i] = data.split(b"\r\n", 1)[0].decode("latin-1")
    except OSError as e:
        results[i] = f"error: {e}"


def main():
    tmp = tempfile.mkdtemp()
    procs = []
    try:
        scenario = os.path.join(tmp, "scenario")
        with open(scenario, "w") as f:
            for i in range(8):
                f.write(f'device name="NVIDIA H100 80GB HBM3" uuid=GPU-{i} bus=00000000:{16 + i:02x}:00.0 '
                        'power_limit_w=700 max_sm_mhz=1980\n')
            f.write("series gpu_util 70 90 10\nseries power_w 400\n")
        env = dict(os.environ, GPUTRIAGE_FAKE_NVML_SCENARIO=scenario)

        # ---- the agent, plain ----
        port = free_port()
        agent = start(["agent", "--listen", f"127.0.0.1:{port}", "--nvml-library", FAKE_NVML, "--interval", "0.2"],
                      "serving", env, os.path.join(tmp, "agent.err"))
        procs.append(agent)
        for _ in range(50):
            if request(port, "/metrics")[0] == 200:
                break
            time.sleep(0.1)
        for _ in range(20):
            request(port, "/metrics")
        idle_rss = rss_mb(agent.pid)

        peak = idle_rss
        for round_no in range(3):
            results = [None] * 8
            threads = [threading.Thread(target=header_bomb, args=(port, results, i)) for i in range(8)]
            for t in threads:
                t.start()
            while any(t.is_alive() for t in threads):
                peak = max(peak, rss_mb(agent.pid))
                time.sleep(0.05)
            got = sum(1 for r in results if r and " 431 " in r)
            check(f"header bombs, round {round_no + 1}: 8 connections x 12.8 MB of headers get 431", got == 8,
                  f"{got} of 8; first: {results[0]}")
        time.sleep(1.0)
        after = rss_mb(agent.pid)
        check("header bombs: RSS stays within 64 MB of idle", peak - idle_rss <= 64,
              f"idle {idle_rss:.1f} MB, peak {peak:.1f} MB")
        check("header bombs: RSS comes back to idle", after - idle_rss <= 16, f"idle {idle_rss:.1f} MB, after {after:.1f} MB")

        with Pressure(port) as pressure:
            worst, statuses = probe_under_pressure(port, "/metrics", 8)
            rss_under = rss_mb(agent.pid)
        check("agent: 70 slow + 40 idle clients, every scrape beside them 200", all(s == 200 for s in statuses),
              f"{len(statuses)} scrapes: {sorted(set(statuses))}")
        check("agent: every scrape beside them answered within 1 s", worst <= 1.0, f"slowest {worst:.3f} s")
        check("agent: RSS under the slow clients within 64 MB of idle", rss_under - idle_rss <= 64, f"{rss_under:.1f} MB")

        # Protocol: 405 with Allow; pipelining; HTTP/2 preface; gzip and q-values.
        status, hdrs, _, _ = request(port, "/metrics", method="POST")
        check("POST /metrics: 405 with Allow", status == 405 and hdrs.get("allow") == ["GET, HEAD"], f"{status} {hdrs.get('allow')}")
        status, _, body, _ = request(port, "", raw=b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /metrics HTTP/1.1\r\nHost: x\r\n"
                                                 b"\r\nGET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        check("three pipelined requests, three answers in order", status == 200 and body.count(b"HTTP/1.1 200") == 2
              and body.endswith(b"ok\n"), f"{status}, {body.count(b'HTTP/1.1 200') + 1} answers")
        status, _, _, _ = request(port, "", raw=b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        check("an HTTP/2 preface gets 505", status == 505, str(status))
        status, hdrs, body, _ = request(port, "/metrics", {"Accept-Encoding": "gzip"})
        text = gzip.decompress(body) if hdrs.get("content-encoding") == ["gzip"] else b""
        check("Accept-Encoding: gzip gets a gzip page", b"DCGM_FI_DEV_GPU_UTIL" in text, f"{len(body)} bytes for {len(text)}")
        _, hdrs, _, _ = request(port, "/metrics", {"Accept-Encoding": "gzip;q=0, identity"})
        check("gzip;q=0 gets no gzip", "content-encoding" not in hdrs, str(hdrs.get("content-encoding")))
        _, hdrs, _, _ = request(port, "/metrics", {"Accept": "application/openmetrics-text;q=0.1,text/plain;q=0.9"})
        check("text preferred by q-value gets text", hdrs.get("content-type", [""])[0].startswith("text/plain"),
              str(hdrs.get("content-type")))
        _, hdrs, _, _ = request(port, "/metrics", {"Accept": "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;q=0.3"})
        check("OpenMetrics preferred by q-value gets OpenMetrics",
              hdrs.get("content-type", [""])[0].startswith("application/openmetrics-text"), str(hdrs.get("content-type")))
        agent.terminate()
        agent.wait(10)

        # ---- the agent with bcrypt basic auth: wrong passwords in bulk ----
        import crypt  # noqa: deprecated in 3.11, present in 3.11 and 3.12
        hashed = crypt.crypt("s3cret", crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1024))
        web = os.path.join(tmp, "web.yml")
        with open(web, "w") as f:
            f.write(f"basic_auth_users:\n  prometheus: '{hashed}'\n")
        port = free_port()
        agent = start(["agent", "--listen", f"127.0.0.1:{port}", "--nvml-library", FAKE_NVML, "--interval", "0.2",
                       "--web-config-file", web], "serving", env, os.path.join(tmp, "agent_auth.err"))
        procs.append(agent)
        good = {"Authorization": "Basic " + base64.b64encode(b"prometheus:s3cret").decode()}
        for _ in range(50):
            if request(port, "/metrics", good, timeout=10)[0] == 200:
                break
            time.sleep(0.1)
        idle_rss = rss_mb(agent.pid)
        refused, other, lock = [0], [], threading.Lock()

        def guesses(t):
            for i in range(25):
                cred = base64.b64encode(f"prometheus:guess-{t}-{i}".encode()).decode()
                status = request(port, "/metrics", {"Authorization": "Basic " + cred}, timeout=30)[0]
                with lock:
                    if status in (401, 429):
                        refused[0] += 1
                    else:
                        other.append(status)

        threads = [threading.Thread(target=guesses, args=(t,)) for t in range(16)]
        for t in threads:
            t.start()
        worst, statuses = 0.0, []
        while any(t.is_alive() for t in threads):
            status, _, _, took = request(port, "/metrics", good, timeout=5)
            statuses.append(status)
            worst = max(worst, took)
            time.sleep(0.25)
        for t in threads:
            t.join()
        check("400 wrong passwords: every one refused (401/429)", refused[0] == 400 and not other,
              f"{refused[0]} refused, others {sorted(set(other))}")
        check("a scrape with the right password beside them: 200 within 1 s", all(s == 200 for s in statuses) and worst <= 1.0,
              f"{len(statuses)} scrapes, slowest {worst:.3f} s, {sorted(set(statuses))}")
        check("wrong passwords: RSS within 64 MB of idle", rss_mb(agent.pid) - idle_rss <= 64, f"{rss_mb(agent.pid):.1f} MB")
        status, _, body, _ = request(port, "/healthz")
        check("/healthz without credentials under basic auth: 200 ok (probes)", status == 200 and body == b"ok\n", f"{status} {body!r}")
        agent.terminate()
        agent.wait(10)

        # ---- TLS + basic auth: header bombs without credentials (issue 24: 4 took it to 275 MB) ----
        key, crt = os.path.join(tmp, "agent.key"), os.path.join(tmp, "agent.crt")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=abuse",
                        "-keyout", key, "-out", crt], check=True, capture_output=True)
        with open(web, "w") as f:
            f.write(f"tls_server_config:\n  cert_file: {crt}\n  key_file: {key}\n"
                    f"basic_auth_users:\n  prometheus: '{hashed}'\n")
        port = free_port()
        agent = start(["agent", "--listen", f"127.0.0.1:{port}", "--nvml-library", FAKE_NVML, "--interval", "0.2",
                       "--web-config-file", web], "serving", env, os.path.join(tmp, "agent_tls.err"))
        procs.append(agent)
        context = ssl.create_default_context(cafile=crt)
        context.check_hostname = False

        def tls_bomb(results, i):
            try:
                raw = socket.create_connection(("127.0.0.1", port), timeout=20)
                s = context.wrap_socket(raw)
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
                chunk = (b"X-Bomb: " + b"b" * 22 + b"\r\n") * 4000
                try:
                    for _ in range(100):
                        s.sendall(chunk)
                except OSError:
                    pass  # refused and closed: what was said comes next
                try:
                    results[i] = s.recv(200).split(b"\r\n", 1)[0].decode("latin-1")
                except OSError as e:
                    results[i] = f"closed: {e}"
                s.close()
            except OSError as e:
                results[i] = f"error: {e}"

        time.sleep(1.0)
        idle_rss = rss_mb(agent.pid)
        peak = idle_rss
        results = [None] * 4
        threads = [threading.Thread(target=tls_bomb, args=(results, i)) for i in range(4)]
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            peak = max(peak, rss_mb(agent.pid))
            time.sleep(0.05)
        check("TLS + auth: 4 header bombs without credentials refused (431 or closed)",
              all(r and (" 431 " in r or r.startswith("closed")) for r in results), str(results))
        check("TLS + auth: RSS within 64 MB of idle", peak - idle_rss <= 64, f"idle {idle_rss:.1f} MB, peak {peak:.1f} MB")
        status = 0
        try:
            raw = socket.create_connection(("127.0.0.1", port), timeout=5)
            s = context.wrap_socket(raw)
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: " + good["Authorization"].encode()
                      + b"\r\n\r\n")
            status = int(s.recv(100).split(b" ")[1])
            s.close()
        except (OSError, ValueError, IndexError):
            pass
        check("TLS + auth: a scrape with the right password after them: 200", status == 200, str(status))
        agent.terminate()
        agent.wait(10)

        # ---- serve ----
        store = os.path.join(tmp, "runs.db")
        shutil.copy(STORE, store)
        port = free_port()
        serve = start(["serve", "--store", store, "--listen", f"127.0.0.1:{port}"], "gputriage serve:", None,
                      os.path.join(tmp, "serve.err"))
        procs.append(serve)
        with Pressure(port):
            worst, statuses = probe_under_pressure(port, "/api/runs", 8)
        check("serve: 70 slow + 40 idle clients, every API call beside them 200", all(s == 200 for s in statuses),
              f"{len(statuses)} calls: {sorted(set(statuses))}")
        check("serve: every API call beside them answered within 1 s", worst <= 1.0, f"slowest {worst:.3f} s")
        results = [None] * 4
        threads = [threading.Thread(target=header_bomb, args=(port, results, i)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        check("serve: header bombs get 431", all(r and " 431 " in r for r in results), str(results[0]))
        status, hdrs, _, _ = request(port, "/api/runs", method="PUT")
        check("serve: PUT gets 405 with Allow", status == 405 and hdrs.get("allow") == ["GET, HEAD"], str(status))
        serve.send_signal(1)  # SIGHUP: no web config to read again; serve stays up
        time.sleep(0.3)
        check("serve: SIGHUP does not end it", serve.poll() is None and request(port, "/api/runs")[0] == 200)
        serve.terminate()
        serve.wait(10)

        # ---- fleet against a Prometheus that trickles ----
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        prom_port = listener.getsockname()[1]
        stop = threading.Event()

        def trickler(conn):
            try:
                conn.settimeout(1)
                try:
                    conn.recv(65536)
                except OSError:
                    pass
                for byte in b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n" + b" " * 100000:
                    if stop.is_set():
                        break
                    conn.send(bytes([byte]))
                    time.sleep(1)
            except OSError:
                pass
            finally:
                conn.close()

        def accept_loop():
            listener.settimeout(0.2)
            while not stop.is_set():
                try:
                    conn, _ = listener.accept()
                except OSError:
                    continue
                threading.Thread(target=trickler, args=(conn,), daemon=True).start()

        acceptor = threading.Thread(target=accept_loop, daemon=True)
        acceptor.start()
        t0 = time.monotonic()
        out = subprocess.run([BIN, "fleet", "--prometheus", f"http://127.0.0.1:{prom_port}", "--timeout", "3"],
                             capture_output=True, text=True, timeout=60)
        took = time.monotonic() - t0
        stop.set()
        acceptor.join()
        listener.close()
        check("fleet --timeout 3 against a trickling Prometheus ends at its timeout", took <= 5.0 and out.returncode == 3,
              f"{took:.1f} s, exit {out.returncode}: {out.stderr.strip()[:200]}")

        # A Prometheus still starting (503 in plain text) is said to be not ready, not "not a Prometheus".
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        starting_port = listener.getsockname()[1]

        def starting():
            listener.settimeout(10)
            try:
                while True:
                    conn, _ = listener.accept()
                    conn.settimeout(2)
                    try:
                        conn.recv(65536)
                        conn.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
                                     b"Content-Length: 20\r\nConnection: close\r\n\r\nService Unavailable\n")
                    except OSError:
                        pass
                    conn.close()
            except OSError:
                pass

        t = threading.Thread(target=starting, daemon=True)
        t.start()
        out = subprocess.run([BIN, "fleet", "--prometheus", f"http://127.0.0.1:{starting_port}", "--timeout", "5"],
                             capture_output=True, text=True, timeout=60)
        listener.close()
        check("fleet against a Prometheus starting up (503): not ready, not 'is this a Prometheus'",
              out.returncode == 3 and "not ready" in out.stderr and "is this a Prometheus" not in out.stderr,
              out.stderr.strip()[:200])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
