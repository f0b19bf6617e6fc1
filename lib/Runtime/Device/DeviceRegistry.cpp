//===- DeviceRegistry.cpp - Device backends by name ------------------------===//
//
// The CPU backend is always registered. Other backends live in their own
// shared libraries, loaded with dlopen on first use, whose entry point
// fills a DeviceBackend (DeviceBackends.h): the CUDA backend links
// libtorch_cuda, cuBLAS and the CUDA runtime, which a CPU process must not
// pay for at start-up.
//
// A backend library's functions may throw any std::exception; the registry
// turns what they throw at creation into DeviceError.
//
//===----------------------------------------------------------------------===//

#include "DeviceBackends.h"

#include "ds/Runtime/Launch.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>

namespace ds::runtime {

const char *streamRoleName(StreamRole role) {
  switch (role) {
  case StreamRole::Compute:
    return "compute";
  case StreamRole::Copy:
    return "copy";
  case StreamRole::Gather:
    return "gather";
  case StreamRole::Communication:
    return "communication";
  }
  return "?";
}

namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, DeviceBackend> backends;

  Registry() { backends.emplace("cpu", detail::cpuBackend()); }
};

Registry &registry() {
  static Registry instance;
  return instance;
}

std::string folderOf(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

/// The folder of the binary (executable or shared library) this code is
/// linked into.
std::string ownBinaryFolder() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void *>(&ownBinaryFolder), &info) &&
      info.dli_fname) {
    std::string path = info.dli_fname;
    // Only the main executable can be named without a folder (argv[0] when
    // it was found on PATH): ask the kernel where it is.
    if (path.find('/') == std::string::npos) {
      char exe[4096];
      ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
      if (n > 0)
        path.assign(exe, size_t(n));
    }
    return folderOf(path);
  }
  return ".";
}

std::string upperCase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return char(std::toupper(c)); });
  return text;
}

/// "cuda" -> libDSRuntimeCUDA.so.
std::string libraryFileName(const std::string &name) {
  return "libDSRuntime" + upperCase(name) + ".so";
}

/// "cuda" -> DS_CUDA_BACKEND: the library's path, when set.
std::string libraryVariable(const std::string &name) {
  return "DS_" + upperCase(name) + "_BACKEND";
}

/// Where backend `name`'s library may be, in order.
std::vector<std::string> libraryCandidates(const std::string &name) {
  std::vector<std::string> paths;
  if (const char *path = std::getenv(libraryVariable(name).c_str());
      path && *path)
    return {path};
  std::string file = libraryFileName(name);
  std::string own = ownBinaryFolder();
  paths.push_back(own + "/" + file);
  paths.push_back(own + "/../lib/" + file);
#ifdef DS_BACKEND_LIBRARY_DIR
  paths.push_back(std::string(DS_BACKEND_LIBRARY_DIR) + "/" + file);
#endif
  return paths;
}

/// Backend `name`, loading its library first when needed.
DeviceBackend backendNamed(const std::string &name) {
  loadDeviceBackend(name);
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.backends.at(name);
}

bool fileExists(const std::string &path) {
  return ::access(path.c_str(), R_OK) == 0;
}

} // namespace

void registerDeviceBackend(DeviceBackend backend) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::string name = backend.name;
  r.backends[name] = std::move(backend);
}

std::vector<std::string> registeredDeviceBackends() {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> names;
  for (const auto &entry : r.backends)
    names.push_back(entry.first);
  return names;
}

std::vector<std::string> knownDeviceBackends() {
  std::vector<std::string> names = {"cpu"};
#ifdef DS_HAVE_CUDA_BACKEND
  names.push_back("cuda");
#endif
  return names;
}

void loadDeviceBackend(const std::string &name) {
  {
    Registry &r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    if (r.backends.count(name))
      return;
  }
  std::vector<std::string> known = knownDeviceBackends();
  std::string knownText;
  for (const std::string &k : known)
    knownText += (knownText.empty() ? "" : ", ") + k;
  if (std::find(known.begin(), known.end(), name) == known.end()) {
    if (name == "cuda")
      throw DeviceError(
          "device 'cuda': this build has no CUDA backend (it was configured "
          "without nvcc or without a CUDA LibTorch, or with "
          "-DDS_ENABLE_CUDA=OFF); devices of this build: " +
          knownText);
    throw DeviceError("unknown device '" + name +
                      "' (devices of this build: " + knownText + ")");
  }
  std::vector<std::string> candidates = libraryCandidates(name);
  std::string tried;
  for (const std::string &path : candidates) {
    if (!fileExists(path)) {
      tried += (tried.empty() ? " " : "; ") + path + ": not found";
      continue;
    }
    // Its libtorch_cuda binds to the libtorch_cpu / libc10 already loaded
    // (by soname) and registers its kernels and CUDA hooks with them; the
    // process must not have asked ATen about CUDA before (the backend's
    // create() checks). RTLD_GLOBAL: later libraries see its symbols.
    void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!handle) {
      const char *error = dlerror();
      throw DeviceError("device '" + name + "': the backend library " + path +
                        " does not load: " + (error ? error : "?"));
    }
    std::string symbol = "dsDeviceBackend_" + name;
    auto entry =
        reinterpret_cast<DsDeviceBackendEntry>(dlsym(handle, symbol.c_str()));
    if (!entry)
      throw DeviceError("device '" + name + "': " + path + " has no " +
                        symbol + " (not a backend library of this runtime)");
    DeviceBackend backend;
    if (const char *problem = entry(&backend))
      throw DeviceError("device '" + name + "': " + problem);
    backend.name = name;
    registerDeviceBackend(std::move(backend));
    return;
  }
  throw DeviceError("device '" + name + "': its backend library " +
                    libraryFileName(name) + " was not found (" + tried +
                    "); set " + libraryVariable(name) + " to its path");
}

std::shared_ptr<Device> createDevice(const std::string &spec) {
  std::string name = spec;
  int64_t index = 0;
  size_t colon = spec.find(':');
  if (colon != std::string::npos) {
    name = spec.substr(0, colon);
    std::string number = spec.substr(colon + 1);
    if (number.empty() ||
        number.find_first_not_of("0123456789") != std::string::npos ||
        number.size() > 6)
      throw DeviceError("device '" + spec +
                        "': expected NAME or NAME:INDEX with INDEX >= 0");
    index = std::stoll(number);
  }
  if (name.empty())
    throw DeviceError("device '" + spec + "': no backend name");
  DeviceBackend backend = backendNamed(name);
  try {
    int64_t count = backend.deviceCount();
    if (count == 0)
      throw DeviceError("device '" + spec + "': " + backend.unavailableReason());
    if (index >= count)
      throw DeviceError("device '" + spec + "': index " +
                        std::to_string(index) + " is out of range (" +
                        std::to_string(count) + " " + name + " device" +
                        (count == 1 ? "" : "s") + " visible)");
    return backend.create(index);
  } catch (const DeviceError &) {
    throw;
  } catch (const std::exception &e) {
    throw DeviceError("device '" + spec + "': " + e.what());
  }
}

std::shared_ptr<Device> cpuDevice() { return createDevice("cpu"); }

std::shared_ptr<Device> createRankDevice(const std::string &spec) {
  if (spec.find(':') != std::string::npos || spec == "cpu")
    return createDevice(spec);
  // The launcher's local rank (LOCAL_RANK, Open MPI's, MPICH's, Slurm's;
  // a RANK/WORLD_SIZE launch without LOCAL_RANK: its RANK).
  int64_t local = 0;
  try {
    local = LaunchInfo::fromEnvironment().localRank;
  } catch (const std::exception &) {
    // Malformed variables are the rank group's to report.
  }
  // A launcher that gives each rank its own CUDA_VISIBLE_DEVICES leaves it
  // one device, cuda:0, whatever its local rank.
  if (local != 0 && backendNamed(spec).deviceCount() == 1)
    local = 0;
  return createDevice(spec + ":" + std::to_string(local));
}

} // namespace ds::runtime

namespace ds::runtime {

bool deviceHasChannel(const Device &device) {
  return bool(backendNamed(device.backendName()).createChannel);
}

std::unique_ptr<Channel> createDeviceChannel(Device &device,
                                             Rendezvous &rendezvous,
                                             const std::string &key) {
  DeviceBackend backend = backendNamed(device.backendName());
  if (!backend.createChannel)
    throw DeviceError("the " + backend.name +
                      " backend has no collective channel of its own");
  return backend.createChannel(device, rendezvous, key);
}

} // namespace ds::runtime
