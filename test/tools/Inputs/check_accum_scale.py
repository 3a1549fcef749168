"""Checks a modelc-run --train log and checkpoint of a step compiled with
--grad-accum=N and dynamic loss scaling: the scale changes only on the last
micro-batch of a group (call numbers N, 2N, ...), every halving is one
skipped update, and the loss falls.

usage: check_accum_scale.py LOG.csv CHECKPOINT.mcst N
"""
import csv
import sys

from dp_compare import read_mcst

log, checkpoint, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = list(csv.DictReader(open(log)))
state = read_mcst(checkpoint)
losses = [float(r["loss"]) for r in rows]
# The scale each call leaves (column written after the call).
scales = [float(r["loss_scale"]) for r in rows]
groups = len(rows) // n
changes = [(int(r["step"]), prev, now) for r, prev, now in
           zip(rows, [65536.0] + scales, scales) if now != prev]
halvings = sum(1 for _, prev, now in changes if now == prev / 2)
updates = int(state["optimizer.step"])
print("calls", len(rows), "groups", groups, "updates", updates,
      "scale changes", changes, "loss", sum(losses[:20]) / 20,
      sum(losses[-20:]) / 20)
bad = [step for step, _, _ in changes if step % n != 0]
assert not bad, f"the scale changed mid-group at calls {bad}"
assert updates == groups - halvings, (updates, groups, halvings)
assert int(state["optimizer.micro_step"]) == len(rows) % n
assert sum(losses[-20:]) < 0.9 * sum(losses[:20])
