// The probe sandbox's verdicts, kept between runs in one small text file so
// that a start with unchanged plugins starts no probe process. A verdict is
// keyed by the plugin's real path, size and modification time: replacing or
// touching the file asks again. The file is a cache only: a missing,
// corrupt, foreign or unwritable one is ignored, never an error.
#pragma once
#include <cstdint>
#include <map>
#include <string>

namespace spora {

struct CachedVerdict {
  bool survived = false;
  std::string reason;      // why it died (when !survived)
  double timeout_s = 0.0;  // a timeout's limit (0 otherwise): a longer limit asks again
};

class VerdictCache {
 public:
  // Reads `file` ("" = no cache: lookups miss, saves do nothing).
  explicit VerdictCache(std::string file);

  const std::string& file() const { return file_; }
  // The verdict for `real_path` if the file still has the size and
  // modification time it had when judged; fills *size/*mtime_ns for store().
  const CachedVerdict* lookup(const std::string& real_path, uint64_t* size, int64_t* mtime_ns) const;
  void store(const std::string& real_path, uint64_t size, int64_t mtime_ns, CachedVerdict v);
  // Writes the file (atomically: a temporary file renamed over it) if
  // anything was stored. Failures are logged at debug level and ignored.
  void save();

 private:
  struct Entry {
    uint64_t size = 0;
    int64_t mtime_ns = 0;
    CachedVerdict verdict;
  };
  std::string file_;
  std::map<std::string, Entry> entries_;
  bool dirty_ = false;
};

// Where verdicts are kept: SPORA_PLUGIN_CACHE_DIR (empty = no cache), else
// $XDG_CACHE_HOME/spora, else $HOME/.cache/spora; the file in it is
// plugin-verdicts.txt. "" when there is nowhere.
std::string verdict_cache_file();

}  // namespace spora
