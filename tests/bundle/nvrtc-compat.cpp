// SPDX-License-Identifier: LGPL-2.1-or-later
// libgpufan-nvrtc-compat.so: the NVRTC entry points GStreamer 1.22's
// libgstcuda uses, forwarded to the machine's own NVRTC (the library named by
// $GPUFAN_NVRTC_LIBRARY), with one change. libgstcuda compiles its
// conversion and scaling kernels for --gpu-architecture=compute_30, then
// compute_52; NVRTC 13 (CUDA 13) accepts neither, so on a CUDA 13 machine
// cudaconvertscale and cudascale fail with "Could not compile code". An
// architecture older than the oldest this NVRTC supports is raised to that
// one (nvrtcGetSupportedArchs); PTX for it runs on every newer GPU. Anything
// else passes through unchanged.
//
// The GPU suite (scripts/gpu-suite.sh) hands it to libgstcuda through
// GST_CUDA_NVRTC_LIBNAME. Not part of the plugin: a compatibility shim for
// the bundle, where GStreamer 1.22 meets whatever CUDA the GPU machine has.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#define COMPAT_API extern "C" __attribute__((visibility("default")))

namespace {

// From nvrtc.h (not needed to build this).
typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;
constexpr nvrtcResult kInternalError = 11;  // NVRTC_ERROR_INTERNAL_ERROR

struct Nvrtc {
  nvrtcResult (*CreateProgram)(nvrtcProgram *, const char *, const char *, int,
                               const char *const *,
                               const char *const *) = nullptr;
  nvrtcResult (*CompileProgram)(nvrtcProgram, int,
                                const char *const *) = nullptr;
  nvrtcResult (*DestroyProgram)(nvrtcProgram *) = nullptr;
  nvrtcResult (*GetPTX)(nvrtcProgram, char *) = nullptr;
  nvrtcResult (*GetPTXSize)(nvrtcProgram, size_t *) = nullptr;
  nvrtcResult (*GetProgramLog)(nvrtcProgram, char *) = nullptr;
  nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t *) = nullptr;
  // Optional (NVRTC 11.2 and later).
  nvrtcResult (*GetNumSupportedArchs)(int *) = nullptr;
  nvrtcResult (*GetSupportedArchs)(int *) = nullptr;
  int oldest_arch = 0;  // 0: unknown, nothing is raised
  bool ok = false;
};

template <typename F>
bool Resolve(void *library, const char *name, F *out) {
  *out = reinterpret_cast<F>(dlsym(library, name));
  return *out != nullptr;
}

const Nvrtc& Real() {
  static std::once_flag once;
  static Nvrtc real;
  std::call_once(once, [] {
    const char *path = std::getenv("GPUFAN_NVRTC_LIBRARY");
    if (path == nullptr || path[0] == '\0') {
      std::fprintf(stderr,
                   "gpufan-nvrtc-compat: GPUFAN_NVRTC_LIBRARY is not set\n");
      return;
    }
    void *library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      std::fprintf(stderr, "gpufan-nvrtc-compat: %s\n", dlerror());
      return;
    }
    real.ok =
        Resolve(library, "nvrtcCreateProgram", &real.CreateProgram) &&
        Resolve(library, "nvrtcCompileProgram", &real.CompileProgram) &&
        Resolve(library, "nvrtcDestroyProgram", &real.DestroyProgram) &&
        Resolve(library, "nvrtcGetPTX", &real.GetPTX) &&
        Resolve(library, "nvrtcGetPTXSize", &real.GetPTXSize) &&
        Resolve(library, "nvrtcGetProgramLog", &real.GetProgramLog) &&
        Resolve(library, "nvrtcGetProgramLogSize", &real.GetProgramLogSize);
    if (!real.ok) {
      std::fprintf(stderr, "gpufan-nvrtc-compat: %s is not NVRTC\n", path);
      return;
    }
    int count = 0;
    if (Resolve(library, "nvrtcGetNumSupportedArchs",
                &real.GetNumSupportedArchs) &&
        Resolve(library, "nvrtcGetSupportedArchs", &real.GetSupportedArchs) &&
        real.GetNumSupportedArchs(&count) == 0 && count > 0) {
      std::vector<int> archs(static_cast<size_t>(count));
      if (real.GetSupportedArchs(archs.data()) == 0)
        real.oldest_arch = archs.front();  // ascending order
    }
  });
  return real;
}

// "--gpu-architecture=compute_30" (or -arch=) below the oldest supported
// architecture: the same option for the oldest one. Empty: keep the option.
std::string RaisedArchitecture(const char *option, int oldest) {
  for (const char *prefix : {"--gpu-architecture=compute_", "-arch=compute_"}) {
    const size_t n = std::strlen(prefix);
    if (std::strncmp(option, prefix, n) != 0)
      continue;
    char *end = nullptr;
    const long arch = std::strtol(option + n, &end, 10);
    if (end == option + n || *end != '\0' || oldest == 0 || arch >= oldest)
      return std::string();
    return std::string(prefix) + std::to_string(oldest);
  }
  return std::string();
}

}  // namespace

COMPAT_API nvrtcResult nvrtcCreateProgram(nvrtcProgram *program,
                                          const char *source, const char *name,
                                          int headers,
                                          const char *const *header_sources,
                                          const char *const *include_names) {
  const Nvrtc& real = Real();
  return real.ok ? real.CreateProgram(program, source, name, headers,
                                      header_sources, include_names)
                 : kInternalError;
}

COMPAT_API nvrtcResult nvrtcCompileProgram(nvrtcProgram program, int count,
                                           const char *const *options) {
  const Nvrtc& real = Real();
  if (!real.ok)
    return kInternalError;
  std::vector<std::string> changed(static_cast<size_t>(count));
  std::vector<const char *> passed(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    changed[i] = RaisedArchitecture(options[i], real.oldest_arch);
    passed[i] = changed[i].empty() ? options[i] : changed[i].c_str();
  }
  return real.CompileProgram(program, count, passed.data());
}

COMPAT_API nvrtcResult nvrtcDestroyProgram(nvrtcProgram *program) {
  const Nvrtc& real = Real();
  return real.ok ? real.DestroyProgram(program) : kInternalError;
}

COMPAT_API nvrtcResult nvrtcGetPTX(nvrtcProgram program, char *ptx) {
  const Nvrtc& real = Real();
  return real.ok ? real.GetPTX(program, ptx) : kInternalError;
}

COMPAT_API nvrtcResult nvrtcGetPTXSize(nvrtcProgram program, size_t *size) {
  const Nvrtc& real = Real();
  return real.ok ? real.GetPTXSize(program, size) : kInternalError;
}

COMPAT_API nvrtcResult nvrtcGetProgramLog(nvrtcProgram program, char *log) {
  const Nvrtc& real = Real();
  return real.ok ? real.GetProgramLog(program, log) : kInternalError;
}

COMPAT_API nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram program,
                                              size_t *size) {
  const Nvrtc& real = Real();
  return real.ok ? real.GetProgramLogSize(program, size) : kInternalError;
}
