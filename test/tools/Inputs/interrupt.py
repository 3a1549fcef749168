"""Runs a command, sends it SIGINT after SECONDS, and prints its output and
then "exit status N" (N: its exit status, 128 + the signal when a signal
killed it). Exits 0 whatever the command did, so FileCheck judges.

    interrupt.py SECONDS COMMAND [ARG...]
"""
import signal
import subprocess
import sys
import time


def main():
    seconds = float(sys.argv[1])
    p = subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    time.sleep(seconds)
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=60)
    sys.stdout.write(out)
    code = p.returncode if p.returncode >= 0 else 128 - p.returncode
    print(f"exit status {code}")


if __name__ == "__main__":
    main()
