/*
 * spora/sdk/plugin_table.h -- header-only SDK helpers for a plugin's root
 * table and entry points. C99 and C++17. Not part of the ABI: everything here
 * compiles into the plugin and nothing is exported.
 *
 * The table
 * ---------
 * A plugin lists the table functions it implements once, as an X-macro, in
 * its own file:
 *
 *   #define MYACCEL_DEVICE_FUNCTIONS(X)                                     \
 *     X(initialize) X(device_count) X(device_properties) X(shutdown)        \
 *     X(mem_alloc) X(mem_free) X(copy_h2d) X(memset, memset_sync) ...
 *
 * X(member) says that member of spora_device_api_t (or
 * spora_collective_api_t) is the function of the same name; X(member,
 * function) names another function (memset, send, shutdown clash with the C
 * library in C). Members not listed stay NULL, "not implemented". Slots a
 * later minor appended are listed the same way (ABI 1.1:
 * X(memory_stats) X(reset_peak_memory_stats)); the table's struct_size is
 * the size of the plugin.h it is compiled against, so a host reads exactly
 * the slots that header has.
 *
 *   SPORA_SDK_TABLE(type, LIST)   an initializer for a `type` table: struct_size
 *                                 set, extensions NULL, the listed members set,
 *                                 every other member NULL. C and C++:
 *     static const spora_device_api_t table =
 *         SPORA_SDK_TABLE(spora_device_api_t, MYACCEL_DEVICE_FUNCTIONS);
 *   SPORA_SDK_DECLARE_DEVICE_FUNCTIONS(LIST)       (C++ only) declares each
 *   SPORA_SDK_DECLARE_COLLECTIVE_FUNCTIONS(LIST)   listed function with the
 *                                 exact type of its table member, in the
 *                                 enclosing namespace; the plugin's files then
 *                                 define them. (In C, define the functions
 *                                 before the table.)
 *
 * If SPORA_SDK_FUNCTION_PREFIX is defined where a macro is expanded, it is put
 * in front of every function name: the C template defines it to plugin_, so
 * X(memset) means plugin_memset.
 *
 * Probe and entry
 * ---------------
 *   spora_sdk_probe_answer(out, score, reason)  fills a probe result, reading
 *       only the fields the host's struct has; reason may be NULL or "".
 *   spora_sdk_check_entry(host, out, name, buf, capacity)  the handshake every
 *       entry does first: host and info present and large enough, host ABI
 *       major equal to SPORA_PLUGIN_ABI_MAJOR. Returns 0, or the error code
 *       with "[name] ..." written to buf (make the plugin's error from it).
 *   spora_sdk_fill_info(out, kind, name, version, build, table)  describes the
 *       plugin (ABI version built against, NULL extensions).
 *
 * A device plugin's entry then reads:
 *
 *   SPORA_PLUGIN_EXPORT spora_plugin_error_t* spora_plugin_entry_v1(const spora_host_t* host,
 *                                                                   spora_plugin_info_t* out) {
 *     char why[SPORA_SDK_MESSAGE_MAX];
 *     int32_t code = spora_sdk_check_entry(host, out, "myaccel", why, sizeof why);
 *     if (code) return my_error(code, why);
 *     g_host = host;
 *     spora_sdk_fill_info(out, SPORA_PLUGIN_KIND_DEVICE, "myaccel", "1.0.0", "built with ...", &table);
 *     return NULL;
 *   }
 */
#ifndef SPORA_SDK_PLUGIN_TABLE_H
#define SPORA_SDK_PLUGIN_TABLE_H

#include <spora/plugin.h>
#include <stdio.h>
#include <string.h>

#ifdef __cplusplus
#include <type_traits>
#endif

/* ---- X(member) / X(member, function) ---------------------------------- */

#ifndef SPORA_SDK_FUNCTION_PREFIX
#define SPORA_SDK_FUNCTION_PREFIX
#endif

#define SPORA_SDK_CAT_(a, b) SPORA_SDK_CAT2_(a, b)
#define SPORA_SDK_CAT2_(a, b) a##b
#define SPORA_SDK_THIRD_(a, b, c, ...) c
#define SPORA_SDK_ONE_(member) member
#define SPORA_SDK_TWO_(member, function) function
/* The member of an entry, and the function behind it (prefixed). */
#define SPORA_SDK_MEMBER_(...) SPORA_SDK_THIRD_(__VA_ARGS__, SPORA_SDK_FIRST_, SPORA_SDK_ONE_, ~)(__VA_ARGS__)
#define SPORA_SDK_FIRST_(member, function) member
#define SPORA_SDK_FUNCTION_(...) \
  SPORA_SDK_CAT_(SPORA_SDK_FUNCTION_PREFIX, SPORA_SDK_THIRD_(__VA_ARGS__, SPORA_SDK_TWO_, SPORA_SDK_ONE_, ~)(__VA_ARGS__))

#ifdef __cplusplus

namespace spora::sdk {
/* The function type behind a table member's pointer type. */
template <class Pointer>
using function_t = std::remove_pointer_t<Pointer>;
}  // namespace spora::sdk

#define SPORA_SDK_ASSIGN_(...) table_.SPORA_SDK_MEMBER_(__VA_ARGS__) = SPORA_SDK_FUNCTION_(__VA_ARGS__);
#define SPORA_SDK_TABLE(type, LIST) \
  ([]() noexcept {                  \
    type table_{};                  \
    table_.struct_size = sizeof(type); \
    LIST(SPORA_SDK_ASSIGN_)         \
    return table_;                  \
  }())

#define SPORA_SDK_DECLARE_DEVICE_(...)                                                       \
  ::spora::sdk::function_t<decltype(spora_device_api_t::SPORA_SDK_MEMBER_(__VA_ARGS__))> \
      SPORA_SDK_FUNCTION_(__VA_ARGS__);
#define SPORA_SDK_DECLARE_COLLECTIVE_(...)                                                       \
  ::spora::sdk::function_t<decltype(spora_collective_api_t::SPORA_SDK_MEMBER_(__VA_ARGS__))> \
      SPORA_SDK_FUNCTION_(__VA_ARGS__);
#define SPORA_SDK_DECLARE_DEVICE_FUNCTIONS(LIST) LIST(SPORA_SDK_DECLARE_DEVICE_)
#define SPORA_SDK_DECLARE_COLLECTIVE_FUNCTIONS(LIST) LIST(SPORA_SDK_DECLARE_COLLECTIVE_)

#else /* C: designated initializers */

#define SPORA_SDK_DESIGNATE_(...) .SPORA_SDK_MEMBER_(__VA_ARGS__) = SPORA_SDK_FUNCTION_(__VA_ARGS__),
#define SPORA_SDK_TABLE(type, LIST) {.struct_size = sizeof(type), .extensions = NULL, LIST(SPORA_SDK_DESIGNATE_)}

#endif

/* ---- probe and entry --------------------------------------------------- */

/* Room for the messages spora_sdk_check_entry writes. */
#define SPORA_SDK_MESSAGE_MAX 160

static inline void spora_sdk_probe_answer(spora_probe_result_t* out, int32_t score, const char* reason) {
  size_t n = 0;
  if (!SPORA_STRUCT_HAS(out, spora_probe_result_t, score)) return;
  out->score = score;
  if (!SPORA_STRUCT_HAS(out, spora_probe_result_t, reason)) return;
  if (reason) {
    n = strlen(reason);
    if (n > sizeof(out->reason) - 1) n = sizeof(out->reason) - 1;
    memcpy(out->reason, reason, n);
  }
  out->reason[n] = '\0';
}

static inline int32_t spora_sdk_check_entry(const spora_host_t* host, const spora_plugin_info_t* out,
                                            const char* name, char* buf, size_t capacity) {
  if (!SPORA_STRUCT_HAS(host, spora_host_t, abi_major)) {
    snprintf(buf, capacity, "[%s] entry: host is NULL or too small", name);
    return SPORA_PLUGIN_INVALID_ARGUMENT;
  }
  if (host->abi_major != SPORA_PLUGIN_ABI_MAJOR) {
    snprintf(buf, capacity, "[%s] host ABI major %u, plugin built for %u", name, (unsigned)host->abi_major,
             (unsigned)SPORA_PLUGIN_ABI_MAJOR);
    return SPORA_PLUGIN_UNIMPLEMENTED;
  }
  if (!SPORA_STRUCT_HAS(out, spora_plugin_info_t, api)) {
    snprintf(buf, capacity, "[%s] entry: plugin info is NULL or too small", name);
    return SPORA_PLUGIN_INVALID_ARGUMENT;
  }
  return 0;
}

/* All pointers must stay valid for the life of the process. */
static inline void spora_sdk_fill_info(spora_plugin_info_t* out, int32_t kind, const char* name,
                                       const char* version, const char* build, const void* table) {
  out->abi_major = SPORA_PLUGIN_ABI_MAJOR;
  out->abi_minor = SPORA_PLUGIN_ABI_MINOR;
  out->kind = kind;
  out->name = name;
  out->version = version;
  out->build = build;
  out->api = table;
  if (SPORA_STRUCT_HAS(out, spora_plugin_info_t, extensions)) out->extensions = NULL;
}

#endif /* SPORA_SDK_PLUGIN_TABLE_H */
