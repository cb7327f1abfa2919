// SPDX-License-Identifier: LGPL-2.1-or-later
// libgpufan-nvrtc-compat.so over this machine's NVRTC: a kernel compiled for
// compute_30, as GStreamer 1.22's libgstcuda asks, must compile (raised to
// the oldest architecture this NVRTC supports where it rejects compute_30,
// unchanged where it accepts it); an architecture it supports passes through.
// Needs no GPU, only NVRTC; exit 77 (skipped) where there is none.
//
//   test-nvrtc-compat SHIM
#include <dlfcn.h>
#include <glob.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;
typedef nvrtcResult CreateFn(nvrtcProgram *, const char *, const char *, int,
                             const char *const *, const char *const *);
typedef nvrtcResult CompileFn(nvrtcProgram, int, const char *const *);
typedef nvrtcResult DestroyFn(nvrtcProgram *);
typedef nvrtcResult SizeFn(nvrtcProgram, size_t *);
typedef nvrtcResult TextFn(nvrtcProgram, char *);

constexpr int kSkip = 77;
constexpr const char *kKernel =
    "extern \"C\" __global__ void mark(int *p) { p[threadIdx.x] = 1; }\n";

// The machine's NVRTC: $GPUFAN_NVRTC_LIBRARY, else the first versioned one
// of the usual CUDA toolkit places.
std::string FindNvrtc() {
  const char *env = std::getenv("GPUFAN_NVRTC_LIBRARY");
  if (env != nullptr && env[0] != '\0')
    return env;
  for (const char *pattern :
       {"/usr/local/cuda/lib64/libnvrtc.so.[0-9]*",
        "/usr/local/cuda*/lib*/libnvrtc.so.[0-9]*",
        "/usr/local/cuda*/targets/*/lib/libnvrtc.so.[0-9]*",
        "/usr/lib/*/libnvrtc.so.[0-9]*"}) {
    glob_t found;
    if (glob(pattern, 0, nullptr, &found) == 0 && found.gl_pathc > 0) {
      std::string path = found.gl_pathv[0];
      globfree(&found);
      return path;
    }
    globfree(&found);
  }
  return std::string();
}

struct Api {
  CreateFn *create;
  CompileFn *compile;
  DestroyFn *destroy;
  SizeFn *ptx_size;
  TextFn *ptx;
  SizeFn *log_size;
  TextFn *log;
};

bool Load(void *library, Api *api) {
  api->create =
      reinterpret_cast<CreateFn *>(dlsym(library, "nvrtcCreateProgram"));
  api->compile =
      reinterpret_cast<CompileFn *>(dlsym(library, "nvrtcCompileProgram"));
  api->destroy =
      reinterpret_cast<DestroyFn *>(dlsym(library, "nvrtcDestroyProgram"));
  api->ptx_size = reinterpret_cast<SizeFn *>(dlsym(library, "nvrtcGetPTXSize"));
  api->ptx = reinterpret_cast<TextFn *>(dlsym(library, "nvrtcGetPTX"));
  api->log_size =
      reinterpret_cast<SizeFn *>(dlsym(library, "nvrtcGetProgramLogSize"));
  api->log = reinterpret_cast<TextFn *>(dlsym(library, "nvrtcGetProgramLog"));
  return api->create && api->compile && api->destroy && api->ptx_size &&
         api->ptx && api->log_size && api->log;
}

// Compiles kKernel with `option`; the PTX's ".target" ("sm_75"), or empty
// with the log in *why.
std::string CompileTarget(const Api& api, const char *option,
                          std::string *why) {
  nvrtcProgram program = nullptr;
  if (api.create(&program, kKernel, "mark.cu", 0, nullptr, nullptr) != 0) {
    *why = "nvrtcCreateProgram failed";
    return std::string();
  }
  std::string target;
  const char *options[] = {option};
  if (api.compile(program, 1, options) == 0) {
    size_t size = 0;
    api.ptx_size(program, &size);
    std::string ptx(size, '\0');
    api.ptx(program, &ptx[0]);
    const size_t at = ptx.find(".target ");
    if (at != std::string::npos)
      target = ptx.substr(at + 8, ptx.find_first_of(", \n", at + 8) - at - 8);
    else
      *why = "no .target in the PTX";
  } else {
    size_t size = 0;
    api.log_size(program, &size);
    std::string log(size, '\0');
    if (size > 0)
      api.log(program, &log[0]);
    *why = log.substr(0, log.find('\0'));  // up to its NUL
  }
  api.destroy(&program);
  return target;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: test-nvrtc-compat SHIM\n");
    return 2;
  }
  const std::string nvrtc = FindNvrtc();
  if (nvrtc.empty()) {
    std::printf("SKIP: no NVRTC on this machine (a CUDA toolkit's libnvrtc)\n");
    return kSkip;
  }
  setenv("GPUFAN_NVRTC_LIBRARY", nvrtc.c_str(), 1);
  // First, as in libgstcuda where nothing loaded NVRTC before it, and as
  // GModule opens it (libgstcuda): into the global scope.
  void *shim_library = dlopen(argv[1], RTLD_LAZY | RTLD_GLOBAL);
  Api shim;
  if (shim_library == nullptr || !Load(shim_library, &shim)) {
    std::printf("FAIL: the shim %s does not load: %s\n", argv[1],
                shim_library ? "entry points missing" : dlerror());
    return 1;
  }

  void *real_library = dlopen(nvrtc.c_str(), RTLD_NOW | RTLD_LOCAL);
  Api real;
  if (real_library == nullptr || !Load(real_library, &real)) {
    std::printf("SKIP: %s does not load as NVRTC: %s\n", nvrtc.c_str(),
                real_library ? "entry points missing" : dlerror());
    return kSkip;
  }
  int failures = 0;
  // Through the shim first: nothing has bound NVRTC's own symbols yet.
  std::string shim_why;
  const std::string through =
      CompileTarget(shim, "--gpu-architecture=compute_30", &shim_why);
  std::string direct_why;
  const std::string direct =
      CompileTarget(real, "--gpu-architecture=compute_30", &direct_why);
  std::printf(
      "%s, compute_30 directly: %s\n", nvrtc.c_str(),
      direct.empty() ? ("refused: " + direct_why).c_str() : direct.c_str());
  if (through.empty()) {
    std::printf("FAIL: compute_30 through the shim: %s\n", shim_why.c_str());
    ++failures;
  } else if (!direct.empty() && through != direct) {
    std::printf(
        "FAIL: NVRTC accepts compute_30 (%s) but the shim changed it to %s\n",
        direct.c_str(), through.c_str());
    ++failures;
  } else {
    std::printf("compute_30 through the shim: %s\n", through.c_str());
  }

  // An architecture the shim raised to is supported: it must pass unchanged.
  if (!through.empty() && direct.empty()) {
    const std::string arch = through.substr(3);  // "75" of "sm_75"
    const std::string option = "--gpu-architecture=compute_" + arch;
    std::string why;
    const std::string same = CompileTarget(shim, option.c_str(), &why);
    if (same != through) {
      std::printf("FAIL: %s through the shim gave '%s' (%s)\n", option.c_str(),
                  same.c_str(), why.c_str());
      ++failures;
    }
  }
  std::printf("%s\n", failures == 0 ? "PASS" : "FAIL");
  return failures == 0 ? 0 : 1;
}
