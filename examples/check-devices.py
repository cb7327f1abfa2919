#!/usr/bin/env python3
"""Run gpufan-devices and check its text and JSON.

Usage: check-devices.py --gpus N [--driver VERSION | --no-driver]
                        PROGRAM OUT.json

Runs `PROGRAM --json OUT.json`, which must exit 0 (with or without GPUs),
and checks: the JSON is well-formed and lists exactly N GPUs, each with all
its fields well-formed (uuid GPU-..., PCI bus id dddd:bb:dd.f, NUMA node an
integer or -1, local CPUs a list like "0-3,8" or "", total memory, compute
capability "major.minor", nvenc/nvdec yes, no or unknown); at least one CPU
device; gpu_note empty with GPUs and saying why without; cuda_driver_version
"major.minor" (equal to --driver when given) or null (--no-driver). The text
names the same GPUs, the CPU device count, and the note or the driver;
--help exits 0 and a bad option 2.
Exit status 0 when everything holds, 1 otherwise.
"""

import argparse
import json
import re
import subprocess
import sys

GPU_KEYS = {"index", "name", "uuid", "pci_bus_id", "numa_node", "local_cpus",
            "total_memory", "compute_capability", "nvenc", "nvdec"}
SUPPORT = {"yes", "no", "unknown"}
UUID = r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
PCI = r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]"
CPU_LIST = r"(\d+(-\d+)?)(,\d+(-\d+)?)*"
VERSION = r"\d+\.\d+"


def fail(msg):
    print(f"check-devices: {msg}", file=sys.stderr)
    sys.exit(1)


def integer(v, what, minimum):
    if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
        fail(f"{what} is not an integer >= {minimum}: {v!r}")
    return v


def matches(pattern, v, what):
    if not isinstance(v, str) or not re.fullmatch(pattern, v):
        fail(f"{what} is not of the form {pattern}: {v!r}")
    return v


def check_gpu(gpu, where):
    if not isinstance(gpu, dict) or set(gpu) != GPU_KEYS:
        fail(f"{where}: keys {sorted(gpu) if isinstance(gpu, dict) else gpu!r}, "
             f"expected {sorted(GPU_KEYS)}")
    integer(gpu["index"], f"{where}: index", 0)
    matches(r".+", gpu["name"], f"{where}: name")
    matches(UUID, gpu["uuid"], f"{where}: uuid")
    matches(PCI, gpu["pci_bus_id"], f"{where}: pci_bus_id")
    integer(gpu["numa_node"], f"{where}: numa_node", -1)
    if gpu["local_cpus"] != "":
        matches(CPU_LIST, gpu["local_cpus"], f"{where}: local_cpus")
    integer(gpu["total_memory"], f"{where}: total_memory", 1)
    matches(VERSION, gpu["compute_capability"], f"{where}: compute_capability")
    for key in ("nvenc", "nvdec"):
        if gpu[key] not in SUPPORT:
            fail(f"{where}: {key} is {gpu[key]!r}, expected one of {sorted(SUPPORT)}")


def check(doc, args):
    keys = {"cuda_driver_version", "gpu_note", "gpus", "cpu_devices"}
    if not isinstance(doc, dict) or set(doc) != keys:
        fail(f"top-level keys {sorted(doc) if isinstance(doc, dict) else doc!r}, "
             f"expected {sorted(keys)}")
    gpus = doc["gpus"]
    if not isinstance(gpus, list) or len(gpus) != args.gpus:
        fail(f"'gpus' is not a list of {args.gpus}: {gpus!r}")
    for i, gpu in enumerate(gpus):
        check_gpu(gpu, f"gpus[{i}]")
    if len({g["index"] for g in gpus}) != len(gpus):
        fail("two GPUs with the same index")
    integer(doc["cpu_devices"], "cpu_devices", 1)
    note = doc["gpu_note"]
    if not isinstance(note, str) or (note == "") != (args.gpus > 0):
        fail(f"gpu_note {note!r}: expected it empty exactly when there are GPUs")
    driver = doc["cuda_driver_version"]
    if args.no_driver:
        if driver is not None:
            fail(f"cuda_driver_version is {driver!r}, expected null")
    else:
        matches(VERSION, driver, "cuda_driver_version")
        if args.driver is not None and driver != args.driver:
            fail(f"cuda_driver_version is {driver!r}, expected {args.driver!r}")


def check_text(out, doc):
    lines = out.splitlines()
    needed = [f"GPUs: {len(doc['gpus'])}", f"CPU devices: {doc['cpu_devices']}"]
    needed += [f"gpu {g['index']}: {g['name']}" for g in doc["gpus"]]
    if doc["gpu_note"]:
        needed.append(f"no GPU: {doc['gpu_note']}")
    if doc["cuda_driver_version"] is not None:
        needed.append(f"CUDA driver version: {doc['cuda_driver_version']}")
    for line in needed:
        if line not in lines:
            fail(f"the text has no line {line!r}")
    for g in doc["gpus"]:
        for value in (g["uuid"], g["pci_bus_id"], g["compute_capability"]):
            if value not in out:
                fail(f"the text does not name {value!r}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, required=True)
    driver = parser.add_mutually_exclusive_group()
    driver.add_argument("--driver")
    driver.add_argument("--no-driver", action="store_true")
    parser.add_argument("program")
    parser.add_argument("out")
    args = parser.parse_args()

    cmd = [args.program, "--json", args.out]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    print(proc.stdout, end="")
    print(proc.stderr, end="", file=sys.stderr)
    if proc.returncode != 0:
        fail(f"{' '.join(cmd)} exited with {proc.returncode}")
    try:
        with open(args.out) as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        fail(f"{args.out} is not well-formed JSON: {e}")
    check(doc, args)
    check_text(proc.stdout, doc)
    # Usage: --help succeeds, anything unknown is exit status 2.
    for argv, status in ((["--help"], 0), (["--no-such-option"], 2),
                         (["--json"], 2)):
        rc = subprocess.run([args.program] + argv, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL).returncode
        if rc != status:
            fail(f"{' '.join([args.program] + argv)} exited with {rc}, "
                 f"expected {status}")
    print(f"check-devices: {args.out} is well-formed: {len(doc['gpus'])} GPU(s), "
          f"{doc['cpu_devices']} CPU device(s)")


if __name__ == "__main__":
    main()
