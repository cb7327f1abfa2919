#!/usr/bin/env python3
"""Run `gpufan-failover-bench --quick` and check its JSON.

Usage: check-failover.py GPUFAN_FAILOVER_BENCH OUT.json

Checks the structure and that every run kept every frame, in order (the
bench's own check); never the timings, which are not pass/fail.
"""

import json
import subprocess
import sys


def fail(msg):
    print(f"check-failover: {msg}", file=sys.stderr)
    sys.exit(1)


def main():
    bench, out = sys.argv[1], sys.argv[2]
    run = subprocess.run([bench, "--quick", "--json", out], check=False)
    with open(out, encoding="utf-8") as f:
        data = json.load(f)
    if run.returncode != 0 or not data.get("ok"):
        fail(f"the bench failed (exit {run.returncode}): a run lost or "
             "reordered frames")
    branches = {t["branch"] for t in data["throughput"]}
    if branches != {"identity", "videobalance saturation=0.5"}:
        fail(f"throughput rows: {sorted(branches)}")
    for t in data["throughput"]:
        if not (t["fail_fps"] > 0 and t["replay_fps"] > 0 and t["ok"]):
            fail(f"throughput row {t}")
    faults = {r["fault"]: r for r in data["recovery"]}
    if set(faults) != {"error", "block"}:
        fail(f"recovery rows: {sorted(faults)}")
    for r in faults.values():
        if not r["ok"] or not r["ms"] or min(r["ms"]) < 0:
            fail(f"recovery row {r}")
    print("check-failover: ok")


if __name__ == "__main__":
    main()
