#!/usr/bin/env python3
"""Run gpufan-h2d-bench and check its table and JSON.

Usage: check-h2d.py [--devices N] [--driver VERSION] BENCH OUT.json
                    [-- BENCH ARGUMENTS...]

Runs `BENCH --json OUT.json BENCH ARGUMENTS...`, which must exit 0, and
checks the JSON: well-formed; N devices (--devices, default: at least one),
each with its ordinal, name, uuid, PCI bus id and NUMA node (an integer, -1
when unknown); positive pageable, pinned and device-to-device figures with
one time per repetition (via-host too, with its ratio to pinned), each
figure the bytes copied per second of its
median time (not the read + write traffic, which the d2d_note names);
cuda_driver_version a "major.minor" string (equal to --driver when given).
Over the stand-in driver the figures measure memcpy, so only their presence
and consistency are checked, never their size.
Exit status 0 when everything holds, 1 otherwise.
"""

import argparse
import json
import math
import re
import statistics
import subprocess
import sys

KINDS = ("pageable", "pinned", "d2d", "via_host")


def fail(msg):
    print(f"check-h2d: {msg}", file=sys.stderr)
    sys.exit(1)


def number(v, what, positive=False):
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
        fail(f"{what} is not a finite number: {v!r}")
    if positive and v <= 0:
        fail(f"{what} is not positive: {v!r}")
    return v


def field(obj, key, where, positive=False):
    return number(obj.get(key), f"{where}: '{key}'", positive)


def text(obj, key, where):
    v = obj.get(key)
    if not isinstance(v, str) or not v:
        fail(f"{where}: '{key}' is not a non-empty string: {v!r}")
    return v


def close(a, b):
    # The JSON keeps 6 significant digits of each time and 4 decimals of each
    # figure.
    return math.isclose(a, b, rel_tol=2e-3, abs_tol=2e-3)


def check_device(dev, where, size, reps):
    field(dev, "ordinal", where)
    for key in ("name", "uuid", "pci_bus_id"):
        text(dev, key, where)
    numa = dev.get("numa_node")
    if not isinstance(numa, int) or isinstance(numa, bool) or numa < -1:
        fail(f"{where}: 'numa_node' is not a node number or -1: {numa!r}")
    gbps = {}
    for kind in KINDS:
        gbps[kind] = field(dev, f"{kind}_gbps", where, positive=True)
        times = dev.get(f"{kind}_ms")
        if not isinstance(times, list) or len(times) != reps:
            fail(f"{where}: '{kind}_ms' is not a list of {reps} times: {times!r}")
        for i, t in enumerate(times):
            if number(t, f"{where}: {kind}_ms[{i}]") < 0:
                fail(f"{where}: {kind}_ms[{i}] is negative: {t!r}")
        median = statistics.median(times)
        if median <= 0:
            fail(f"{where}: the median of '{kind}_ms' is not positive")
        expected = size / (median * 1e-3) / 1e9
        if not close(gbps[kind], expected):
            fail(f"{where}: {kind}_gbps {gbps[kind]} is not {size} bytes per "
                 f"median {median} ms ({expected:.4f} GB/s)")
    ratio = field(dev, "ratio", where, positive=True)
    if not close(ratio, gbps["pinned"] / gbps["pageable"]):
        fail(f"{where}: ratio {ratio} is not pinned / pageable")
    via = field(dev, "via_host_ratio", where, positive=True)
    if not close(via, gbps["via_host"] / gbps["pinned"]):
        fail(f"{where}: via_host_ratio {via} is not via_host / pinned")


def check(doc, want_devices, want_driver):
    if doc.get("benchmark") != "h2d":
        fail(f"'benchmark' is {doc.get('benchmark')!r}, expected 'h2d'")
    text(doc, "unit", "top level")
    size = field(doc, "size_bytes", "top level", positive=True)
    reps = field(doc, "repetitions", "top level", positive=True)
    driver = doc.get("cuda_driver_version")
    if not isinstance(driver, str) or not re.fullmatch(r"\d+\.\d+", driver):
        fail(f"'cuda_driver_version' is not a \"major.minor\" string: {driver!r}")
    if want_driver is not None and driver != want_driver:
        fail(f"'cuda_driver_version' is {driver!r}, expected {want_driver!r}")
    note = text(doc, "d2d_note", "top level")
    if "twice" not in note:
        fail(f"'d2d_note' does not say the traffic is twice the figure: {note!r}")
    devices = doc.get("devices")
    if not isinstance(devices, list) or not devices:
        fail(f"'devices' is not a non-empty list: {devices!r}")
    if want_devices is not None and len(devices) != want_devices:
        fail(f"{len(devices)} devices, expected {want_devices}")
    ordinals = set()
    for i, dev in enumerate(devices):
        where = f"devices[{i}]"
        if not isinstance(dev, dict):
            fail(f"{where} is not an object")
        check_device(dev, where, size, reps)
        if dev["ordinal"] in ordinals:
            fail(f"{where}: ordinal {dev['ordinal']} twice")
        ordinals.add(dev["ordinal"])
    return devices


def main():
    argv = sys.argv[1:]
    bench_args = []
    if "--" in argv:
        cut = argv.index("--")
        argv, bench_args = argv[:cut], argv[cut + 1:]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int)
    parser.add_argument("--driver")
    parser.add_argument("bench")
    parser.add_argument("out")
    args = parser.parse_args(argv)

    cmd = [args.bench, "--json", args.out] + bench_args
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)
    print(proc.stdout)
    if proc.returncode != 0:
        fail(f"{' '.join(cmd)} exited with {proc.returncode}")
    try:
        with open(args.out) as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        fail(f"{args.out} is not well-formed JSON: {e}")
    if not isinstance(doc, dict):
        fail(f"{args.out} is not a JSON object")
    devices = check(doc, args.devices, args.driver)
    # The table says what it measures, and lists every device.
    for needed in ("CUDA driver version: " + doc["cuda_driver_version"],
                   "pageable", "pinned", "d2d", "via-host", "via/pinned",
                   "numa"):
        if needed not in proc.stdout:
            fail(f"the table has no {needed!r}")
    rows = [line for line in proc.stdout.splitlines()
            if re.match(r"\d+ ", line)]
    if len(rows) != len(devices):
        fail(f"the table has {len(rows)} device rows, the JSON {len(devices)}")
    print(f"check-h2d: {args.out} is well-formed: {len(devices)} device(s), "
          f"CUDA {doc['cuda_driver_version']}")


if __name__ == "__main__":
    main()
