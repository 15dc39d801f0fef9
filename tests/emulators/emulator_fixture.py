# SPDX-License-Identifier: Apache-2.0
"""gpuprov-emulator as a child process for the real-client tests next to this file
(test_*_clients.py): starts it, reads the '<cloud> <url>' lines it prints, calls its control
API, stops it. Stdlib only; importable from /usr/bin/python3.

The emulator binary: $GPUPROV_EMULATOR, else <repo>/<build_dir>/bin/gpuprov-emulator.
"""
import json
import os
import subprocess
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


def emulator_path(build_dir="build-emu"):
    return os.environ.get("GPUPROV_EMULATOR") or os.path.join(
        HERE, "..", "..", build_dir, "bin", "gpuprov-emulator")


def bypass_proxy_for_loopback():
    """Never send 127.0.0.1 traffic to a proxy."""
    for var in ("NO_PROXY", "no_proxy"):
        os.environ[var] = (os.environ.get(var, "") + ",127.0.0.1,localhost").lstrip(",")


def wait_for(cond, timeout=15.0, every=0.1):
    """Calls cond() every `every` seconds until it is true or `timeout` passes; its last value."""
    end = time.time() + timeout
    while time.time() < end:
        if cond():
            return True
        time.sleep(every)
    return cond()


class Emulator:
    """gpuprov-emulator with the memory backend serving `cloud`; `args` are added to its
    command line and `env` to its environment. urls maps each cloud and "control" to the URL
    the emulator printed."""

    def __init__(self, cloud, args=(), env=None, build_dir="build-emu"):
        self.cloud = cloud
        self.proc = subprocess.Popen(
            [emulator_path(build_dir), "--backend", "memory", "--clouds", cloud] + list(args),
            stdout=subprocess.PIPE, env=dict(os.environ, **(env or {})), text=True)
        self.urls = {}
        while "control" not in self.urls:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("gpuprov-emulator exited before printing its endpoints")
            name, url = line.split()
            self.urls[name] = url

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.proc.stdout.close()

    def control(self, method, path, body=None):
        """One call to the control API; its JSON answer (None when empty)."""
        req = urllib.request.Request(self.urls["control"] + path, method=method,
                                     data=None if body is None else json.dumps(body).encode())
        with urllib.request.urlopen(req) as r:
            text = r.read()
            return json.loads(text) if text else None

    def counts(self):
        return self.control("GET", "/counts?cloud=" + self.cloud)
