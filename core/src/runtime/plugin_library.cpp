#include "runtime/plugin_library.h"

#include <dlfcn.h>
#include <link.h>

#include <boost/dll/shared_library.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "runtime/device.h"
#include "runtime/host_services.h"
#include "runtime/plugin_vetting.h"
#include "support/error.h"
#include "support/log.h"

namespace spora {
namespace fs = std::filesystem;

void throw_if_error(spora_plugin_error_t* err, const std::string& context) {
  if (!err) return;
  Code code = Code::kInternal;
  switch (err->code) {
    case SPORA_PLUGIN_INVALID_ARGUMENT: code = Code::kInvalidArgument; break;
    case SPORA_PLUGIN_NOT_FOUND: code = Code::kNotFound; break;
    case SPORA_PLUGIN_UNAVAILABLE: code = Code::kUnavailable; break;
    case SPORA_PLUGIN_UNIMPLEMENTED: code = Code::kUnimplemented; break;
    case SPORA_PLUGIN_OUT_OF_MEMORY: code = Code::kOutOfMemory; break;
    case SPORA_PLUGIN_TIMEOUT: code = Code::kTimeout; break;
    case SPORA_PLUGIN_ABORTED: code = Code::kAborted; break;
    default: break;
  }
  std::string msg = err->message ? err->message : "(no message)";
  if (err->destroy) err->destroy(err);
  throw Error(code, context.empty() ? msg : context + ": " + msg);
}

namespace {

std::mutex g_registry_mu;
std::map<std::string, PluginRecord*>& registry() {
  static auto* m = new std::map<std::string, PluginRecord*>;  // never freed: plugins outlive everything
  return *m;
}

// libspora-device-cuda.so -> ("device", "cuda").
bool parse_file_name(const std::string& file, std::string* kind, std::string* name) {
  for (const char* k : {"device", "collective"}) {
    const std::string prefix = std::string("libspora-") + k + "-";
    if (file.rfind(prefix, 0) == 0 && file.size() > prefix.size() + 3 && file.compare(file.size() - 3, 3, ".so") == 0) {
      *kind = k;
      *name = file.substr(prefix.size(), file.size() - prefix.size() - 3);
      return true;
    }
  }
  return false;
}

// Boost.DLL resets dlerror() before reporting a failure, losing the reason
// users need ("libcuda.so.1: cannot open shared object file"); ask dlopen
// again for the text.
std::string dlopen_reason(const std::string& path) {
  dlerror();
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h) {
    dlclose(h);
    return "unknown dlopen failure";
  }
  const char* e = dlerror();
  return e ? e : "unknown dlopen failure";
}

// glibc's dlopen maps PT_LOAD segments without checking them against the
// file's size and then writes into them (zero-filling the tail of the
// last file page), so a truncated plugin kills the process with SIGBUS.
// Returns why the file cannot be a loadable ELF object, or "" to let dlopen
// decide (it gives good messages for the other cases).
std::string elf_problem(const std::string& path) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) return "";
  std::ifstream in(path, std::ios::binary);
  ElfW(Ehdr) eh{};
  if (!in.read(reinterpret_cast<char*>(&eh), sizeof eh)) return "";  // dlopen: "file too short"
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return "";       // dlopen: "invalid ELF header"
  if (eh.e_ident[EI_CLASS] != (sizeof(void*) == 8 ? ELFCLASS64 : ELFCLASS32) || eh.e_phentsize != sizeof(ElfW(Phdr)))
    return "";  // dlopen: "wrong ELF class"
  const uintmax_t ph_end = static_cast<uintmax_t>(eh.e_phoff) + static_cast<uintmax_t>(eh.e_phnum) * sizeof(ElfW(Phdr));
  if (ph_end > size) return "";  // dlopen: "cannot read file data"
  in.seekg(static_cast<std::streamoff>(eh.e_phoff));
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    ElfW(Phdr) ph{};
    if (!in.read(reinterpret_cast<char*>(&ph), sizeof ph)) return "";
    if (ph.p_type == PT_LOAD && static_cast<uintmax_t>(ph.p_offset) + ph.p_filesz > size)
      return "truncated file: segment " + std::to_string(i) + " ends at byte " +
             std::to_string(static_cast<uintmax_t>(ph.p_offset) + ph.p_filesz) + " but the file has " +
             std::to_string(size) + " bytes; reinstall the plugin";
  }
  return "";
}

// The minimum v1.0 device table: the functions without which no tensor can
// live on the device.
std::string missing_device_functions(const spora_device_api_t* t) {
  std::string missing;
  auto need = [&](const void* fn, const char* n) {
    if (!fn) missing += missing.empty() ? n : std::string(", ") + n;
  };
  need(reinterpret_cast<const void*>(t->initialize), "initialize");
  need(reinterpret_cast<const void*>(t->device_count), "device_count");
  need(reinterpret_cast<const void*>(t->device_properties), "device_properties");
  need(reinterpret_cast<const void*>(t->mem_alloc), "mem_alloc");
  need(reinterpret_cast<const void*>(t->mem_free), "mem_free");
  need(reinterpret_cast<const void*>(t->copy_h2d), "copy_h2d");
  need(reinterpret_cast<const void*>(t->copy_d2h), "copy_d2h");
  need(reinterpret_cast<const void*>(t->copy_d2d), "copy_d2d");
  need(reinterpret_cast<const void*>(t->stream_create), "stream_create");
  need(reinterpret_cast<const void*>(t->stream_destroy), "stream_destroy");
  need(reinterpret_cast<const void*>(t->stream_synchronize), "stream_synchronize");
  return missing;
}

// OpenMP reads its wait policy once, when its runtime loads, and for the cpu
// plugin that happens inside the dlopen of the plugin (oneDNN and the
// plugin's loops link libgomp). libgomp's default keeps a thread spinning
// for up to ~3 ms after each parallel region, so when another process wants
// a core the spinning thread takes its time slices from the working one
// (issue 19, 2 cores, one other busy process: MLP training 0.6-4.7k
// samples/s spinning, 13-38k passive). Passive waiting costs on a quiet
// machine instead: every region then wakes a sleeping thread, ~50 us on the
// 2-vCPU VM of issue 19 (an empty region after a 20 us serial gap: 75 us
// passive, 25 us spinning), and a training step has dozens of regions (MLP
// b128: 40k samples/s passive, 61k spinning 130 us). So the host asks
// libgomp for a short spin, GOMP_SPINCOUNT=1000 (~13 us of pause
// instructions there): short gaps between one step's kernels stay awake,
// while a thread whose partner was descheduled gives the core back soon
// (MLP: 53k quiet, 31k beside one busy process; of 1000, 2000, 3000 and
// 10000 only 1000 kept the busy figure above half the quiet one). OMP_WAIT_POLICY is
// set to passive too, for OpenMP runtimes other than libgomp (libgomp lets
// GOMP_SPINCOUNT win). Nothing changes when the user chose either
// variable; a runtime that another library loaded earlier keeps what it
// read.
void default_openmp_wait_policy() {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
  setenv("GOMP_SPINCOUNT", "1000", 0);
  setenv("OMP_WAIT_POLICY", "passive", 0);
}

}  // namespace

PluginRecord* PluginRecord::open(const std::string& path) {
  std::error_code ec;
  fs::path real = fs::canonical(path, ec);
  const std::string key = ec ? fs::absolute(path, ec).lexically_normal().string() : real.string();
  std::lock_guard<std::mutex> lock(g_registry_mu);
  auto& reg = registry();
  auto it = reg.find(key);
  if (it != reg.end()) return it->second;
  auto* rec = new PluginRecord;  // intentionally never deleted (see header)
  rec->path_ = key;
  rec->file_ = fs::path(key).filename().string();
  if (!parse_file_name(rec->file_, &rec->kind_, &rec->name_)) rec->name_ = rec->file_;
  reg[key] = rec;
  rec->load();
  return rec;
}

PluginRecord* PluginRecord::find_ready(const std::string& name) {
  std::vector<PluginRecord*> candidates;
  {
    std::lock_guard<std::mutex> lock(g_registry_mu);
    for (const auto& [path, rec] : registry())
      if (rec->loaded_ && rec->name_ == name && rec->device_api_) candidates.push_back(rec);
  }
  for (PluginRecord* rec : candidates)
    if (rec->ensure_ready()) return rec;
  return nullptr;
}

void PluginRecord::fail(std::string why) {
  loaded_ = false;
  reason_ = "[loader] " + file_ + ": " + why;
  logger().info("{} ({})", reason_, path_);
}

void PluginRecord::load() {
  namespace dll = boost::dll;
  std::error_code ec;
  if (!fs::is_regular_file(path_, ec)) return fail("not a regular file");
  if (const std::string why = elf_problem(path_); !why.empty()) return fail(why);
  // Its constructors, probe and entry ran in a probe process first; one
  // that crashed, exited or hung there is never opened here.
  if (const PluginClearance c = plugin_clearance(path_); !c.may_load) return fail(c.reason);
  // Kept alive for the process: Boost.DLL's destructor would dlclose.
  auto* lib = new dll::shared_library;
  default_openmp_wait_policy();
  try {
    lib->load(path_, dll::load_mode::rtld_now | dll::load_mode::rtld_local);
  } catch (const std::exception&) {
    delete lib;
    return fail("cannot be loaded: " + dlopen_reason(path_));
  }
  library_ = lib;
  if (!lib->has(SPORA_PLUGIN_ENTRY_SYMBOL)) {
    for (int v = 2; v <= 9; ++v) {
      if (lib->has("spora_plugin_entry_v" + std::to_string(v)))
        return fail("built for plugin ABI v" + std::to_string(v) + ", but this libspora speaks v" +
                    std::to_string(SPORA_PLUGIN_ABI_MAJOR) + "; upgrade Spora or use a matching plugin build");
    }
    return fail("exports no spora_plugin_entry_v1 symbol: not a Spora plugin (build it with spora_add_plugin)");
  }
  if (lib->has(SPORA_PLUGIN_PROBE_SYMBOL)) {
    spora_probe_result_t probe{};
    probe.struct_size = sizeof(probe);
    probe.score = 1;
    lib->get<void(spora_probe_result_t*)>(SPORA_PLUGIN_PROBE_SYMBOL)(&probe);
    probe.reason[sizeof(probe.reason) - 1] = '\0';
    score_ = probe.score;
    if (probe.score <= 0) return fail(std::string("cannot run here: ") + (probe.reason[0] ? probe.reason : "probe scored 0"));
  } else {
    score_ = 1;
  }
  const spora_host_t* host = host_description();
  spora_plugin_info_t info{};
  info.struct_size = sizeof(info);
  auto entry = lib->get<spora_plugin_error_t*(const spora_host_t*, spora_plugin_info_t*)>(SPORA_PLUGIN_ENTRY_SYMBOL);
  if (spora_plugin_error_t* err = entry(host, &info)) {
    std::string msg = err->message ? err->message : "(no message)";
    if (err->destroy) err->destroy(err);
    return fail("entry failed: " + msg);
  }
  if (info.abi_major != SPORA_PLUGIN_ABI_MAJOR)
    return fail("built for plugin ABI " + std::to_string(info.abi_major) + "." + std::to_string(info.abi_minor) +
                ", this libspora speaks " + std::to_string(SPORA_PLUGIN_ABI_MAJOR) + ".x; rebuild the plugin");
  if (info.abi_minor < host->abi_minor_floor)
    return fail("built for plugin ABI 1." + std::to_string(info.abi_minor) + ", older than the oldest accepted 1." +
                std::to_string(host->abi_minor_floor) + "; rebuild it against the current plugin.h");
  if (!info.name || !*info.name) return fail("entry returned no plugin name");
  const std::string kind = info.kind == SPORA_PLUGIN_KIND_DEVICE       ? "device"
                           : info.kind == SPORA_PLUGIN_KIND_COLLECTIVE ? "collective"
                                                                       : "";
  if (kind.empty()) return fail("entry returned unknown plugin kind " + std::to_string(info.kind));
  std::string file_kind, file_name;
  if (parse_file_name(file_, &file_kind, &file_name) && (file_kind != kind || file_name != info.name))
    return fail("file name says " + file_kind + " '" + file_name + "' but the plugin reports " + kind + " '" +
                info.name + "'");
  name_ = info.name;
  kind_ = kind;
  version_ = info.version ? info.version : "";
  build_ = info.build ? info.build : "";
  if (!info.api) return fail("entry returned no function table");
  if (kind == "device") {
    auto* t = static_cast<const spora_device_api_t*>(info.api);
    if (t->struct_size < offsetof(spora_device_api_t, shutdown))
      return fail("device table is too small (" + std::to_string(t->struct_size) + " bytes)");
    const std::string missing = missing_device_functions(t);
    if (!missing.empty()) return fail("device table lacks required functions: " + missing);
    device_api_ = t;
  } else {
    auto* t = static_cast<const spora_collective_api_t*>(info.api);
    if (t->struct_size < offsetof(spora_collective_api_t, shutdown))
      return fail("collective table is too small (" + std::to_string(t->struct_size) + " bytes)");
    if (!t->initialize || !t->comm_init || !t->all_reduce)
      return fail("collective table lacks initialize, comm_init or all_reduce");
    collective_api_ = t;
  }
  loaded_ = true;
  logger().debug("[loader] loaded {} plugin '{}' {} from {}", kind_, name_, version_, path_);
}

bool PluginRecord::ensure_ready() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!loaded_) return false;
  if (init_done_) return init_ok_;
  init_done_ = true;
  try {
    if (device_api_) {
      throw_if_error(device_api_->initialize(), "");
      int32_t n = 0;
      throw_if_error(device_api_->device_count(&n), "");
      for (int32_t i = 0; i < n; ++i) devices_.push_back(std::make_unique<Device>(this, i));
      if (n == 0) {
        reason_ = "[loader] " + file_ + ": initialised but reports no devices";
        return init_ok_ = false;
      }
    } else if (collective_api_) {
      throw_if_error(collective_api_->initialize(), "");
    }
    init_ok_ = true;
  } catch (const std::exception& e) {
    devices_.clear();
    reason_ = "[loader] " + file_ + ": initialize failed: " + e.what();
    init_ok_ = false;
  }
  if (!init_ok_) logger().info("{}", reason_);
  return init_ok_;
}

bool PluginRecord::available() const {
  std::lock_guard<std::mutex> lock(mu_);
  return loaded_ && (!init_done_ || init_ok_);
}

std::string PluginRecord::reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reason_;
}

}  // namespace spora
