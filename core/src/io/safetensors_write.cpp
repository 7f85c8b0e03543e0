// Writing safetensors files, atomically, one tensor in host memory at a time.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "io/atomic_file.h"
#include "io/crc32c.h"
#include "io/safetensors.h"
#include "support/error.h"

namespace spora::io {
namespace {

using json = nlohmann::json;

struct DTypeName {
  DType dtype;
  const char* name;
};
constexpr DTypeName kNames[] = {
    {SPORA_DTYPE_F32, "F32"}, {SPORA_DTYPE_F64, "F64"}, {SPORA_DTYPE_F16, "F16"}, {SPORA_DTYPE_BF16, "BF16"},
    {SPORA_DTYPE_I32, "I32"}, {SPORA_DTYPE_I64, "I64"}, {SPORA_DTYPE_U8, "U8"},   {SPORA_DTYPE_BOOL, "BOOL"},
};

bool valid_utf8(const std::string& s) {
  try {
    (void)json(s).dump();
    return true;
  } catch (const json::type_error&) {
    return false;
  }
}

std::string crc_hex(uint32_t c) { return fmt::format("{:08x}", c); }

}  // namespace

const char* st_dtype_name(DType t) {
  for (const auto& n : kNames)
    if (n.dtype == t) return n.name;
  return nullptr;
}

DType st_dtype_from_name(const std::string& name) {
  for (const auto& n : kNames)
    if (name == n.name) return n.dtype;
  return SPORA_DTYPE_INVALID;
}

std::string string_map_to_json(const std::map<std::string, std::string>& m) {
  json j = json::object();
  for (const auto& [k, v] : m) j[k] = v;
  return j.dump();
}

void write_safetensors(const std::string& path, const std::string& tag, const std::vector<TensorSource>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  // Everything that can be checked is checked before the file exists.
  std::set<std::string> names;
  for (const TensorSource& t : tensors) {
    if (t.name.empty()) fail(Code::kInvalidArgument, "[{}] saving '{}': a tensor name is empty", tag, path);
    if (t.name == "__metadata__")
      fail(Code::kInvalidArgument, "[{}] saving '{}': '__metadata__' cannot name a tensor", tag, path);
    if (t.name.find('\0') != std::string::npos || !valid_utf8(t.name))
      fail(Code::kInvalidArgument, "[{}] saving '{}': tensor name '{}' is not valid UTF-8 text", tag, path, t.name);
    if (!names.insert(t.name).second)
      fail(Code::kInvalidArgument, "[{}] saving '{}': tensor name '{}' appears twice", tag, path, t.name);
    if (!st_dtype_name(t.dtype))
      fail(Code::kInvalidArgument, "[{}] saving '{}': tensor '{}' has invalid dtype {}", tag, path, t.name,
           static_cast<int>(t.dtype));
  }
  for (const auto& [k, v] : metadata) {
    if (k.compare(0, 13, "spora.crc32c.") == 0)
      fail(Code::kInternal, "[{}] saving '{}': metadata key '{}' is computed by the writer", tag, path, k);
    if (!valid_utf8(k) || !valid_utf8(v))
      fail(Code::kInvalidArgument, "[{}] saving '{}': metadata '{}' is not valid UTF-8 text", tag, path, k);
  }

  // Layout: largest elements first, then in the given order; back to back.
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return dtype_size(tensors[a].dtype) > dtype_size(tensors[b].dtype);
  });
  std::vector<uint64_t> begin(tensors.size()), size(tensors.size());
  uint64_t offset = 0;
  for (size_t i : order) {
    size[i] = static_cast<uint64_t>(tensors[i].shape.numel()) * dtype_size(tensors[i].dtype);
    begin[i] = offset;
    offset += size[i];
  }

  // The header, with CRCs filled in after the data is written. A CRC is
  // always 8 hex digits, so the header's length is known now.
  std::vector<uint32_t> crcs(tensors.size(), 0);
  auto header_text = [&] {
    json h = json::object();
    for (size_t i = 0; i < tensors.size(); ++i) {
      const TensorSource& t = tensors[i];
      h[t.name] = {{"dtype", st_dtype_name(t.dtype)},
                   {"shape", std::vector<int64_t>(t.shape.dims, t.shape.dims + t.shape.rank)},
                   {"data_offsets", {begin[i], begin[i] + size[i]}}};
    }
    json m = json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    for (size_t i = 0; i < tensors.size(); ++i) m["spora.crc32c." + tensors[i].name] = crc_hex(crcs[i]);
    if (!m.empty()) h["__metadata__"] = m;
    std::string s = h.dump();
    // Spaces (JSON whitespace) so the data section starts on kDataAlign.
    const uint64_t end = 8 + s.size();
    s.append(static_cast<size_t>((kDataAlign - end % kDataAlign) % kDataAlign), ' ');
    return s;
  };
  const std::string draft = header_text();
  if (draft.size() > kMaxHeaderBytes)
    fail(Code::kInvalidArgument, "[{}] saving '{}': the header would be {} bytes, over the limit of {} (large graph "
         "constants? make them weights)", tag, path, draft.size(), kMaxHeaderBytes);
  const uint64_t data_start = 8 + draft.size();

  AtomicFile file(path);
  uint64_t largest = 0;
  for (uint64_t n : size) largest = std::max(largest, n);
  std::vector<uint8_t> buf(static_cast<size_t>(std::min<uint64_t>(largest, kChunkBytes)));
  for (size_t i : order) {
    uint32_t crc = 0;
    for (uint64_t off = 0; off < size[i]; off += buf.size()) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), size[i] - off));
      tensors[i].fill(off, buf.data(), n);
      crc = crc32c(buf.data(), n, crc);
      file.write_at(data_start + begin[i] + off, buf.data(), n);
    }
    crcs[i] = crc;
  }
  buf = std::vector<uint8_t>();
  const std::string header = header_text();
  if (header.size() != draft.size())
    fail(Code::kInternal, "[{}] saving '{}': header length changed from {} to {}", tag, path, draft.size(),
         header.size());
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(static_cast<uint64_t>(header.size()) >> (8 * i));
  file.write_at(0, len, 8);
  file.write_at(8, header.data(), header.size());
  file.commit();
}

}  // namespace spora::io
