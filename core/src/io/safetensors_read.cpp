// Reading safetensors files: a streaming (SAX) parse of the header against
// the schema, then layout checks, all before any tensor memory exists.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "io/crc32c.h"
#include "io/safetensors.h"
#include "support/error.h"

namespace spora::io {
namespace {

using json = nlohmann::json;

// What the parser is inside of.
enum class Ctx { kRoot, kTensor, kMeta, kShape, kOffsets };

// Builds the header's tensors and metadata straight from parser events, so
// memory grows with what the schema allows (a tensor entry or a metadata
// string), never with arbitrary JSON. Throws spora::Error naming the file.
class HeaderParser : public nlohmann::json_sax<json> {
 public:
  HeaderParser(std::string tag, std::string path) : tag_(std::move(tag)), path_(std::move(path)) {}

  std::vector<TensorInfo> tensors;
  std::map<std::string, std::string> metadata;

  bool null() override { return unexpected("null"); }
  bool boolean(bool) override { return unexpected("a boolean"); }
  bool number_integer(number_integer_t v) override {
    if (top_is(Ctx::kShape) || top_is(Ctx::kOffsets)) bad("tensor '{}': {} holds a negative number {}", cur_.name, key_, v);
    return unexpected("a number");
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (top_is(Ctx::kShape)) {
      if (cur_.shape.rank >= kMaxRank) bad("tensor '{}': shape has more than {} dimensions", cur_.name, kMaxRank);
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) bad("tensor '{}': dimension {} too large", cur_.name, v);
      cur_.shape.dims[cur_.shape.rank++] = static_cast<int64_t>(v);
      return true;
    }
    if (top_is(Ctx::kOffsets)) {
      if (offsets_seen_ >= 2) bad("tensor '{}': data_offsets must be [begin, end]", cur_.name);
      (offsets_seen_++ == 0 ? cur_.begin : cur_.end) = v;
      return true;
    }
    return unexpected("a number");
  }
  bool number_float(number_float_t, const string_t&) override {
    if (top_is(Ctx::kShape) || top_is(Ctx::kOffsets)) bad("tensor '{}': {} must hold integers", cur_.name, key_);
    return unexpected("a number");
  }
  bool binary(binary_t&) override { return unexpected("binary data"); }
  bool string(string_t& s) override {
    if (top_is(Ctx::kMeta)) {
      metadata[key_] = std::move(s);
      return true;
    }
    if (top_is(Ctx::kTensor) && key_ == "dtype") {
      cur_.dtype = st_dtype_from_name(s);
      if (cur_.dtype == SPORA_DTYPE_INVALID) bad("tensor '{}': dtype '{}' is not one Spora reads", cur_.name, s);
      return true;
    }
    return unexpected("a string");
  }
  bool start_object(std::size_t) override {
    if (stack_.empty()) {
      if (done_) bad("{}", "more than one JSON value");
      stack_.push_back(Ctx::kRoot);
      return true;
    }
    if (top_is(Ctx::kRoot)) {
      if (key_ == "__metadata__") {
        stack_.push_back(Ctx::kMeta);
      } else {
        cur_ = TensorInfo{};
        cur_.name = key_;
        fields_.clear();
        stack_.push_back(Ctx::kTensor);
      }
      return true;
    }
    return unexpected("an object");
  }
  bool key(string_t& k) override {
    if (k.find('\0') != std::string::npos) bad("{}", "a name holds a NUL character");
    if (top_is(Ctx::kRoot)) {
      if (!root_keys_.insert(k).second) bad("tensor name '{}' appears twice", k);
    } else if (top_is(Ctx::kTensor)) {
      if (k != "dtype" && k != "shape" && k != "data_offsets") bad("tensor '{}': unknown field '{}'", cur_.name, k);
      if (!fields_.insert(k).second) bad("tensor '{}': field '{}' appears twice", cur_.name, k);
    } else if (top_is(Ctx::kMeta)) {
      if (metadata.count(k)) bad("metadata key '{}' appears twice", k);
    }
    key_ = std::move(k);
    return true;
  }
  bool end_object() override {
    const Ctx c = stack_.back();
    stack_.pop_back();
    if (c == Ctx::kTensor) {
      for (const char* f : {"dtype", "shape", "data_offsets"})
        if (!fields_.count(f)) bad("tensor '{}': missing field '{}'", cur_.name, f);
      tensors.push_back(std::move(cur_));
    } else if (c == Ctx::kRoot) {
      done_ = true;
    }
    return true;
  }
  bool start_array(std::size_t) override {
    if (top_is(Ctx::kTensor) && key_ == "shape") {
      stack_.push_back(Ctx::kShape);
      return true;
    }
    if (top_is(Ctx::kTensor) && key_ == "data_offsets") {
      offsets_seen_ = 0;
      stack_.push_back(Ctx::kOffsets);
      return true;
    }
    return unexpected("an array");
  }
  bool end_array() override {
    if (top_is(Ctx::kOffsets) && offsets_seen_ != 2) bad("tensor '{}': data_offsets must be [begin, end]", cur_.name);
    stack_.pop_back();
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception&) override {
    bad("header is not valid JSON (at byte {} of the header)", position);
  }

 private:
  template <class... Args>
  [[noreturn]] void bad(fmt::format_string<Args...> f, Args&&... args) {
    fail(Code::kInvalidArgument, "[{}] '{}': {}", tag_, path_, fmt::format(f, std::forward<Args>(args)...));
  }
  bool top_is(Ctx c) const { return !stack_.empty() && stack_.back() == c; }
  [[noreturn]] bool unexpected(const char* what) {
    if (stack_.empty()) bad("header is {}, not a JSON object", what);
    switch (stack_.back()) {
      case Ctx::kRoot: bad("'{}' is {}, not a tensor entry", key_, what);
      case Ctx::kMeta: bad("metadata '{}' is {}, not a string", key_, what);
      case Ctx::kTensor: bad("tensor '{}': field '{}' cannot be {}", cur_.name, key_, what);
      default: bad("tensor '{}': {} holds {}", cur_.name, key_, what);
    }
  }

  std::string tag_, path_;
  std::vector<Ctx> stack_;
  std::string key_;
  bool done_ = false;
  TensorInfo cur_;
  int offsets_seen_ = 0;
  std::set<std::string> root_keys_, fields_;
};

bool parse_crc(const std::string& s, uint32_t* out) {
  if (s.size() != 8) return false;
  uint32_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else return false;
    v = v << 4 | static_cast<uint32_t>(d);
  }
  *out = v;
  return true;
}

// pread all of [offset, offset + n) or fail naming what was being read.
void read_exact(int fd, uint64_t offset, void* dst, size_t n, const std::string& tag, const std::string& path,
                const std::string& what) {
  auto* p = static_cast<char*>(dst);
  while (n) {
    const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      fail(Code::kIo, "[{}] '{}': cannot read {}: {}", tag, path, what, std::strerror(errno));
    }
    if (r == 0) fail(Code::kIo, "[{}] '{}': the file ended while reading {} (did it change after opening?)", tag, path, what);
    p += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
}

}  // namespace

std::map<std::string, std::string> parse_string_map(const std::string& text, const std::string& what) {
  // The same streaming parser: a string map is a header holding only
  // __metadata__'s contents. Wrap the text so the root is the metadata.
  struct MapParser : nlohmann::json_sax<json> {
    explicit MapParser(const std::string& w) : what(w) {}
    const std::string& what;
    std::map<std::string, std::string> out;
    std::string key_;
    int depth = 0;
    [[noreturn]] bool no(const char* v) {
      if (depth == 0) fail(Code::kInvalidArgument, "[{}] metadata must be a JSON object of strings, not {}", what, v);
      fail(Code::kInvalidArgument, "[{}] metadata '{}' is {}, not a string", what, key_, v);
    }
    bool null() override { return no("null"); }
    bool boolean(bool) override { return no("a boolean"); }
    bool number_integer(number_integer_t) override { return no("a number"); }
    bool number_unsigned(number_unsigned_t) override { return no("a number"); }
    bool number_float(number_float_t, const string_t&) override { return no("a number"); }
    bool binary(binary_t&) override { return no("binary data"); }
    bool string(string_t& s) override {
      if (depth != 1) no("a string");
      out[key_] = std::move(s);
      return true;
    }
    bool start_object(std::size_t) override {
      if (depth++ != 0) no("an object");
      return true;
    }
    bool key(string_t& k) override {
      if (k.find('\0') != std::string::npos)
        fail(Code::kInvalidArgument, "[{}] metadata key holds a NUL character", what);
      if (out.count(k)) fail(Code::kInvalidArgument, "[{}] metadata key '{}' appears twice", what, k);
      key_ = std::move(k);
      return true;
    }
    bool end_object() override {
      --depth;
      return true;
    }
    bool start_array(std::size_t) override { return no("an array"); }
    bool end_array() override { return true; }
    bool parse_error(std::size_t pos, const std::string&, const nlohmann::detail::exception&) override {
      fail(Code::kInvalidArgument, "[{}] metadata is not valid JSON (at byte {})", what, pos);
    }
  } p(what);
  json::sax_parse(text.begin(), text.end(), &p);
  return std::move(p.out);
}

SafetensorsFile::SafetensorsFile(const std::string& path, const std::string& tag) : path_(path), tag_(tag) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    const int err = errno;
    fail(err == ENOENT ? Code::kNotFound : Code::kIo, "[{}] cannot open '{}': {}", tag, path, std::strerror(err));
  }
  try {
    struct stat st;
    if (::fstat(fd_, &st) != 0) fail(Code::kIo, "[{}] cannot stat '{}': {}", tag, path, std::strerror(errno));
    // A FIFO or device would block or never end.
    if (!S_ISREG(st.st_mode)) fail(Code::kInvalidArgument, "[{}] '{}' is not a regular file", tag, path);
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    if (size < 8) fail(Code::kInvalidArgument, "[{}] '{}': {} bytes is too short for a header", tag, path, size);
    unsigned char len[8];
    read_exact(fd_, 0, len, 8, tag, path, "the header length");
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = n << 8 | len[i];
    if (n > size - 8)
      fail(Code::kInvalidArgument, "[{}] '{}': header length {} runs past the end of the file ({} bytes)", tag, path, n,
           size);
    if (n > kMaxHeaderBytes)
      fail(Code::kInvalidArgument, "[{}] '{}': header length {} exceeds the limit of {} bytes", tag, path, n,
           kMaxHeaderBytes);
    if (n < 2) fail(Code::kInvalidArgument, "[{}] '{}': header length {} is too short for a JSON object", tag, path, n);
    std::string header(static_cast<size_t>(n), '\0');  // bounded by the file size just checked
    read_exact(fd_, 8, header.data(), header.size(), tag, path, "the header");
    HeaderParser parser(tag, path);
    json::sax_parse(header.begin(), header.end(), &parser);
    header = std::string();
    data_start_ = 8 + n;
    data_size_ = size - data_start_;

    // Layout: sizes match dtype x shape, ranges inside the data section, no overlap.
    for (TensorInfo& t : parser.tensors) {
      // Element count and bytes without overflow (a zero dimension anywhere
      // makes the tensor empty whatever the others say).
      constexpr uint64_t kLimit = static_cast<uint64_t>(1) << 62;
      const uint64_t es = dtype_size(t.dtype);
      uint64_t numel = 1;
      bool overflow = false;
      if (std::find(t.shape.dims, t.shape.dims + t.shape.rank, 0) != t.shape.dims + t.shape.rank) {
        numel = 0;
      } else {
        for (int32_t i = 0; i < t.shape.rank && !overflow; ++i) {
          const uint64_t d = static_cast<uint64_t>(t.shape.dims[i]);
          if (numel > kLimit / d) overflow = true;
          numel *= d;
        }
      }
      if (overflow || numel > kLimit / es)
        fail(Code::kInvalidArgument, "[{}] '{}': tensor '{}': shape {} is too large", tag, path, t.name, t.shape.str());
      if (t.end < t.begin || t.end > data_size_)
        fail(Code::kInvalidArgument,
             "[{}] '{}': tensor '{}': data_offsets [{}, {}] are outside the data section ({} bytes)", tag, path, t.name,
             t.begin, t.end, data_size_);
      if (t.end - t.begin != numel * es)
        fail(Code::kInvalidArgument, "[{}] '{}': tensor '{}': {} {} needs {} bytes, data_offsets give {}", tag, path,
             t.name, st_dtype_name(t.dtype), t.shape.str(), numel * es, t.end - t.begin);
    }
    std::vector<const TensorInfo*> by_offset;
    for (const TensorInfo& t : parser.tensors)
      if (t.end > t.begin) by_offset.push_back(&t);
    std::sort(by_offset.begin(), by_offset.end(),
              [](const TensorInfo* a, const TensorInfo* b) { return a->begin < b->begin; });
    for (size_t i = 1; i < by_offset.size(); ++i)
      if (by_offset[i]->begin < by_offset[i - 1]->end)
        fail(Code::kInvalidArgument, "[{}] '{}': tensors '{}' and '{}' overlap", tag, path, by_offset[i - 1]->name,
             by_offset[i]->name);

    // Spora's metadata: format, version, a CRC for every tensor.
    metadata_ = std::move(parser.metadata);
    auto fmt_it = metadata_.find("spora.format");
    if (fmt_it != metadata_.end()) {
      format_ = fmt_it->second;
      if (format_ != "checkpoint" && format_ != "model")
        fail(Code::kInvalidArgument, "[{}] '{}': unknown spora.format '{}'", tag, path, format_);
      auto v = metadata_.find("spora.version");
      if (v == metadata_.end() || v->second.empty() || v->second.size() > 9 ||
          v->second.find_first_not_of("0123456789") != std::string::npos)
        fail(Code::kInvalidArgument, "[{}] '{}': missing or malformed spora.version", tag, path);
      if (std::stoi(v->second) > kFormatVersion)
        fail(Code::kInvalidArgument, "[{}] '{}': written by a newer Spora (format version {}); this one reads up to {}",
             tag, path, v->second, kFormatVersion);
    }
    std::map<std::string, TensorInfo*> by_name;
    for (TensorInfo& t : parser.tensors) by_name[t.name] = &t;
    const std::string crc_prefix = "spora.crc32c.";
    for (const auto& [k, v] : metadata_) {
      if (k.compare(0, crc_prefix.size(), crc_prefix) != 0) continue;
      const std::string name = k.substr(crc_prefix.size());
      auto it = by_name.find(name);
      if (it == by_name.end())
        fail(Code::kInvalidArgument, "[{}] '{}': metadata holds a CRC for '{}', which is not a tensor of the file", tag,
             path, name);
      if (!parse_crc(v, &it->second->crc))
        fail(Code::kInvalidArgument, "[{}] '{}': tensor '{}': malformed CRC '{}'", tag, path, name, v);
      it->second->has_crc = true;
    }
    if (!format_.empty())
      for (const TensorInfo& t : parser.tensors)
        if (!t.has_crc) fail(Code::kInvalidArgument, "[{}] '{}': tensor '{}' has no CRC", tag, path, t.name);

    tensors_ = std::move(parser.tensors);
    std::stable_sort(tensors_.begin(), tensors_.end(),
                     [](const TensorInfo& a, const TensorInfo& b) { return a.begin < b.begin; });
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (fd_ >= 0) ::close(fd_);
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  for (const TensorInfo& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

void SafetensorsFile::read_chunks(const TensorInfo& t,
                                  const std::function<void(uint64_t offset, const void* data, size_t n)>& sink) const {
  const std::string what = "tensor '" + t.name + "'";
  std::vector<uint8_t> buf(static_cast<size_t>(std::min<uint64_t>(t.nbytes(), kChunkBytes)));
  uint32_t crc = 0;
  for (uint64_t off = 0; off < t.nbytes(); off += buf.size()) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), t.nbytes() - off));
    read_exact(fd_, data_start_ + t.begin + off, buf.data(), n, tag_, path_, what);  // inside the file: checked at open
    crc = crc32c(buf.data(), n, crc);
    sink(off, buf.data(), n);
  }
  if (t.has_crc && crc != t.crc)
    fail(Code::kInvalidArgument, "[{}] '{}': tensor '{}' is corrupted (CRC32C {:08x}, expected {:08x})", tag_, path_,
         t.name, crc, t.crc);
}

std::vector<uint8_t> SafetensorsFile::read(const TensorInfo& t) const {
  std::vector<uint8_t> bytes(static_cast<size_t>(t.nbytes()));  // inside the file: checked at open
  read_chunks(t, [&](uint64_t off, const void* p, size_t n) { std::memcpy(bytes.data() + off, p, n); });
  return bytes;
}

}  // namespace spora::io
