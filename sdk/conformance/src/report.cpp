#include "report.h"

#include <algorithm>
#include <map>
#include <set>

namespace spora::conformance {
namespace {

// Column order of the table: the ABI's dtype order.
const char* const kDtypes[] = {"f32", "f64", "f16", "bf16", "i32", "i64", "u8", "bool"};

const char* part_title(const std::string& part) {
  if (part == "abi") return "ABI (probe, entry, handshake, function table)";
  if (part == "runtime") return "runtime (memory, copies, streams, events, callbacks)";
  if (part == "kernels") return "kernel checks";
  return part.c_str();
}

// Pads to `w` columns (names are ASCII).
std::string pad(const std::string& s, size_t w) { return s.size() >= w ? s : s + std::string(w - s.size(), ' '); }

// One cell of the table: every case of one op x dtype folded into a word.
struct Cell {
  int pass = 0, fail = 0, unsupported = 0, nokernel = 0, skip = 0;
  std::string word() const {
    if (fail) return "FAIL";
    if (pass + nokernel && unsupported) return "part";
    if (pass) return "pass";
    if (nokernel) return "view";
    if (unsupported) return "-";
    if (skip) return "skip";
    return ".";
  }
  bool supported() const { return fail || pass || nokernel; }
};

using Table = std::map<std::string, std::map<std::string, Cell>>;

Table fold_cells(const std::vector<CaseResult>& cases, bool gradient) {
  Table cells;
  for (const auto& c : cases) {
    if (c.gradient != gradient) continue;
    Cell& cell = cells[c.op][c.dtype];
    switch (c.status) {
      case Status::kPass: ++cell.pass; break;
      case Status::kFail: ++cell.fail; break;
      case Status::kUnsupported: ++cell.unsupported; break;
      case Status::kNoKernel: ++cell.nokernel; break;
      default: ++cell.skip; break;
    }
  }
  return cells;
}

std::string wrap_list(const std::vector<std::string>& items, size_t indent, size_t width) {
  std::string out, line(indent, ' ');
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string word = items[i] + (i + 1 < items.size() ? "," : "");
    if (line.size() + 1 + word.size() > width && line.size() > indent) {
      out += line + "\n";
      line = std::string(indent, ' ');
    }
    if (line.size() > indent) line += " ";
    line += word;
  }
  if (line.size() > indent) out += line + "\n";
  return out;
}

}  // namespace

const char* status_name(Status s) {
  switch (s) {
    case Status::kPass: return "pass";
    case Status::kFail: return "FAIL";
    case Status::kWarn: return "WARN";
    case Status::kSkip: return "skip";
    case Status::kNotImplemented: return "not implemented";
    case Status::kUnsupported: return "unsupported";
    case Status::kNoKernel: return "no kernel needed";
  }
  return "?";
}

Status status_from_name(const std::string& s) {
  for (Status v : {Status::kPass, Status::kFail, Status::kWarn, Status::kSkip, Status::kNotImplemented,
                   Status::kUnsupported, Status::kNoKernel})
    if (s == status_name(v)) return v;
  return Status::kFail;
}

void Report::add(const std::string& part, const std::string& name, Status status, const std::string& detail) {
  checks.push_back({part, name, status, detail});
}

bool Report::failed() const {
  if (!stopped.empty()) return true;
  for (const auto& c : checks)
    if (c.status == Status::kFail) return true;
  for (const auto& c : cases)
    if (c.status == Status::kFail) return true;
  return false;
}

void Report::print_checks(std::FILE* out) const {
  // Grouped by part in a fixed order, each part's checks in the order they ran.
  std::vector<const CheckResult*> ordered;
  std::vector<std::string> parts = {"abi", "runtime", "kernels"};
  for (const auto& c : checks)
    if (std::find(parts.begin(), parts.end(), c.part) == parts.end()) parts.push_back(c.part);
  for (const auto& p : parts)
    for (const auto& c : checks)
      if (c.part == p) ordered.push_back(&c);
  std::string part;
  for (const CheckResult* cp : ordered) {
    const CheckResult& c = *cp;
    if (c.part != part) {
      part = c.part;
      int pass = 0, fail = 0, warn = 0;
      for (const auto& d : checks) {
        if (d.part != part) continue;
        pass += d.status == Status::kPass;
        fail += d.status == Status::kFail;
        warn += d.status == Status::kWarn;
      }
      std::fprintf(out, "\n%s: %d pass, %d failed, %d warnings\n", part_title(part), pass, fail, warn);
    }
    // Absent optional features read "-" so the status column stays narrow.
    const bool absent = c.status == Status::kNotImplemented;
    std::string line = "  " + pad(absent ? "-" : status_name(c.status), 5) + " " + c.name + ": ";
    line += absent ? "not implemented" + (c.detail.empty() ? "" : " (" + c.detail + ")") : c.detail;
    while (!line.empty() && (line.back() == ' ' || line.back() == ':')) line.pop_back();
    std::fprintf(out, "%s\n", line.c_str());
  }
}

void Report::print_table(std::FILE* out, bool gradient) const {
  const Table cells = fold_cells(cases, gradient);
  if (cells.empty()) return;
  size_t width = 13;  // "gradient of" and two spaces
  for (const auto& [op, row] : cells) width = std::max(width, op.size() + 2);
  std::vector<std::string> none;  // ops with no kernel for any dtype
  std::string header = "  " + pad(gradient ? "gradient of" : "op", width);
  for (const char* d : kDtypes) header += pad(d, 6);
  while (header.back() == ' ') header.pop_back();
  std::fprintf(out, "\n%s\n%s\n", gradient ? "gradients (value_and_grad graphs compiled for the device, vs cpu):"
                                           : "kernels (eager, the plugin's own kernels only, vs cpu):",
               header.c_str());
  for (const auto& [op, row] : cells) {
    bool any = false;
    for (const auto& [dt, cell] : row) any = any || cell.supported() || cell.skip;
    if (!any) {
      none.push_back(op);
      continue;
    }
    std::string line = "  " + pad(op, width);
    for (const char* d : kDtypes) {
      auto it = row.find(d);
      line += pad(it == row.end() ? "." : it->second.word(), 6);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::fprintf(out, "%s\n", line.c_str());
  }
  if (!none.empty()) {
    std::fprintf(out, "  unsupported for every dtype (%zu):\n", none.size());
    std::fprintf(out, "%s", wrap_list(none, 4, 100).c_str());
  }
}

void Report::print(std::FILE* out) const {
  std::fprintf(out, "spora plugin check %s\n", target.c_str());
  if (!plugin_name.empty())
    std::fprintf(out, "  plugin %s (%s plugin, version %s, built for plugin ABI %s)\n  file   %s\n",
                 plugin_name.c_str(), plugin_kind.c_str(), plugin_version.empty() ? "?" : plugin_version.c_str(),
                 plugin_abi.empty() ? "?" : plugin_abi.c_str(), plugin_path.c_str());
  if (!device.empty())
    std::fprintf(out, "  device %s, reference %s, cases %s\n", device.c_str(), reference.c_str(), cases_dir.c_str());
  print_checks(out);

  // Case failures, at most three per op x dtype so one broken kernel does
  // not bury the rest.
  std::map<std::string, int> shown;
  bool header = false;
  for (const auto& c : cases) {
    if (c.status != Status::kFail) continue;
    int& n = shown[c.op + "/" + c.dtype + (c.gradient ? "/grad" : "")];
    if (++n > 3) continue;
    if (!header) {
      std::fprintf(out, "\nfailed cases:\n");
      header = true;
    }
    std::fprintf(out, "  FAIL  %s%s: %s\n", c.gradient ? "gradient " : "", c.id.c_str(), c.detail.c_str());
  }
  for (const auto& [key, n] : shown)
    if (n > 3) std::fprintf(out, "  ... and %d more failed cases of %s\n", n - 3, key.c_str());

  // Skipped cases say why (a case the reference cannot run, an unknown op).
  int skips = 0;
  for (const auto& c : cases) {
    if (c.status != Status::kSkip) continue;
    if (++skips == 1) std::fprintf(out, "\nskipped cases:\n");
    if (skips <= 5) std::fprintf(out, "  skip  %s%s: %s\n", c.gradient ? "gradient " : "", c.id.c_str(), c.detail.c_str());
  }
  if (skips > 5) std::fprintf(out, "  ... and %d more\n", skips - 5);

  print_table(out, false);
  print_table(out, true);
  if (!cases.empty())
    std::fprintf(out, "  (pass: all cases agree with cpu; FAIL: at least one does not; -: the plugin has no kernel;\n"
                      "   part: some cases have no kernel, the rest pass; view: ran without a kernel; .: no case)\n");

  // Summary.
  int cpass = 0, cfail = 0, cwarn = 0;
  for (const auto& c : checks) {
    cpass += c.status == Status::kPass;
    cfail += c.status == Status::kFail;
    cwarn += c.status == Status::kWarn;
  }
  int kpass = 0, kfail = 0, kunsup = 0, kskip = 0, gpass = 0, gfail = 0, gunsup = 0, gskip = 0;
  std::set<std::string> failed_ops;
  for (const auto& c : cases) {
    int& p = c.gradient ? gpass : kpass;
    int& f = c.gradient ? gfail : kfail;
    int& u = c.gradient ? gunsup : kunsup;
    if (c.status == Status::kPass || c.status == Status::kNoKernel) ++p;
    if (c.status == Status::kFail) {
      ++f;
      failed_ops.insert(c.gradient ? "gradient of " + c.op : c.op);
    }
    if (c.status == Status::kUnsupported) ++u;
    if (c.status == Status::kSkip) ++(c.gradient ? gskip : kskip);
  }
  auto skipped = [](int n) { return n ? ", " + std::to_string(n) + " skipped" : std::string(); };
  std::fprintf(out, "\n");
  if (!stopped.empty()) {
    std::fprintf(out, "stopped: %s\n%s: FAILED (not checked)\n", stopped.c_str(), target.c_str());
    return;
  }
  std::fprintf(out, "%s: %s -- checks %d pass, %d failed, %d warnings; kernel cases %d pass, %d failed, %d unsupported%s; "
                    "gradient cases %d pass, %d failed, %d unsupported%s\n",
               plugin_name.empty() ? target.c_str() : plugin_name.c_str(), failed() ? "FAILED" : "CERTIFIED", cpass,
               cfail, cwarn, kpass, kfail, kunsup, skipped(kskip).c_str(), gpass, gfail, gunsup,
               skipped(gskip).c_str());
  if (!failed_ops.empty()) {
    std::string list;
    for (const auto& op : failed_ops) list += (list.empty() ? "" : ", ") + op;
    std::fprintf(out, "failing ops: %s\n", list.c_str());
  }
}

nlohmann::json Report::to_json() const {
  using nlohmann::json;
  json j;
  j["target"] = target;
  j["plugin"] = {{"name", plugin_name}, {"kind", plugin_kind}, {"path", plugin_path},
                 {"version", plugin_version}, {"abi", plugin_abi}};
  j["device"] = device;
  j["reference"] = reference;
  j["cases_dir"] = cases_dir;
  j["result"] = failed() ? "fail" : "pass";
  if (!stopped.empty()) j["stopped"] = stopped;
  j["checks"] = json::array();
  for (const auto& c : checks)
    j["checks"].push_back({{"part", c.part}, {"name", c.name}, {"status", status_name(c.status)}, {"detail", c.detail}});
  j["cases"] = json::array();
  for (const auto& c : cases)
    j["cases"].push_back({{"id", c.id},
                          {"op", c.op},
                          {"dtype", c.dtype},
                          {"gradient", c.gradient},
                          {"status", status_name(c.status)},
                          {"detail", c.detail}});
  auto cell_name = [](const Cell& c) {
    const std::string w = c.word();
    if (w == "FAIL") return std::string("fail");
    if (w == "-") return std::string("unsupported");
    if (w == "part") return std::string("partial");
    return w;
  };
  for (int g = 0; g < 2; ++g) {
    json t = json::object();
    for (const auto& [op, row] : fold_cells(cases, g == 1))
      for (const auto& [dt, cell] : row) t[op][dt] = cell_name(cell);
    j[g ? "gradient_table" : "table"] = t;
  }
  return j;
}

}  // namespace spora::conformance
