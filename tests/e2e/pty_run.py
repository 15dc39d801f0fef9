#!/usr/bin/python3
"""Runs a command on a pseudo-terminal (stdin, stdout and stderr all the terminal), the way a
user at a terminal runs gpuprov, and prints everything it wrote, byte for byte.

usage: pty_run.py [--answer TEXT=REPLY]... [--timeout SECONDS] -- COMMAND [ARGS...]

Each --answer waits for TEXT in the output and then types REPLY and Enter, once, in order.
The exit status is the command's. The terminal is 100 columns wide.
"""
import argparse
import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--answer", action="append", default=[])
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    answers = [a.split("=", 1) for a in args.answer]

    main_fd, tty_fd = pty.openpty()
    fcntl.ioctl(tty_fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
    child = subprocess.Popen(command, stdin=tty_fd, stdout=tty_fd, stderr=tty_fd,
                             start_new_session=True, close_fds=True)
    os.close(tty_fd)
    seen = b""
    deadline = time.monotonic() + args.timeout
    while True:
        if time.monotonic() > deadline:
            child.kill()
            sys.stderr.write("pty_run: timed out\n")
            break
        ready, _, _ = select.select([main_fd], [], [], 0.2)
        if ready:
            try:
                data = os.read(main_fd, 65536)
            except OSError:  # EIO: every writer has closed the terminal
                data = b""
            if not data:
                break
            seen += data
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
            if answers and answers[0][0].encode() in seen:
                os.write(main_fd, answers[0][1].encode() + b"\n")
                seen = b""
                answers.pop(0)
        elif child.poll() is not None:
            break
    status = child.wait()
    os.close(main_fd)
    if answers:
        sys.stderr.write("pty_run: never saw %r\n" % answers[0][0])
    sys.exit(status if status >= 0 else 128 - status)


if __name__ == "__main__":
    main()
