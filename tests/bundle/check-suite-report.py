#!/usr/bin/env python3
"""What check-bundle-offline.sh (suite) asks of gpu-suite.sh's report.json on
a machine without a GPU: every CPU check passed from the bundle, every GPU
check skipped with "no GPU", the libraries all the bundle's (but glibc), and
no hwloc plugin of the machine's among them.

    check-suite-report.py report.json
"""
import json, sys
report = json.load(open(sys.argv[1]))
checks = {c["name"]: c for c in report["checks"]}
errors = []
def want(name, status, text=None):
    c = checks.get(name)
    if c is None:
        errors.append(f"no check {name}")
    elif c["status"] != status or (text and text not in c["detail"]):
        errors.append(f"{name}: {c['status']} ({c['detail']}), want {status}"
                      + (f" with '{text}'" if text else ""))
for name in ["glibc", "gpufan-devices", "test-lib-cuda", "test-devices",
             "elements", "lanes-cpu", "demo-cpu", "libraries"]:
    want(name, "passed")
want("nvidia-smi", "skipped", "no GPU")
want("h2d-bench", "skipped", "no GPU")
for name in ["lanes-cuda", "nvdec-lanes-cuda", "nvdec-cudamemory-lanes",
             "demo-cuda", "require-codecs"]:
    want(name, "skipped", "no GPU")
if report["gpu"]["present"]:
    errors.append("the report says there is a GPU")
tests = report["tests"]
gpu_tests = [t for t in tests if t["name"].startswith(("CudaGpu.", "DevicesGpu."))]
if not gpu_tests:
    errors.append("no CudaGpu/DevicesGpu test cases in the report")
for t in gpu_tests:
    if t["status"] != "skipped":
        errors.append(f"{t['name']}: {t['status']} without a GPU")
ran = [t for t in tests if t["status"] == "passed"]
if len(ran) < 20:
    errors.append(f"only {len(ran)} test cases passed from the bundle")
if any(t["status"] == "failed" for t in tests):
    errors.append("failed test cases: " + ", ".join(
        t["name"] for t in tests if t["status"] == "failed"))
lib = checks.get("libraries", {}).get("detail", "")
if "libgstreamer" in lib.split("from the machine only:")[-1]:
    errors.append("GStreamer came from the machine: " + lib)
if "hwloc" in lib.split("from the machine only:")[-1]:
    errors.append("hwloc plugins came from the machine: " + lib)
if errors:
    print("check-bundle-offline: FAIL:\n  " + "\n  ".join(errors))
    sys.exit(1)
print(f"check-bundle-offline: the bundle ran offline: {len(checks)} checks, "
      f"{len(ran)} test cases passed, GPU parts skipped with 'no GPU'")
