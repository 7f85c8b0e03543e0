#include "io/checkpoint.h"

#include "support/error.h"

namespace spora::io {

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
    sources.push_back({names[i], t->dtype, t->shape, [t](void* dst, size_t n) { tensor_read(*t, dst, n); }});
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
  const std::vector<uint8_t> bytes = file_.read(*info);
  return tensor_from_host(device, info->dtype, info->shape, bytes.data(), bytes.size());
}

}  // namespace spora::io
