#!/usr/bin/env python3
"""Test fixture: an EC2 IMDSv2-style metadata server on 127.0.0.1 for the installer's bats tests.

PUT /latest/api/token (header X-aws-ec2-metadata-token-ttl-seconds) returns a token;
GET /latest/meta-data/public-ipv4 needs header X-aws-ec2-metadata-token with that token (else 401).
Prints "port N" once listening. Usage: imds_server.py PUBLIC_IP
"""
import http.server
import sys

TOKEN = "fake-imds-token"
PUBLIC_IP = sys.argv[1]


class Handler(http.server.BaseHTTPRequestHandler):
    def reply(self, code, body=b""):
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_PUT(self):
        if self.path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
            self.reply(200, TOKEN.encode())
        else:
            self.reply(400)

    def do_GET(self):
        if self.headers.get("X-aws-ec2-metadata-token") != TOKEN:
            self.reply(401)
        elif self.path == "/latest/meta-data/public-ipv4":
            self.reply(200, PUBLIC_IP.encode())
        else:
            self.reply(404)

    def log_message(self, *args):
        pass


server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
print("port %d" % server.server_address[1], flush=True)
server.serve_forever()
