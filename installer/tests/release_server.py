#!/usr/bin/env python3
"""Test fixture: a k3s "release" server on 127.0.0.1 for the installer's download tests.

Serves the files under DIR at their paths (URL-decoded, so /v1.36.4%2Bk3s1/k3s is the file
DIR/v1.36.4+k3s1/k3s), in one of three modes:
  ok        the whole file, with its Content-Length
  truncate  the right Content-Length but only the first half of the bytes, then the connection
            is closed (a download cut short)
  stall     the headers and the first 100 bytes, then nothing (the connection stays open)
Each request adds one line "<method> <path>" to DIR/../requests.log. Prints "port N" once
listening. Usage: release_server.py DIR MODE
"""
import http.server
import os
import sys
import threading
import urllib.parse

ROOT, MODE = sys.argv[1], sys.argv[2]
LOG = os.path.join(os.path.dirname(os.path.abspath(ROOT)), "requests.log")
STOP = threading.Event()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        with open(LOG, "a") as f:
            f.write("GET %s\n" % self.path)
        rel = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path).lstrip("/")
        path = os.path.realpath(os.path.join(ROOT, rel))
        if not path.startswith(os.path.realpath(ROOT) + os.sep) or not os.path.isfile(path):
            body = b"not found\n"
            self.send_response(404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        with open(path, "rb") as f:
            data = f.read()
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if MODE == "ok":
            self.wfile.write(data)
        elif MODE == "truncate":
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
        else:  # stall
            self.wfile.write(data[:100])
            self.wfile.flush()
            STOP.wait()
            self.close_connection = True

    def log_message(self, *args):
        pass


if MODE not in ("ok", "truncate", "stall"):
    sys.exit("mode must be ok, truncate or stall")
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print("port %d" % server.server_address[1], flush=True)
server.serve_forever()
