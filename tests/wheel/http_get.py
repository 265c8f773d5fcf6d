"""GET a local URL with the standard library (the clean systems have no curl),
retrying while the server starts: prints the body; exit 1 on no answer.
    http_get.py URL [SECONDS]"""
import sys
import time
import urllib.request

url, deadline = sys.argv[1], time.monotonic() + float(sys.argv[2] if len(sys.argv) > 2 else 20)
while True:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            sys.stdout.write(response.read().decode())
            break
    except OSError as e:
        if time.monotonic() > deadline:
            sys.exit(f"http_get: {url}: {e}")
        time.sleep(0.2)
