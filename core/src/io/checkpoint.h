// Checkpoints: named tensors and user metadata in one safetensors file
// (io/safetensors.h), saved atomically, each tensor CRC-checked on load.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "runtime/tensor.h"

namespace spora::io {

// `names[i]` names `tensors[i]`. User metadata keys must not start with
// "spora." (reserved). Bad arguments are reported before the file is
// touched; a failure while writing leaves any previous file at `path` as it
// was.
void save_checkpoint(const std::string& path, const std::vector<std::string>& names,
                     const std::vector<const Tensor*>& tensors, const std::map<std::string, std::string>& metadata);

class Checkpoint {
 public:
  // Opens and validates the layout (no tensor is read yet). Any safetensors
  // file opens; tensors of files Spora did not write have no CRC to check.
  explicit Checkpoint(const std::string& path);

  const std::string& path() const { return file_.path(); }
  const std::vector<TensorInfo>& entries() const { return file_.tensors(); }
  // The user metadata (keys not starting with "spora.") as a JSON object.
  const std::string& metadata_json() const { return metadata_json_; }
  // Reads and CRC-checks one tensor onto `device`. Unknown names are
  // Code::kNotFound.
  Tensor read(const std::string& name, Device* device) const;

 private:
  SafetensorsFile file_;
  std::string metadata_json_;
};

// Bytes [offset, offset + n) of a tensor's data to or from host memory (the
// chunks io moves; bounds are checked).
void tensor_bytes_to_host(const Tensor& t, uint64_t offset, void* dst, size_t n);
void tensor_bytes_from_host(const Tensor& t, uint64_t offset, const void* src, size_t n);
// A TensorSource reading `t` (which must outlive the write).
TensorSource tensor_source(const std::string& name, const Tensor& t);
// Reads a tensor of `file` onto `device`, chunk by chunk, checking its CRC.
Tensor read_tensor(const SafetensorsFile& file, const TensorInfo& info, Device* device);

// The metadata a user may set: string values, no reserved keys. `tag` starts
// error messages.
void check_user_metadata(const std::map<std::string, std::string>& metadata, const std::string& tag);

}  // namespace spora::io
