# Sourced, not run: what gpu-suite.sh and gpu-bench.sh share, from an
# unpacked GPU bundle (scripts/gpu-bundle.sh copies this file into it):
#   bundle_check BUNDLE NAME   is this an unpacked bundle in a usable path
#   bundle_env BUNDLE WORK     the bundle's private prefix (exports; sets bundle_ld)
#   gpu_probe DIR              what nvidia-smi says (sets gpu_state, gpu_*)
#   json_string, tail_of       report helpers
# Needs bash, coreutils, awk, sed and grep of the machine.
# shellcheck shell=bash disable=SC2034  # the sourcing scripts read what is set here

bundle_check() {  # BUNDLE NAME: exits 2 when BUNDLE is no unpacked bundle
  [[ -x $1/bin/gst-launch-1.0 && -d $1/lib/gstreamer-1.0 ]] || {
    echo "$2: $1 is not an unpacked GPU bundle (no bin/gst-launch-1.0)" >&2
    exit 2
  }
  [[ $1 != *[[:space:]]* ]] || {
    echo "$2: unpack the bundle in a path without spaces (gst-launch lines name files in it)" >&2
    exit 2
  }
}

# The private prefix: the bundle's libraries, plugins, plugin scanner and a
# registry of its own in WORK; the machine gives only glibc, the NVIDIA driver
# and NVRTC. Exports the GStreamer, NVRTC, hwloc and CUDA variables and sets
# bundle_ld, the LD_LIBRARY_PATH that the bundle's programs (and only they)
# run with: the machine's own tools keep the machine's libraries.
bundle_env() {  # BUNDLE WORK
  local bundle=$1 work=$2 d driver_dirs="" nvrtc="" ldconfig_bin
  mkdir -p "$work/empty"
  # The driver's own folder stays reachable where the caller's library path
  # named it (containers often put libcuda there rather than in ld.so.cache).
  local caller_ld
  IFS=: read -r -a caller_ld <<<"${LD_LIBRARY_PATH:-}"
  for d in "${caller_ld[@]}"; do
    if [[ -n $d ]] && compgen -G "$d/libcuda.so*" >/dev/null; then
      driver_dirs+=:$d
    fi
  done
  # NVRTC (the CUDA toolkit's run-time compiler) builds nvcodec's conversion
  # and scaling kernels. GStreamer 1.22 asks it for compute_30 or compute_52,
  # which NVRTC 13 refuses: the bundle's libgpufan-nvrtc-compat.so passes the
  # calls on to the machine's NVRTC with the architecture raised to the
  # oldest it supports. A GST_CUDA_NVRTC_LIBNAME set by the caller is kept.
  if [[ -z ${GST_CUDA_NVRTC_LIBNAME:-} ]]; then
    ldconfig_bin=$(command -v ldconfig || echo /sbin/ldconfig)
    nvrtc=$( { "$ldconfig_bin" -p 2>/dev/null | awk '$1 ~ /^libnvrtc\.so\.[0-9]+$/ { print $NF }'
      timeout 60 find /usr/local /opt /usr/lib -maxdepth 8 -name 'libnvrtc.so.[0-9]*' 2>/dev/null; } |
      grep -v -e builtins -e '\.alt\.' | head -1)
    if [[ -n $nvrtc ]]; then
      export GPUFAN_NVRTC_LIBRARY=$nvrtc
      export GST_CUDA_NVRTC_LIBNAME=$bundle/lib/libgpufan-nvrtc-compat.so
      driver_dirs+=:$(dirname "$nvrtc")  # where its libnvrtc-builtins is
    fi
  fi
  bundle_ld=$bundle/lib$driver_dirs
  export GST_PLUGIN_SYSTEM_PATH_1_0=$bundle/lib/gstreamer-1.0
  export GST_PLUGIN_SYSTEM_PATH=$bundle/lib/gstreamer-1.0
  export GST_PLUGIN_PATH_1_0="" GST_PLUGIN_PATH=""
  export GST_PLUGIN_SCANNER_1_0=$bundle/libexec/gst-plugin-scanner
  export GST_PLUGIN_SCANNER=$GST_PLUGIN_SCANNER_1_0
  export GST_REGISTRY_1_0=$work/registry.bin GST_REGISTRY=$work/registry.bin
  export GIO_MODULE_DIR=$work/empty GST_DEBUG_NO_COLOR=1
  # libhwloc loads every hwloc_*.so of its plugin folder, by default the
  # machine's (/usr/lib/x86_64-linux-gnu/hwloc on Debian), and through them
  # libpciaccess, libxml2, ICU, OpenCL, XNVCtrl: the bundle's own folder
  # holds none. hwloc's built-in Linux discovery still finds the PCI devices
  # (sysfs), so a GPU's NUMA node is found without them.
  export HWLOC_PLUGINS_PATH=$bundle/lib/hwloc
  unset GST_DEBUG GST_TRACERS HWLOC_COMPONENTS ${!GTEST_@}
  # CUDA ordinals in nvidia-smi's order, so that "GPU 0" is one GPU everywhere.
  export CUDA_DEVICE_ORDER=PCI_BUS_ID
}

# What nvidia-smi says, into DIR/nvidia-smi.{txt,csv}. Sets gpu_state:
# present, none (no GPU: gpu_reason says why) or failed (nvidia-smi fails on
# a machine with an NVIDIA device node); and gpu_count, gpu_name,
# gpu_driver, gpu_cuda, gpu_pci (of GPU 0).
gpu_probe() {  # DIR
  local dir=$1
  gpu_state=none gpu_reason="" gpu_count=0
  gpu_name="" gpu_driver="" gpu_cuda="" gpu_pci=""
  if ! command -v nvidia-smi >/dev/null; then
    gpu_reason="no GPU: nvidia-smi is not installed"
  elif ! timeout -k 10 60 nvidia-smi >"$dir/nvidia-smi.txt" 2>&1; then
    if [[ -e /dev/nvidiactl ]]; then
      gpu_state=failed
      gpu_reason="nvidia-smi failed on a machine with an NVIDIA device node: $(tail_of "$dir/nvidia-smi.txt" 2)"
    else
      gpu_reason="no GPU: nvidia-smi failed: $(tail_of "$dir/nvidia-smi.txt" 2)"
    fi
  else
    timeout -k 10 60 nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id,memory.total \
      --format=csv,noheader >"$dir/nvidia-smi.csv" 2>"$dir/nvidia-smi.err"
    gpu_count=$(grep -cE '^[0-9]+, ' "$dir/nvidia-smi.csv")
    if ((gpu_count == 0)); then
      gpu_reason="no GPU: nvidia-smi lists none"
    else
      gpu_state=present
      IFS=, read -r _ gpu_name gpu_driver gpu_pci _ < <(grep -m1 -E '^0, ' "$dir/nvidia-smi.csv")
      gpu_name=$(echo "$gpu_name" | sed 's/^ *//') gpu_driver=${gpu_driver// /}
      gpu_pci=${gpu_pci// /}
      gpu_cuda=$(sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' "$dir/nvidia-smi.txt" | head -1)
    fi
  fi
}

tail_of() { tail -n "${2:-5}" "$1" 2>/dev/null | tr '\n' ' ' | tr -cd '\11\40-\176' | cut -c1-400; }
json_string() {
  local s=$1
  s=${s//\\/\\\\} s=${s//\"/\\\"} s=${s//$'\t'/ } s=${s//$'\n'/ } s=${s//$'\r'/ }
  printf '"%s"' "$s"
}
