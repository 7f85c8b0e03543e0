#include "io/checkpoint.h"

#include "support/error.h"

namespace spora::io {

namespace {

spora_devptr_t at(const Tensor& t, uint64_t offset, size_t n) {
  if (offset + n > t.nbytes())
    fail(Code::kInternal, "[io] bytes [{}, {}) of a {}-byte tensor", offset, offset + n, t.nbytes());
  return reinterpret_cast<spora_devptr_t>(reinterpret_cast<uintptr_t>(t.data()) + offset);
}

}  // namespace

void tensor_bytes_to_host(const Tensor& t, uint64_t offset, void* dst, size_t n) {
  if (n) t.device()->copy_d2h(dst, at(t, offset, n), n);
}

void tensor_bytes_from_host(const Tensor& t, uint64_t offset, const void* src, size_t n) {
  if (n) t.device()->copy_h2d(at(t, offset, n), src, n);
}

TensorSource tensor_source(const std::string& name, const Tensor& t) {
  const Tensor* p = &t;
  return {name, t.dtype, t.shape, [p](uint64_t off, void* dst, size_t n) { tensor_bytes_to_host(*p, off, dst, n); }};
}

Tensor read_tensor(const SafetensorsFile& file, const TensorInfo& info, Device* device) {
  Tensor t = make_tensor(device, info.dtype, info.shape);
  file.read_chunks(info, [&](uint64_t off, const void* p, size_t n) { tensor_bytes_from_host(t, off, p, n); });
  return t;
}

void check_user_metadata(const std::map<std::string, std::string>& metadata, const std::string& tag) {
  for (const auto& kv : metadata)
    if (kv.first.compare(0, 6, kReservedPrefix) == 0)
      fail(Code::kInvalidArgument, "[{}] metadata key '{}': keys starting with '{}' are reserved", tag, kv.first,
           kReservedPrefix);
}

void save_checkpoint(const std::string& path, const std::vector<std::string>& names,
                     const std::vector<const Tensor*>& tensors, const std::map<std::string, std::string>& metadata) {
  if (names.size() != tensors.size())
    fail(Code::kInternal, "[checkpoint] {} names for {} tensors", names.size(), tensors.size());
  check_user_metadata(metadata, "checkpoint");
  std::vector<TensorSource> sources;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor* t = tensors[i];
    if (!t || !t->buffer) fail(Code::kInvalidArgument, "[checkpoint] saving '{}': tensor '{}' is null", path, names[i]);
    sources.push_back(tensor_source(names[i], *t));
  }
  std::map<std::string, std::string> meta = metadata;
  meta["spora.format"] = "checkpoint";
  meta["spora.version"] = std::to_string(kFormatVersion);
  write_safetensors(path, "checkpoint", sources, meta);
}

Checkpoint::Checkpoint(const std::string& path) : file_(path, "checkpoint") {
  std::map<std::string, std::string> user;
  for (const auto& kv : file_.metadata())
    if (kv.first.compare(0, 6, kReservedPrefix) != 0) user.insert(kv);
  metadata_json_ = string_map_to_json(user);
}

Tensor Checkpoint::read(const std::string& name, Device* device) const {
  const TensorInfo* info = file_.find(name);
  if (!info) fail(Code::kNotFound, "[checkpoint] '{}' has no tensor '{}'", file_.path(), name);
  return read_tensor(file_, *info, device);
}

}  // namespace spora::io
