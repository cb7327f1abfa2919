#!/usr/bin/env python3
"""Run `gpufan-bench --smoke` and check that its JSON is well-formed.

Usage: check-bench.py GPUFAN_BENCH OUT.json [extra bench arguments]

Checks the structure only (every scenario present, every configuration ran,
the output order check passed), never the timings: timings are not pass/fail.
Exit status 0 when the output is well-formed.

check-streams.py imports fail, finite and run_smoke from here (setting PROG).
"""

import json
import math
import subprocess
import sys

SCENARIOS = {
    "equal-1x5ms": "equal",
    "equal-2x5ms": "equal",
    "equal-4x5ms": "equal",
    "equal-8x5ms": "equal",
    "uneven-2-4-8ms": "uneven",
    "uneven-1-10ms": "uneven",
    "dynamic-2x4ms": "dynamic",
    "overhead-2x0ms": "overhead",
}
POLICIES = {"round-robin", "least-loaded", "weighted", "adaptive"}

# The name fail() puts before its message.
PROG = "check-bench"


def fail(msg):
    print(f"{PROG}: {msg}", file=sys.stderr)
    sys.exit(1)


def finite(v, where, key):
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
        fail(f"{where}: '{key}' is not a finite number: {v!r}")
    return v


def number(obj, key, where):
    return finite(obj.get(key), where, key)


def check(doc):
    for key in ("mode", "reps", "ok", "order_ok", "machine", "callgrind", "scenarios"):
        if key not in doc:
            fail(f"missing top-level '{key}'")
    if doc["order_ok"] is not True:
        fail("the output order check failed")
    if doc["ok"] is not True:
        fail("a run failed")
    number(doc["machine"], "nproc", "machine")
    names = {s["name"]: s for s in doc["scenarios"]}
    for name, kind in SCENARIOS.items():
        sc = names.get(name)
        if sc is None:
            fail(f"scenario {name} missing")
        if sc["kind"] != kind:
            fail(f"{name}: kind {sc['kind']}, expected {kind}")
        configs = sc["configs"]
        if not configs or configs[0]["pipeline"] != "baseline":
            fail(f"{name}: the first configuration is not the baseline")
        # The stock baseline (a default queue) beside the equal-depth one.
        stock = [c for c in configs
                 if c["pipeline"] == "baseline" and c["label"] == "stock"]
        if len(stock) != 1:
            fail(f"{name}: no stock baseline (roundrobin ! queue ! funnel)")
        policies = {c.get("policy") for c in configs if c["pipeline"] == "gpufan"}
        if kind == "uneven" and policies != POLICIES:
            fail(f"{name}: policies {sorted(policies)}")
        for c in configs:
            where = f"{name}/{c['label']}"
            if len(c["runs"]) != doc["reps"]:
                fail(f"{where}: {len(c['runs'])} runs, expected {doc['reps']}")
            if not all(r["ok"] for r in c["runs"]):
                fail(f"{where}: a run failed")
            number(c, "median_fps", where)
            number(c, "vs_baseline", where)
            number(c, "vs_stock", where)
            if c["pipeline"] == "gpufan":
                if c["ordered"] is not True:
                    fail(f"{where}: output not in input order")
                if kind != "overhead":
                    number(c, "of_ideal", where)
                    number(c, "latency_p99_ms", where)
                    number(c, "window_peak", where)
                if kind == "dynamic":
                    number(c, "settle_frames_slowdown_median", where)
                    number(c, "settle_frames_speedup_median", where)
                if kind == "overhead":
                    number(c, "ns_per_buffer", where)


# A bench that exits with it has nothing to measure here (an element is
# missing): the test is skipped, with the bench's reason in its log.
SKIP = 77


def run_smoke(usage):
    """Runs `BENCH --smoke --json OUT [extra arguments]` (the command line's
    BENCH OUT ...), prints its output; returns the JSON it wrote and OUT.
    Fails with `usage` when the arguments are missing; exits with SKIP when
    the bench did."""
    if len(sys.argv) < 3:
        fail(usage)
    bench, out = sys.argv[1], sys.argv[2]
    cmd = [bench, "--smoke", "--json", out] + sys.argv[3:]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, check=False)
    print(proc.stdout)
    if proc.returncode == SKIP:
        print(f"{PROG}: skipped: the bench cannot run here (see above)")
        sys.exit(SKIP)
    if proc.returncode != 0:
        fail(f"{' '.join(cmd)} exited with {proc.returncode}")
    with open(out, encoding="utf-8") as f:
        try:
            doc = json.load(f)
        except json.JSONDecodeError as e:
            fail(f"{out} is not well-formed JSON: {e}")
    return doc, out


def main():
    doc, out = run_smoke(__doc__)
    check(doc)
    print(f"check-bench: {out} is well-formed: {len(doc['scenarios'])} scenarios")


if __name__ == "__main__":
    main()
