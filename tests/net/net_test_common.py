"""What the network campaigns share: free ports, a process's RSS, and starting
gputriage's servers until they say they are ready."""
import os
import socket
import subprocess
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def rss_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def start_server(binary, args, ready_text, env, stderr_path):
    """Starts `binary args`, its stderr into `stderr_path`, until `ready_text` appears there (10 s)."""
    env = dict(os.environ if env is None else env)
    # Under AddressSanitizer every freed block waits in a quarantine (256 MB by
    # default) that RSS counts: a small one keeps the RSS checks about the server's
    # own memory (a release build ignores the setting).
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS", ""), "quarantine_size_mb=16"]))
    err = open(stderr_path, "w")
    p = subprocess.Popen([binary] + args, stdout=subprocess.DEVNULL, stderr=err, env=env)
    for _ in range(200):
        time.sleep(0.05)
        with open(stderr_path) as f:
            if ready_text in f.read():
                return p
        if p.poll() is not None:
            break
    with open(stderr_path) as f:
        print(f.read())
    raise SystemExit(f"FAIL: {args[0]} did not start")

def request(port, path, headers=None, timeout=5.0, method="GET", raw=None, source="127.0.0.1"):
    """One request on a fresh connection from `source`: (status, headers dict, body, seconds); status 0 when
    refused or cut. `raw`: these bytes instead of a request made from the rest."""
    t0 = time.monotonic()
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(source, 0))
    except OSError as e:
        return 0, {}, str(e).encode(), time.monotonic() - t0
    try:
        if raw is None:
            lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
            lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
            raw = ("\r\n".join(lines) + "\r\n\r\n").encode()
        s.sendall(raw)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError as e:
        return 0, {}, str(e).encode(), time.monotonic() - t0
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    try:
        status = int(lines[0].split(" ")[1])
    except (IndexError, ValueError):
        return 0, {}, data, time.monotonic() - t0
    hdrs = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        hdrs.setdefault(k.strip().lower(), []).append(v.strip())
    return status, hdrs, body, time.monotonic() - t0


failures = []


def check(what, ok, detail=""):
    """Prints one check's outcome; a failed one is remembered in `failures`."""
    print(("ok: " if ok else "FAIL: ") + what + (f" ({detail})" if detail else ""), flush=True)
    if not ok:
        failures.append(what)
