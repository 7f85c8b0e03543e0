// The conformance run: find the plugin, run the ABI and runtime checks in a
// child process, then the kernel and gradient cases through libspora, and
// report.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <spora/spora.hpp>
#include <spora_conformance/conformance.h>

#include "cases.h"
#include "checks.h"
#include "elf_file.h"
#include "isolate.h"
#include "kernels.h"
#include "report.h"

namespace spora::conformance {
namespace fs = std::filesystem;

namespace {

std::string libspora_plugin_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&spora_version), &info) && info.dli_fname) {
    std::error_code ec;
    const fs::path p = fs::canonical(info.dli_fname, ec);
    if (!ec) return (p.parent_path() / "spora" / "plugins").string();
  }
  return "<directory of libspora.so>/spora/plugins";
}

std::string search_path_words() {
  std::string s;
  if (const char* env = std::getenv("SPORA_PLUGIN_PATH"); env && *env) s += "SPORA_PLUGIN_PATH (" + std::string(env) + ") and ";
  return s + libspora_plugin_dir();
}

// Plugin candidates named `name`, found the way the host finds them. Runs in
// a child: asking whether a plugin is available initialises it, and the
// ABI checks need a process where nothing has loaded it yet.
struct Candidate {
  std::string path, kind, reason;
  bool available = false;
};

std::vector<Candidate> find_candidates(const std::string& name, std::vector<std::string>* all_names,
                                       std::string* failure, double timeout_s) {
  const ChildOutcome o = run_child(
      [&](Channel& ch) {
        spora::Context ctx;
        size_t n = 0;
        spora::check(spora_plugin_count(ctx.get(), &n));
        nlohmann::json found = nlohmann::json::array(), names = nlohmann::json::array();
        for (size_t i = 0; i < n; ++i) {
          spora_plugin_t* p = nullptr;
          spora::check(spora_plugin_get(ctx.get(), i, &p));
          const char *pname, *kind, *path;
          spora::check(spora_plugin_describe(p, &pname, &kind, &path, nullptr, nullptr, nullptr));
          names.push_back(pname);
          if (name != pname) continue;
          int32_t available = 0;
          const char* reason = "";
          ch.begin("initialising " + std::string(path));
          spora::check(spora_plugin_describe(p, nullptr, nullptr, nullptr, nullptr, &available, &reason));
          found.push_back({{"path", path}, {"kind", kind}, {"available", available != 0}, {"reason", reason}});
        }
        ch.fact("candidates", found);
        ch.fact("names", names);
      },
      timeout_s);
  std::vector<Candidate> out;
  if (!o.finished) {
    *failure = "looking for plugin '" + name + "', the search " + o.death +
               (o.last_begun.empty() ? "" : " while " + o.last_begun) +
               (o.results.empty() ? "" : ": " + o.results.back().detail);
    return out;
  }
  for (const auto& c : o.facts.value("candidates", nlohmann::json::array()))
    out.push_back({c.value("path", ""), c.value("kind", ""), c.value("reason", ""), c.value("available", false)});
  for (const auto& n : o.facts.value("names", nlohmann::json::array()))
    if (n.is_string()) all_names->push_back(n.get<std::string>());
  return out;
}

// The ABI and runtime parts, in a child.
void run_abi_and_runtime(const std::string& path, const Options& opts, Report& report, nlohmann::json* facts) {
  const ChildOutcome o = run_child(
      [&](Channel& ch) {
        AbiState st;
        check_abi(path, ch, &st);
        check_runtime(ch, st);
        const ErrorStats& es = error_stats();
        ch.fact("errors", {{"seen", es.seen}, {"malformed", es.malformed}, {"unbracketed", es.unbracketed}});
        ch.fact("host", {{"log_lines", host_log().lines.size()},
                         {"errors_created", host_log().errors_created.load()},
                         {"errors_destroyed", host_log().errors_destroyed.load()}});
      },
      opts.child_timeout_s);
  for (const auto& r : o.results) report.add(r);
  *facts = o.facts;
  if (!o.finished) {
    const std::string part = o.results.empty() ? "abi" : o.results.back().part;
    report.add(part, "the checks ran to completion", Status::kFail,
               "the plugin " + o.death + (o.last_begun.empty() ? "" : " during '" + o.last_begun + "'"));
  }
  if (!o.output.empty()) {
    std::string text = o.output.substr(0, 300);
    std::replace(text.begin(), text.end(), '\n', ' ');
    report.add("runtime", "the plugin writes nothing to stdout/stderr", Status::kWarn,
               "it printed \"" + text + "\"; log through the host's log service instead");
  }
  if (o.facts.contains("errors")) {
    const auto& e = o.facts["errors"];
    const auto malformed = e.value("malformed", std::vector<std::string>{});
    const auto unbracketed = e.value("unbracketed", std::vector<std::string>{});
    const int seen = e.value("seen", 0);
    if (!malformed.empty())
      report.add("runtime", "error objects are well formed", Status::kFail, malformed.front() +
                 (malformed.size() > 1 ? " (and " + std::to_string(malformed.size() - 1) + " more)" : ""));
    else if (seen > 0)
      report.add("runtime", "error objects are well formed", Status::kPass,
                 std::to_string(seen) + " error objects: struct_size, code, message, released by their own destroy");
    if (!unbracketed.empty())
      report.add("runtime", "error messages start with [part]", Status::kWarn, unbracketed.front());
  }
  if (o.facts.contains("host")) {
    const int leaked = o.facts["host"].value("errors_created", 0) - o.facts["host"].value("errors_destroyed", 0);
    if (leaked > 0)
      report.add("runtime", "errors made with the host's error_create are returned", Status::kWarn,
                 std::to_string(leaked) + " were created and never handed back (leaked)");
  }
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Quick mode's order of candidates within one op x dtype: the smallest case
// that has elements first. An empty case (a (0,3) tensor) checks nothing of
// the kernel's arithmetic, so a plugin whose kernels never write would pass
// on it; it comes last.
bool smaller_for_quick(const Case& a, const Case& b) {
  const int64_t ea = a.elements(), eb = b.elements();
  if ((ea == 0) != (eb == 0)) return eb == 0;
  return ea < eb;
}

// The kernel part's work: every selected case, filtered by op. In quick mode
// each op x dtype (each op, for gradients) becomes one group of candidates,
// and the child runs a group's candidates until the plugin supports one, so a
// plugin that only takes some shapes (no broadcasting, say) is still checked.
void add_items(const std::vector<Case>& cases, bool gradient, const Options& opts, std::vector<WorkItem>& items) {
  std::map<std::string, std::vector<Case>> groups;  // ordered: a stable report
  for (const Case& c : cases) {
    if (!opts.ops.empty() && std::find(opts.ops.begin(), opts.ops.end(), c.op) == opts.ops.end()) continue;
    if (!opts.quick) {
      items.push_back({c, gradient});
      continue;
    }
    groups[gradient ? c.op : c.op + "/" + c.dtype].push_back(c);
  }
  int64_t next = items.empty() ? 0 : items.back().group + 1;
  for (auto& [key, g] : groups) {
    std::stable_sort(g.begin(), g.end(), smaller_for_quick);
    for (const Case& c : g) items.push_back({c, gradient, next});
    ++next;
  }
}

// Child side of the kernel part: finds the plugin's device and the cpu
// reference through libspora, then runs items[first..].
void kernel_child(const std::string& path, const std::string& name, bool by_path, const std::vector<WorkItem>& items,
                  size_t first, const nlohmann::json& facts, Channel& ch) {
  spora::Context ctx;
  if (by_path) ctx.add_plugin_path(path);
  std::error_code ec;
  const std::string real = fs::canonical(path, ec).string();
  bool usable = false;
  std::string why = "the host did not find it";
  for (const auto& p : ctx.plugins()) {
    if (p.path != real) continue;
    usable = p.available;
    why = p.reason;
  }
  KernelTarget t;
  try {
    if (!usable) throw spora::Error(SPORA_ERROR_UNAVAILABLE, why);
    t.device = ctx.device(name);
  } catch (const spora::Error& e) {
    ch.result("kernels", "the host loads the plugin", Status::kFail, e.what());
    return;
  }
  try {
    t.reference = ctx.device("cpu");
  } catch (const spora::Error& e) {
    ch.result("kernels", "the cpu reference plugin is available", Status::kFail,
              std::string(e.what()) + "; kernels are compared with the cpu plugin, install it (spora-plugin-cpu)");
    return;
  }
  ch.fact("device", t.device.name());
  ch.fact("reference", t.reference.name() + (t.reference.get() == t.device.get() ? " (the plugin itself)" : ""));
  if (first == 0) ch.result("kernels", "the host loads the plugin", Status::kPass, "device " + t.device.name());
  if (facts.contains("kernel_ops") && facts["kernel_ops"].is_array()) {
    t.has_kernel_ops = true;
    for (const auto& op : facts["kernel_ops"])
      if (op.is_string()) t.kernel_ops.insert(op.get<std::string>());
  }
  // Quick mode: a group's unsupported candidates are held back; the first
  // supported one is reported and ends the group. A group the plugin supports
  // in no shape reports its first candidate as unsupported.
  int64_t settled = -1;
  std::optional<CaseResult> held;
  for (size_t i = first; i < items.size(); ++i) {
    const WorkItem& w = items[i];
    if (w.group >= 0 && w.group == settled) continue;
    ch.begin((w.gradient ? "gradient case " : "kernel case ") + w.c.id, static_cast<int64_t>(i));
    CaseResult r = run_item(w, t);
    const bool last_of_group = i + 1 == items.size() || items[i + 1].group != w.group;
    if (w.group >= 0 && r.status == Status::kUnsupported && !last_of_group) {
      if (!held) held = r;
      continue;
    }
    if (w.group >= 0) {
      settled = w.group;
      if (r.status == Status::kUnsupported && held) r = *held;
      held.reset();
    }
    ch.case_result(r);
  }
}

// The kernel part, in child processes: a plugin whose kernel crashes or
// hangs fails that case, and a new child carries on with the next one.
void run_kernels(const std::string& path, const std::string& name, bool by_path, const std::vector<Case>& all,
                 const Options& opts, const nlohmann::json& facts, Report& report) {
  std::vector<WorkItem> items;
  add_items(all, false, opts, items);
  add_items(gradient_cases(all), true, opts, items);
  constexpr int kMaxRestarts = 10;
  size_t first = 0;
  for (int restarts = 0;; ++restarts) {
    const ChildOutcome o = run_child(
        [&](Channel& ch) { kernel_child(path, name, by_path, items, first, facts, ch); }, opts.child_timeout_s);
    for (const auto& r : o.results) report.add(r);
    for (const auto& c : o.cases)
      if (c.status != Status::kSkip || c.detail.rfind("no f64 input", 0) != 0) report.add_case(c);
    if (o.facts.contains("device")) report.device = o.facts["device"].get<std::string>();
    if (o.facts.contains("reference")) report.reference = o.facts["reference"].get<std::string>();
    if (o.finished) return;
    if (o.last_item < static_cast<int64_t>(first) || o.last_item >= static_cast<int64_t>(items.size())) {
      report.add("kernels", "the kernel checks ran to completion", Status::kFail,
                 "the plugin " + o.death + (o.last_begun.empty() ? "" : " during '" + o.last_begun + "'"));
      return;
    }
    const WorkItem& w = items[static_cast<size_t>(o.last_item)];
    report.add_case({w.c.id, w.c.op, w.c.dtype, w.gradient, Status::kFail, "the plugin " + o.death});
    first = static_cast<size_t>(o.last_item) + 1;
    while (w.group >= 0 && first < items.size() && items[first].group == w.group) ++first;  // the group is settled
    if (first >= items.size()) return;
    if (restarts + 1 >= kMaxRestarts) {
      report.add("kernels", "the kernel checks ran to completion", Status::kFail,
                 "stopped after " + std::to_string(kMaxRestarts) + " crashed or hung cases; " +
                     std::to_string(items.size() - first) + " cases not run");
      return;
    }
  }
}

}  // namespace

std::string default_cases_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const fs::path dir = exe.parent_path().parent_path() / "share" / "spora" / "conformance" / "cases";
  return fs::is_directory(dir, ec) ? fs::canonical(dir, ec).string() : "";
}

int run(const Options& opts, std::FILE* out) {
  Report report;
  report.target = opts.target;
  auto stop = [&](const std::string& why) {
    report.stopped = why;
    report.print(out);
    if (!opts.report_path.empty()) std::ofstream(opts.report_path) << report.to_json().dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 1;
  };

  // The cases first: a bad case directory is the user's to fix before any
  // plugin runs.
  report.cases_dir = opts.cases_dir.empty() ? default_cases_dir() : opts.cases_dir;
  std::vector<Case> cases;
  if (report.cases_dir.empty())
    return stop("no conformance cases found next to this program (share/spora/conformance/cases); pass --cases DIR");
  try {
    cases = load_cases(report.cases_dir);
  } catch (const std::exception& e) {
    return stop(std::string("conformance cases: ") + e.what());
  }

  // Which file.
  std::string path;
  const bool by_path = opts.target.find('/') != std::string::npos || ends_with(opts.target, ".so");
  if (by_path) {
    std::error_code ec;
    path = fs::absolute(opts.target, ec).lexically_normal().string();
    if (!fs::exists(path, ec)) return stop(path + ": no such file");
    if (fs::is_directory(path, ec))
      return stop(path + " is a directory; pass a plugin file (libspora-device-<name>.so) or a plugin name");
    if (!fs::is_regular_file(path, ec)) return stop(path + " is not a regular file");
    if (::access(path.c_str(), R_OK) != 0) return stop(path + " is not readable");
  } else {
    std::vector<std::string> names;
    std::string failure;
    const std::vector<Candidate> found = find_candidates(opts.target, &names, &failure, opts.child_timeout_s);
    if (!failure.empty()) return stop(failure);
    for (const auto& c : found)
      if (c.available) path = c.path;
    for (const auto& c : found)
      if (path.empty() && c.reason.rfind("[loader]", 0) == 0 && c.reason.find("not used;") == std::string::npos)
        path = c.path;  // unusable: the checks below say why
    if (path.empty() && !found.empty()) path = found.front().path;
    if (path.empty()) {
      std::sort(names.begin(), names.end());
      names.erase(std::unique(names.begin(), names.end()), names.end());
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      return stop("no plugin named '" + opts.target + "' in " + search_path_words() +
                  " (found: " + (list.empty() ? "none" : list) +
                  "); pass the plugin file's path, or add its directory to SPORA_PLUGIN_PATH");
    }
    for (const auto& c : found)
      if (c.path == path && !c.available) report.add("abi", "the host's loader accepts the plugin", Status::kFail, c.reason);
  }
  report.plugin_path = path;

  ElfFacts elf;
  const std::string problem = inspect_elf(path, &elf);
  if (!problem.empty()) return stop(path + " " + problem);
  report.add("abi", "file: a complete ELF shared object", Status::kPass, elf.machine);
  if (elf.symbols_read) {
    std::vector<std::string> extra;
    for (const auto& s : elf.exported)
      if (s != SPORA_PLUGIN_PROBE_SYMBOL && s != SPORA_PLUGIN_ENTRY_SYMBOL && s != "_init" && s != "_fini" &&
          s != "_edata" && s != "_end" && s != "__bss_start")
        extra.push_back(s);
    if (extra.empty()) {
      report.add("abi", "file: exports only the probe and entry symbols", Status::kPass);
    } else {
      std::string list;
      for (size_t i = 0; i < extra.size() && i < 5; ++i) list += (i ? ", " : "") + extra[i];
      report.add("abi", "file: exports only the probe and entry symbols", Status::kWarn,
                 "also exports " + std::to_string(extra.size()) + " other symbols (" + list +
                     (extra.size() > 5 ? ", ..." : "") +
                     "); build with spora_add_plugin (hidden visibility, the SDK's version script) so they cannot "
                     "clash with other plugins");
    }
  }

  nlohmann::json facts;
  run_abi_and_runtime(path, opts, report, &facts);
  if (facts.contains("info")) {
    const auto& info = facts["info"];
    report.plugin_name = info.value("name", "");
    report.plugin_kind = info.value("kind", "");
    report.plugin_version = info.value("version", "");
    report.plugin_abi = info.value("abi", "");
  }

  // Kernels, through libspora in child processes too: this process never
  // loads the plugin.
  if (report.plugin_kind == "device") {
    run_kernels(path, report.plugin_name, by_path, cases, opts, facts, report);
  } else if (report.plugin_kind == "collective") {
    report.add("kernels", "kernel checks", Status::kSkip, "collective plugins have no kernels");
  }

  report.print(out);
  if (!opts.report_path.empty()) {
    std::ofstream f(opts.report_path);
    f << report.to_json().dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    if (!f) {
      std::fprintf(out, "cannot write the report to %s\n", opts.report_path.c_str());
      return 1;
    }
    std::fprintf(out, "report written to %s\n", opts.report_path.c_str());
  }
  return report.failed() ? 1 : 0;
}

}  // namespace spora::conformance
