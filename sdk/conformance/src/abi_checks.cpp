// ABI part of the kit: probe and entry behaviour, the version handshake,
// the info struct, extension chains and the function table.
#include <dlfcn.h>

#include <cstring>
#include <spora/spora.h>

#include "checks.h"

namespace spora::conformance {

void run_check(Channel& ch, const std::string& part, const std::string& name, const std::function<Outcome()>& fn) {
  ch.begin(name);
  Outcome o;
  try {
    o = fn();
  } catch (const CheckFailed& e) {
    o = Outcome::fail(e.what());
  } catch (const std::exception& e) {
    o = Outcome::fail(std::string("the check stopped: ") + e.what());
  }
  ch.result(part, name, o.status, o.detail);
}

Call call(spora_plugin_error_t* err, const std::string& what) {
  Call c;
  const TakenError t = take_error(err, what);
  if (!t.present) return c;
  c.ok = false;
  c.code = t.code;
  c.text = std::string(code_name(t.code)) + ": " + t.message;
  if (!t.problem.empty()) c.text += " (malformed error object: " + t.problem + ")";
  return c;
}

void must(const Call& c, const std::string& what) {
  if (!c.ok) throw CheckFailed(what + " failed: " + c.text);
}

namespace {

constexpr const char* kPart = "abi";

std::string file_name_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// "device"/"collective" and the name from libspora-<kind>-<name>.so.
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

// A fresh info struct as a host prepares it: zero-filled, struct_size set.
spora_plugin_info_t fresh_info() {
  spora_plugin_info_t info{};
  info.struct_size = sizeof(info);
  return info;
}

// Walks an extension chain; "" when well formed (types listed in *types).
std::string walk_extensions(const spora_ext_t* ext, std::string* types) {
  for (int n = 0; ext; ++n, ext = ext->next) {
    if (n >= 64) return "longer than 64 entries (a cycle?)";
    if (ext->struct_size < sizeof(spora_ext_t))
      return "an entry has struct_size " + std::to_string(ext->struct_size) + " < " + std::to_string(sizeof(spora_ext_t));
    *types += (types->empty() ? "" : ", ") + std::to_string(ext->type);
  }
  return "";
}

struct Fn {
  const char* name;
  const void* ptr;
  bool loader_requires;  // the host refuses to load a table without it
};

#define SPORA_FN(t, f, req) Fn{#f, reinterpret_cast<const void*>(t->f), req}

// Required for certification: everything plugin.h does not mark optional,
// except event_elapsed_ms (timing is not needed for correctness).
std::vector<std::pair<const char*, std::vector<Fn>>> required_groups(const spora_device_api_t* t) {
  return {
      {"lifecycle", {SPORA_FN(t, initialize, true), SPORA_FN(t, device_count, true), SPORA_FN(t, device_properties, true)}},
      {"memory", {SPORA_FN(t, mem_alloc, true), SPORA_FN(t, mem_free, true), SPORA_FN(t, memset, false)}},
      {"copies",
       {SPORA_FN(t, copy_h2d, true), SPORA_FN(t, copy_d2h, true), SPORA_FN(t, copy_d2d, true),
        SPORA_FN(t, copy_h2d_async, false), SPORA_FN(t, copy_d2h_async, false), SPORA_FN(t, copy_d2d_async, false),
        SPORA_FN(t, memset_async, false)}},
      {"streams",
       {SPORA_FN(t, stream_create, true), SPORA_FN(t, stream_destroy, true), SPORA_FN(t, stream_synchronize, true),
        SPORA_FN(t, stream_query, false), SPORA_FN(t, stream_wait_event, false),
        SPORA_FN(t, stream_add_callback, false)}},
      {"events",
       {SPORA_FN(t, event_create, false), SPORA_FN(t, event_destroy, false), SPORA_FN(t, event_record, false),
        SPORA_FN(t, event_query, false), SPORA_FN(t, event_synchronize, false)}},
  };
}

// A table built against plugin ABI 1.0 ends at `shutdown`; later minors
// append slots, read only when struct_size covers them.
constexpr size_t kDeviceTableV10 = offsetof(spora_device_api_t, memory_stats);

void check_device_table(Channel& ch, const spora_device_api_t* t, AbiState* st) {
  run_check(ch, kPart, "device table struct_size", [&] {
    if (t->struct_size < kDeviceTableV10)
      return Outcome::fail(std::to_string(t->struct_size) + " bytes, below v1.0's " + std::to_string(kDeviceTableV10) +
                           "; set struct_size = sizeof(spora_device_api_t)");
    if (t->struct_size < sizeof(spora_device_api_t))
      return Outcome::pass(std::to_string(t->struct_size) + " bytes (an older minor's table: the slots after it are "
                           "not read)");
    return Outcome::pass(std::to_string(t->struct_size) + " bytes");
  });
  if (t->struct_size < kDeviceTableV10) return;  // reading further fields would be out of bounds
  run_check(ch, kPart, "device table extension chain", [&] {
    std::string types;
    const std::string bad = walk_extensions(t->extensions, &types);
    if (!bad.empty()) return Outcome::fail(bad);
    return Outcome::pass(types.empty() ? "none" : "types " + types);
  });
  bool complete = true;
  for (const auto& [group, fns] : required_groups(t)) {
    std::string missing;
    bool loader = false;
    for (const Fn& f : fns) {
      if (f.ptr) continue;
      missing += (missing.empty() ? "" : ", ") + std::string(f.name);
      loader = loader || f.loader_requires;
    }
    complete = complete && missing.empty();
    run_check(ch, kPart, std::string("required functions: ") + group, [&] {
      if (missing.empty()) return Outcome::pass();
      return Outcome::fail("NULL: " + missing +
                           (loader ? " (the loader refuses the plugin without it)"
                                   : " (the loader accepts the plugin, but the contract requires it)"));
    });
  }
  // Optional features: reported, and checked for halves of a pair.
  struct Optional {
    const char* name;
    std::vector<Fn> fns;
  };
  const std::vector<Optional> optional = {
      {"pinned host memory", {SPORA_FN(t, host_alloc_pinned, false), SPORA_FN(t, host_free_pinned, false)}},
      {"native stream handle", {SPORA_FN(t, stream_native_handle, false)}},
      {"event timing", {SPORA_FN(t, event_elapsed_ms, false)}},
      {"kernels", {SPORA_FN(t, kernel_create, false), SPORA_FN(t, kernel_launch, false), SPORA_FN(t, kernel_destroy, false)}},
      {"whole-graph execution",
       {SPORA_FN(t, graph_compile, false), SPORA_FN(t, graph_execute, false), SPORA_FN(t, graph_destroy, false)}},
      {"shutdown", {SPORA_FN(t, shutdown, false)}},
      // ABI 1.1: NULL when an older table ends before the slots.
      {"memory statistics",
       {Fn{"memory_stats",
           SPORA_STRUCT_HAS(t, spora_device_api_t, memory_stats) ? reinterpret_cast<const void*>(t->memory_stats)
                                                                  : nullptr,
           false},
        Fn{"reset_peak_memory_stats",
           SPORA_STRUCT_HAS(t, spora_device_api_t, reset_peak_memory_stats)
               ? reinterpret_cast<const void*>(t->reset_peak_memory_stats)
               : nullptr,
           false}}},
      // ABI 1.2, likewise.
      {"stream capture",
       {Fn{"capture_begin",
           SPORA_STRUCT_HAS(t, spora_device_api_t, capture_begin) ? reinterpret_cast<const void*>(t->capture_begin)
                                                                   : nullptr,
           false},
        Fn{"capture_end",
           SPORA_STRUCT_HAS(t, spora_device_api_t, capture_end) ? reinterpret_cast<const void*>(t->capture_end)
                                                                 : nullptr,
           false},
        Fn{"captured_launch",
           SPORA_STRUCT_HAS(t, spora_device_api_t, captured_launch)
               ? reinterpret_cast<const void*>(t->captured_launch)
               : nullptr,
           false},
        Fn{"captured_destroy",
           SPORA_STRUCT_HAS(t, spora_device_api_t, captured_destroy)
               ? reinterpret_cast<const void*>(t->captured_destroy)
               : nullptr,
           false}}},
  };
  for (const auto& o : optional) {
    std::string have, lack;
    for (const Fn& f : o.fns) {
      std::string& s = f.ptr ? have : lack;
      s += (s.empty() ? "" : ", ") + std::string(f.name);
    }
    run_check(ch, kPart, std::string("optional: ") + o.name, [&] {
      if (have.empty()) return Outcome::not_implemented();
      if (!lack.empty()) return Outcome::fail("has " + have + " but not " + lack + "; provide all of them or none");
      return Outcome::pass("implemented");
    });
  }
  if (t->kernel_create) {
    run_check(ch, kPart, "kernel_ops lists registered ops", [&] {
      if (!t->kernel_ops)
        return Outcome::warn("kernel_ops is NULL: the host cannot ask which ops you have kernels for");
      const char* const* names = t->kernel_ops();
      if (!names) return Outcome::fail("kernel_ops() returned NULL; return a NUL-terminated array (may be empty)");
      nlohmann::json list = nlohmann::json::array();
      std::string unknown;
      int n = 0;
      for (; names[n]; ++n) {
        if (n >= 4096) return Outcome::fail("more than 4096 entries: is the array NUL-terminated?");
        const char* schema = nullptr;
        if (spora_op_schema(names[n], &schema) != SPORA_OK) unknown += (unknown.empty() ? "" : ", ") + std::string(names[n]);
        list.push_back(names[n]);
      }
      ch.fact("kernel_ops", list);
      if (!unknown.empty()) return Outcome::warn("not ops of this libspora's registry: " + unknown);
      return Outcome::pass(std::to_string(n) + " ops");
    });
  } else {
    ch.fact("kernel_ops", nlohmann::json::array());
  }
  st->device = t;
  st->runtime_ready = complete;
}

void check_collective_table(Channel& ch, const spora_collective_api_t* t, AbiState* st) {
  run_check(ch, kPart, "collective table struct_size", [&] {
    if (t->struct_size < sizeof(spora_collective_api_t))
      return Outcome::fail(std::to_string(t->struct_size) + " bytes, below v1.0's " +
                           std::to_string(sizeof(spora_collective_api_t)));
    return Outcome::pass(std::to_string(t->struct_size) + " bytes");
  });
  if (t->struct_size < sizeof(spora_collective_api_t)) return;
  const std::vector<Fn> fns = {
      SPORA_FN(t, initialize, true),   SPORA_FN(t, get_unique_id, false),  SPORA_FN(t, comm_init, true),
      SPORA_FN(t, comm_split, false),  SPORA_FN(t, comm_abort, false),     SPORA_FN(t, comm_destroy, false),
      SPORA_FN(t, comm_async_error, false), SPORA_FN(t, comm_rank, false), SPORA_FN(t, all_reduce, true),
      SPORA_FN(t, all_gather, false),  SPORA_FN(t, reduce_scatter, false), SPORA_FN(t, broadcast, false),
      SPORA_FN(t, all_to_all, false),  SPORA_FN(t, send, false),           SPORA_FN(t, recv, false),
      SPORA_FN(t, barrier, false)};
  std::string missing;
  for (const Fn& f : fns)
    if (!f.ptr) missing += (missing.empty() ? "" : ", ") + std::string(f.name);
  run_check(ch, kPart, "required functions: collectives", [&] {
    return missing.empty() ? Outcome::pass() : Outcome::fail("NULL: " + missing);
  });
  st->collective = t;
}

#undef SPORA_FN

}  // namespace

void check_abi(const std::string& path, Channel& ch, AbiState* st) {
  st->path = path;
  std::string file_kind, file_name;
  const bool named = parse_file_name(file_name_of(path), &file_kind, &file_name);

  bool loaded = false;
  run_check(ch, kPart, "dlopen(RTLD_NOW | RTLD_LOCAL)", [&] {
    st->file = open_plugin(path);
    if (!st->file.handle)
      return Outcome::fail(st->file.error + " (every library the plugin links must be installed and found at load time)");
    loaded = true;
    return Outcome::pass();
  });
  if (!loaded) return;

  run_check(ch, kPart, "exports spora_plugin_entry_v1", [&] {
    if (st->file.entry) return Outcome::pass();
    for (int v = 2; v <= 9; ++v)
      if (::dlsym(st->file.handle, ("spora_plugin_entry_v" + std::to_string(v)).c_str()))
        return Outcome::fail("exports only spora_plugin_entry_v" + std::to_string(v) + ": built for plugin ABI v" +
                             std::to_string(v) + ", this host speaks v1");
    return Outcome::fail("no such symbol: not a Spora plugin, or built without default visibility on the entry "
                         "(use SPORA_PLUGIN_EXPORT and spora_add_plugin)");
  });
  if (!st->file.entry) return;

  // ---- probe (optional) ----
  run_check(ch, kPart, "probe: cheap, no side effects, consistent", [&] {
    if (!st->file.probe)
      return Outcome::not_implemented("spora_plugin_probe_v1 not exported; the host assumes it can run (score 1)");
    spora_probe_result_t a{}, b{};
    a.struct_size = b.struct_size = sizeof(spora_probe_result_t);
    const int threads = thread_count();
    st->file.probe(&a);
    st->file.probe(&b);
    const int after = thread_count();
    if (threads >= 0 && after != threads)
      return Outcome::fail("the process had " + std::to_string(threads) + " threads before probe and " +
                           std::to_string(after) + " after: probe must not start threads");
    if (!std::memchr(a.reason, '\0', sizeof a.reason)) return Outcome::fail("reason is not NUL-terminated within 256 bytes");
    if (a.score < 0) return Outcome::fail("score " + std::to_string(a.score) + " is negative (0 = cannot run here)");
    if (a.score != b.score || std::strcmp(a.reason, b.reason) != 0)
      return Outcome::fail("two calls disagree (score " + std::to_string(a.score) + " vs " + std::to_string(b.score) + ")");
    if (a.score == 0) {
      st->can_run = false;
      if (!a.reason[0]) return Outcome::fail("score 0 without a reason: say why and how to fix it");
      return Outcome::fail(std::string("score 0, cannot run on this machine: ") + a.reason);
    }
    return Outcome::pass("score " + std::to_string(a.score));
  });

  // A probe of 0 means "never enter" (the host does not): nothing more can
  // be checked on this machine.
  if (!st->can_run) return;

  // ---- entry with the current ABI ----
  const spora_host_t* host = make_host(SPORA_PLUGIN_ABI_MAJOR, SPORA_PLUGIN_ABI_MINOR, 0);
  spora_plugin_info_t info = fresh_info();
  bool entered = false;
  run_check(ch, kPart, "entry: handshake with a host of ABI " + std::to_string(SPORA_PLUGIN_ABI_MAJOR) + "." +
                           std::to_string(SPORA_PLUGIN_ABI_MINOR),
            [&] {
              const int threads = thread_count();
              const Call c = call(st->file.entry(host, &info), "entry");
              const int after = thread_count();
              if (!c.ok) return Outcome::fail("refused the current host: " + c.text);
              entered = true;
              if (threads >= 0 && after != threads)
                return Outcome::fail("entry started threads (" + std::to_string(threads) + " -> " +
                                     std::to_string(after) + "); start them in initialize");
              return Outcome::pass();
            });
  if (!entered) return;

  ch.fact("info", {{"name", info.name ? info.name : ""},
                   {"kind", info.kind == SPORA_PLUGIN_KIND_DEVICE       ? "device"
                            : info.kind == SPORA_PLUGIN_KIND_COLLECTIVE ? "collective"
                                                                         : "unknown"},
                   {"version", info.version ? info.version : ""},
                   {"build", info.build ? info.build : ""},
                   {"abi", std::to_string(info.abi_major) + "." + std::to_string(info.abi_minor)}});
  run_check(ch, kPart, "info: struct_size, ABI version, kind, name", [&] {
    if (info.struct_size != sizeof(spora_plugin_info_t))
      return Outcome::fail("entry changed info.struct_size from " + std::to_string(sizeof(spora_plugin_info_t)) + " to " +
                           std::to_string(info.struct_size) + "; the host sets it, the plugin only reads it");
    if (info.abi_major != SPORA_PLUGIN_ABI_MAJOR)
      return Outcome::fail("reports plugin ABI major " + std::to_string(info.abi_major) + " from the v1 entry; set " +
                           "abi_major = SPORA_PLUGIN_ABI_MAJOR");
    if (info.kind != SPORA_PLUGIN_KIND_DEVICE && info.kind != SPORA_PLUGIN_KIND_COLLECTIVE)
      return Outcome::fail("kind " + std::to_string(info.kind) + " is neither device (1) nor collective (2)");
    if (!info.name || !*info.name) return Outcome::fail("name is NULL or empty");
    const std::string kind = info.kind == SPORA_PLUGIN_KIND_DEVICE ? "device" : "collective";
    st->name = info.name;
    st->abi_minor = info.abi_minor;
    if (!named)
      return Outcome::fail("the file is named " + file_name_of(path) + "; the loader only finds libspora-" + kind + "-" +
                           info.name + ".so");
    if (file_kind != kind || file_name != info.name)
      return Outcome::fail("the file name says " + file_kind + " '" + file_name + "' but the plugin reports " + kind +
                           " '" + info.name + "': the loader refuses the mismatch");
    return Outcome::pass(kind + " '" + info.name + "', ABI " + std::to_string(info.abi_major) + "." +
                         std::to_string(info.abi_minor));
  });
  run_check(ch, kPart, "info: version and build strings", [&] {
    if (!info.version || !*info.version) return Outcome::warn("version is empty; `spora devices` shows it to users");
    if (!info.build) return Outcome::warn("build is NULL; say compiler and libraries there");
    return Outcome::pass(std::string(info.version) + (info.build && *info.build ? " (" + std::string(info.build) + ")" : ""));
  });
  run_check(ch, kPart, "info: extension chain", [&] {
    std::string types;
    const std::string bad = walk_extensions(info.extensions, &types);
    if (!bad.empty()) return Outcome::fail(bad);
    return Outcome::pass(types.empty() ? "none" : "types " + types);
  });

  // ---- refusals ----
  run_check(ch, kPart, "entry refuses a host of ABI major " + std::to_string(SPORA_PLUGIN_ABI_MAJOR + 1), [&] {
    spora_plugin_info_t other = fresh_info();
    const Call c = call(st->file.entry(make_host(SPORA_PLUGIN_ABI_MAJOR + 1, 0, 0), &other), "entry (major 2 host)");
    if (c.ok)
      return Outcome::fail("accepted it; entry must check host->abi_major and return an error for another major");
    return Outcome::pass(c.text);
  });
  run_check(ch, kPart, "entry with an ABI minor floor above the plugin's", [&] {
    const uint32_t floor = info.abi_minor + 1;
    spora_plugin_info_t other = fresh_info();
    const Call c = call(st->file.entry(make_host(SPORA_PLUGIN_ABI_MAJOR, SPORA_PLUGIN_ABI_MINOR, floor), &other), "entry (raised floor)");
    if (!c.ok) return Outcome::pass("refused: " + c.text);
    if (other.abi_minor != info.abi_minor)
      return Outcome::fail("reported minor " + std::to_string(other.abi_minor) + " to this host but " +
                           std::to_string(info.abi_minor) + " to the first: report the minor you were built with");
    return Outcome::pass("reports minor " + std::to_string(other.abi_minor) + "; the host refuses it by the floor");
  });
  // The plugin keeps the host of its last successful entry: finish with the
  // current one, and check that entry is repeatable.
  run_check(ch, kPart, "entry again with the current host gives the same plugin", [&] {
    spora_plugin_info_t again = fresh_info();
    const Call c = call(st->file.entry(host, &again), "entry (again)");
    if (!c.ok) return Outcome::fail("refused on the second call: " + c.text);
    if (again.kind != info.kind || !again.name || std::strcmp(again.name, info.name) != 0 ||
        again.abi_major != info.abi_major || again.abi_minor != info.abi_minor || !again.api)
      return Outcome::fail("name, kind, ABI version or table differ from the first call");
    info = again;
    return Outcome::pass();
  });

  // ---- the function table ----
  run_check(ch, kPart, "info: function table", [&] {
    return info.api ? Outcome::pass() : Outcome::fail("info.api is NULL: return your root table there");
  });
  if (!info.api) return;
  if (info.kind == SPORA_PLUGIN_KIND_DEVICE)
    check_device_table(ch, static_cast<const spora_device_api_t*>(info.api), st);
  else if (info.kind == SPORA_PLUGIN_KIND_COLLECTIVE)
    check_collective_table(ch, static_cast<const spora_collective_api_t*>(info.api), st);
}

}  // namespace spora::conformance
