"""What the bench scripts share: progress on stderr, and running a command
that must succeed (its output, or the script stops naming the command and
its stderr)."""
import os
import subprocess
import sys


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        script = os.path.basename(sys.argv[0])
        sys.exit(f"{script}: {' '.join(cmd)} failed:\n{r.stderr}")
    return r.stdout + r.stderr
