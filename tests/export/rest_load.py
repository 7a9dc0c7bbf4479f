"""Sends TF Serving predict requests from several threads for a while (the reload test's load).

Usage: /usr/bin/python3 rest_load.py URL SECONDS THREADS
Prints one JSON line: {"ok": n, "failed": [first failures...], "answers": [distinct answers]}.
Each request has a 10 s timeout; the script ends after SECONDS plus at most that.
"""
import json
import sys
import threading
import time
import urllib.error
import urllib.request

url, seconds, threads = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
body = json.dumps({"instances": [1.0, 2.0, 5.0]}).encode()
lock = threading.Lock()
ok, failed, answers = 0, [], set()


def worker():
    global ok
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        request = urllib.request.Request(url, data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                answer = json.dumps(json.load(response)["predictions"])
            with lock:
                ok += 1
                answers.add(answer)
        except (urllib.error.URLError, OSError, ValueError, KeyError) as error:
            with lock:
                failed.append(repr(error))


workers = [threading.Thread(target=worker) for _ in range(threads)]
for w in workers:
    w.start()
for w in workers:
    w.join()
print(json.dumps({"ok": ok, "failed": failed[:5], "answers": sorted(answers)}))
