// C API: contexts, plugins, devices.
#include "abi/abi.h"
#include "runtime/device.h"
#include "sched/host_errors.h"

using spora::Code;
using spora::fail;
using spora::abi::from_handle;
using spora::abi::guard;
using spora::abi::need;
using spora::abi::to_handle;

extern "C" {

spora_status_t spora_context_create(spora_context_t** out) {
  return guard([&] {
    need(out, "spora_context_create", "out");
    *out = new spora_context;
  });
}

spora_status_t spora_context_free(spora_context_t* ctx) {
  return guard([&] { delete ctx; });
}

spora_status_t spora_context_add_plugin_path(spora_context_t* ctx, const char* path) {
  return guard([&] {
    need(ctx, "spora_context_add_plugin_path", "ctx");
    need(path, "spora_context_add_plugin_path", "path");
    ctx->ctx.add_plugin_path(path);
  });
}

spora_status_t spora_plugin_count(spora_context_t* ctx, size_t* out) {
  return guard([&] {
    need(ctx, "spora_plugin_count", "ctx");
    *need(out, "spora_plugin_count", "out") = ctx->ctx.plugins().size();
  });
}

spora_status_t spora_plugin_get(spora_context_t* ctx, size_t index, spora_plugin_t** out) {
  return guard([&] {
    need(ctx, "spora_plugin_get", "ctx");
    need(out, "spora_plugin_get", "out");
    const auto& ps = ctx->ctx.plugins();
    if (index >= ps.size()) fail(Code::kInvalidArgument, "[spora_plugin_get] index {} >= count {}", index, ps.size());
    *out = to_handle(ps[index].get());
  });
}

spora_status_t spora_plugin_describe(const spora_plugin_t* plugin, const char** name, const char** kind,
                                     const char** path, const char** version, int32_t* available,
                                     const char** reason) {
  return guard([&] {
    const spora::PluginEntry* e = from_handle(need(plugin, "spora_plugin_describe", "plugin"));
    spora::PluginRecord* r = e->record;
    // Settle availability first: a plugin counts as available only once it
    // initialised (spora.h), and initialisation is otherwise lazy.
    if ((available || reason) && e->shadowed_by.empty() && r->loaded()) r->ensure_ready();
    if (name) *name = r->name().c_str();
    if (kind) *kind = r->kind().c_str();
    if (path) *path = r->path().c_str();
    if (version) *version = r->version().c_str();
    if (available) *available = e->usable() ? 1 : 0;
    if (reason) {
      // Interned so the pointer stays valid for the life of the process.
      static std::mutex mu;
      static auto* pool = new std::vector<std::unique_ptr<std::string>>;
      std::string why = e->reason();
      std::lock_guard<std::mutex> lock(mu);
      for (const auto& s : *pool)
        if (*s == why) {
          *reason = s->c_str();
          return;
        }
      pool->push_back(std::make_unique<std::string>(std::move(why)));
      *reason = pool->back()->c_str();
    }
  });
}

spora_status_t spora_device_count(spora_context_t* ctx, size_t* out) {
  return guard([&] {
    need(ctx, "spora_device_count", "ctx");
    *need(out, "spora_device_count", "out") = ctx->ctx.devices().size();
  });
}

spora_status_t spora_device_get(spora_context_t* ctx, size_t index, spora_device_t** out) {
  return guard([&] {
    need(ctx, "spora_device_get", "ctx");
    need(out, "spora_device_get", "out");
    const auto& ds = ctx->ctx.devices();
    if (index >= ds.size()) fail(Code::kInvalidArgument, "[spora_device_get] index {} >= count {}", index, ds.size());
    *out = to_handle(ds[index]);
  });
}

spora_status_t spora_device_find(spora_context_t* ctx, const char* name, spora_device_t** out) {
  return guard([&] {
    need(ctx, "spora_device_find", "ctx");
    need(name, "spora_device_find", "name");
    need(out, "spora_device_find", "out");
    *out = to_handle(ctx->ctx.find_device(name));
  });
}

spora_status_t spora_device_name(const spora_device_t* device, const char** out) {
  return guard([&] {
    *need(out, "spora_device_name", "out") = from_handle(need(device, "spora_device_name", "device"))->name().c_str();
  });
}

spora_status_t spora_device_property_count(const spora_device_t* device, size_t* out) {
  return guard([&] {
    *need(out, "spora_device_property_count", "out") =
        from_handle(need(device, "spora_device_property_count", "device"))->properties().size();
  });
}

spora_status_t spora_device_property_at(const spora_device_t* device, size_t index, const char** key,
                                        const char** value) {
  return guard([&] {
    const auto& props = from_handle(need(device, "spora_device_property_at", "device"))->properties();
    if (index >= props.size())
      fail(Code::kInvalidArgument, "[spora_device_property_at] index {} >= count {}", index, props.size());
    if (key) *key = props[index].first.c_str();
    if (value) *value = props[index].second.c_str();
  });
}

spora_status_t spora_device_property(const spora_device_t* device, const char* key, const char** value) {
  return guard([&] {
    const auto& props = from_handle(need(device, "spora_device_property", "device"))->properties();
    need(key, "spora_device_property", "key");
    need(value, "spora_device_property", "value");
    for (const auto& [k, v] : props) {
      if (k == key) {
        *value = v.c_str();
        return;
      }
    }
    fail(Code::kNotFound, "[spora_device_property] device has no property '{}'", key);
  });
}

spora_status_t spora_device_synchronize(spora_device_t* device) {
  return guard([&] {
    from_handle(need(device, "spora_device_synchronize", "device"))->synchronize();
    spora::sched::raise_host_error();  // a failure in a host callback of this thread's runs
  });
}

spora_status_t spora_device_memory_stats(spora_device_t* device, uint64_t* allocated, uint64_t* peak_allocated,
                                         uint64_t* reserved, uint64_t* peak_reserved) {
  return guard([&] {
    const spora::Device::MemoryStats s =
        from_handle(need(device, "spora_device_memory_stats", "device"))->memory_stats();
    if (allocated) *allocated = s.allocated;
    if (peak_allocated) *peak_allocated = s.peak_allocated;
    if (reserved) *reserved = s.reserved;
    if (peak_reserved) *peak_reserved = s.peak_reserved;
  });
}

spora_status_t spora_device_reset_peak_memory_stats(spora_device_t* device) {
  return guard(
      [&] { from_handle(need(device, "spora_device_reset_peak_memory_stats", "device"))->reset_peak_memory_stats(); });
}

spora_status_t spora_device_set_fallback(spora_device_t* device, int32_t enabled) {
  return guard([&] {
    if (enabled != 0 && enabled != 1)
      fail(Code::kInvalidArgument, "[spora_device_set_fallback] enabled must be 0 or 1, got {}", enabled);
    from_handle(need(device, "spora_device_set_fallback", "device"))->set_fallback(enabled == 1);
  });
}

}  // extern "C"
