#include "passes/instrument.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "ir/printer.h"
#include "ir/serialize.h"
#include "ir/verifier.h"
#include "support/error.h"
#include "support/log.h"

namespace spora::passes {
namespace {

class Timing final : public Instrument {
 public:
  void after_pass(const ir::Graph& g, const Pass&, const PassStats& s) override {
    logger().debug("[passes] {} on '{}': {:.3f} ms{}", s.name, g.name(), s.ms, s.changed ? " (changed)" : "");
  }
};

class DumpIR final : public Instrument {
 public:
  explicit DumpIR(std::string dir) : dir_(std::move(dir)) {}
  void before_pass(const ir::Graph& g, const Pass& p) override {
    static std::atomic<int> seq{0};
    current_ = seq++;  // the after-dump of this pass shares the number
    dump(g, p.name, "before");
  }
  void after_pass(const ir::Graph& g, const Pass& p, const PassStats&) override { dump(g, p.name, "after"); }

 private:
  void dump(const ir::Graph& g, const char* pass, const char* when) const {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec) {
      logger().warn("[passes] cannot create SPORA_DUMP_IR directory {}: {}", dir_, ec.message());
      return;
    }
    char prefix[32];
    std::snprintf(prefix, sizeof prefix, "%03d", current_);
    const std::string base = dir_ + "/" + g.name() + "." + prefix + "." + pass + "." + when;
    std::ofstream(base + ".txt") << ir::to_text(g);
    std::ofstream(base + ".json") << ir::to_json(g, 1);
    std::ofstream(base + ".dot") << ir::to_dot(g);
  }
  std::string dir_;
  static thread_local int current_;
};
thread_local int DumpIR::current_ = 0;

class VerifyEach final : public Instrument {
 public:
  void after_pass(const ir::Graph& g, const Pass& p, const PassStats&) override {
    try {
      ir::verify(g);
    } catch (const Error& e) {
      throw Error(Code::kInternal, std::string("[pass ") + p.name + "] left an invalid graph: " + e.what());
    }
  }
};

}  // namespace

std::shared_ptr<Instrument> timing_instrument() { return std::make_shared<Timing>(); }
std::shared_ptr<Instrument> dump_ir_instrument(std::string dir) { return std::make_shared<DumpIR>(std::move(dir)); }
std::shared_ptr<Instrument> verify_each_instrument() { return std::make_shared<VerifyEach>(); }

bool verify_each_from_env() {
  const char* v = std::getenv("SPORA_VERIFY_EACH");
  if (v && *v) return std::string(v) != "0";
#ifdef NDEBUG
  return false;
#else
  return true;
#endif
}

}  // namespace spora::passes
