// The safetensors file layout, which Spora's checkpoint and model files use
// so that other tools can read them:
//
//   8 bytes    N, the header length (unsigned, little-endian)
//   N bytes    a JSON object: {"<tensor>": {"dtype": "F32", "shape": [2, 3],
//              "data_offsets": [begin, end]}, ..., "__metadata__": {string:
//              string}}, padded with spaces so the data starts on a 64-byte
//              boundary
//   the rest   the tensors' bytes, dense row-major little-endian, at the
//              offsets (relative to the start of this section)
//
// Tensors are stored back to back with no gaps (the reference safetensors
// loader rejects gaps), largest element size first, so each tensor starts
// at a multiple of its element size. Spora's own keys in __metadata__ start
// with "spora.": "spora.format" ("checkpoint" or "model"), "spora.version",
// "spora.crc32c.<tensor>" (8 hex digits, CRC-32C of the tensor's bytes) and,
// for models, "spora.graph" (the graph JSON).
//
// Reading treats the file as hostile: the header length is checked against
// the file size, the header is parsed as a stream against the schema (so a
// header cannot make the parser allocate much more than its own size), every
// dtype, shape and offset range is checked (in the data section, matching
// dtype size times element count, no overlap, unique names) before any
// tensor memory is allocated, and every tensor of a Spora file is checked
// against its CRC when read.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/shape.h"

namespace spora::io {

constexpr uint64_t kDataAlign = 64;
// The largest header accepted or written (the reference loader's limit).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr int kFormatVersion = 1;
// Keys of __metadata__ under this prefix belong to Spora.
constexpr const char* kReservedPrefix = "spora.";

// "F32", "BF16", ... (the safetensors names); nullptr for invalid values.
const char* st_dtype_name(DType t);
// SPORA_DTYPE_INVALID for names Spora does not know.
DType st_dtype_from_name(const std::string& name);

struct TensorInfo {
  std::string name;
  DType dtype = SPORA_DTYPE_INVALID;
  Shape shape;
  uint64_t begin = 0, end = 0;  // byte range in the data section
  bool has_crc = false;
  uint32_t crc = 0;
  uint64_t nbytes() const { return end - begin; }
};

// Tensors move between files and devices in chunks of this many bytes, so
// saving or loading holds one chunk in host memory, not a whole tensor.
constexpr size_t kChunkBytes = size_t{8} << 20;

// A tensor to write. `fill` copies bytes [offset, offset + bytes) of the
// tensor to `dst`; it is called for consecutive chunks, in order, when the
// tensor's turn comes.
struct TensorSource {
  std::string name;
  DType dtype = SPORA_DTYPE_INVALID;
  Shape shape;
  std::function<void(uint64_t offset, void* dst, size_t bytes)> fill;
};

// Writes `tensors` and `metadata` (which must not hold spora.crc32c.* keys:
// those are computed here) to `path` atomically (io/atomic_file.h). `tag`
// ("checkpoint", "model") starts error messages. Names must be unique,
// non-empty, valid UTF-8 and not "__metadata__".
void write_safetensors(const std::string& path, const std::string& tag, const std::vector<TensorSource>& tensors,
                       const std::map<std::string, std::string>& metadata);

// An open, validated file. The file stays open, so a later atomic
// replacement of the path does not change what this object reads.
class SafetensorsFile {
 public:
  // Errors: Code::kNotFound (no such file), kIo (cannot read), and
  // kInvalidArgument for every malformed layout, each naming the file.
  SafetensorsFile(const std::string& path, const std::string& tag);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  // In file order.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find(const std::string& name) const;
  // All of __metadata__, Spora's keys included.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // "checkpoint" / "model" for files Spora wrote, "" for other files.
  const std::string& format() const { return format_; }

  // The tensor's bytes, checked against its CRC when it has one (every
  // tensor of a Spora file does). A mismatch is kInvalidArgument naming the
  // tensor and the file.
  std::vector<uint8_t> read(const TensorInfo& t) const;
  // The same in chunks: `sink` gets consecutive pieces [offset, offset + n)
  // of the tensor; the CRC is checked after the last one, so on a mismatch
  // the sink has seen the damaged bytes and the caller must discard them
  // (this throws).
  void read_chunks(const TensorInfo& t,
                   const std::function<void(uint64_t offset, const void* data, size_t n)>& sink) const;

 private:
  std::string path_, tag_, format_;
  int fd_ = -1;
  uint64_t data_start_ = 0, data_size_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Parses a JSON object whose values are all strings (user metadata),
// rejecting duplicate keys and anything else. `what` starts error messages.
std::map<std::string, std::string> parse_string_map(const std::string& text, const std::string& what);
// The inverse: a compact JSON object (keys sorted).
std::string string_map_to_json(const std::map<std::string, std::string>& m);

}  // namespace spora::io
