#!/usr/bin/env bash
# The GPU bundle runs from itself alone: pack it from this build
# (scripts/gpu-bundle.sh --no-build), unpack it into a clean directory, and
# run gpu-suite.sh in a network namespace with no network, a mount namespace
# where the system's GStreamer plugin folders are empty, and a bare
# environment. Every CPU part must pass from the bundle (the suite's own
# "libraries" check fails on any library loaded from outside it but glibc
# and the driver), and on this machine without a GPU every GPU part must skip
# with "no GPU".
#
#   check-bundle-offline.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
source_dir=$(cd "$1" && pwd)
build_dir=$(cd "$2" && pwd)
fail() { echo "check-bundle-offline: FAIL: $*" >&2; exit 1; }

tmp=$(mktemp -d /tmp/gpufan-bundle-check.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

cd "$source_dir"
BUILD_DIR=$build_dir bash scripts/gpu-bundle.sh --no-build --out "$tmp/made"
tarball=$tmp/made/gpufan-gpu-bundle.tar.gz
[[ -f $tarball ]] || fail "no tarball"
packed=$(du -m "$tarball" | cut -f1)
((packed <= 40)) || fail "the tarball is $packed MiB (target: 40 MiB at most)"

mkdir "$tmp/machine"
tar -C "$tmp/machine" -xzf "$tarball"
rm -rf "$tmp/made"  # nothing of the packing side is left to lean on
suite=$tmp/machine/gpufan-gpu-bundle/gpu-suite.sh

# Root can make the namespaces directly; a user maps itself to root in a user
# namespace first.
ns=(unshare --net --mount)
[[ $(id -u) -eq 0 ]] || ns+=(--map-root-user)
"${ns[@]}" true 2>/dev/null || fail "cannot make namespaces here (${ns[*]})"

# Inside: the system's GStreamer plugin folders mounted empty (checked), no
# network interface but lo (checked), then the suite.
inside='set -e'
for d in /usr/lib/*/gstreamer-1.0 /usr/lib/*/gstreamer1.0 /usr/local/lib/*/gstreamer-1.0; do
  [[ -d $d ]] || continue
  inside+="; mount --bind '$tmp/empty' '$d'; [ -z \"\$(ls -A '$d')\" ]"
done
inside+="; if [ \"\$(awk 'NR > 2 { print \$1 }' /proc/net/dev)\" != lo: ]; then echo 'network interfaces besides lo'; exit 3; fi"
inside+="; exec bash '$suite' --quick --out '$tmp/report'"
mkdir "$tmp/empty"
set +e
env -i PATH=/usr/bin:/bin HOME="$tmp" LANG=C.UTF-8 \
  "${ns[@]}" bash -c "$inside" 2>&1 | tee "$tmp/suite.log"
rc=${PIPESTATUS[0]}
set -e
((rc == 0)) || fail "gpu-suite.sh exited $rc"

/usr/bin/python3 - "$tmp/report/report.json" "$tmp/machine/gpufan-gpu-bundle" <<'PY'
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
if errors:
    print("check-bundle-offline: FAIL:\n  " + "\n  ".join(errors))
    sys.exit(1)
print(f"check-bundle-offline: the bundle ran offline: {len(checks)} checks, "
      f"{len(ran)} test cases passed, GPU parts skipped with 'no GPU'")
PY
