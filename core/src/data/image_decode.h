// JPEG and PNG decoding for the data pipeline (vision.Decode,
// ImageFolderDataset), through Debian's libjpeg-turbo and libpng.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "data/column.h"

namespace spora::data {

// One encoded image -> an HWC uint8 RGB column (grey and palette images are
// expanded to RGB, alpha is dropped, 16-bit PNG samples are reduced to 8).
// `what` names the image in errors (its file, or "image"): a corrupt or
// truncated image, one of another format, or one over 2^28 pixels is
// kInvalidArgument naming it; a build without the library is kUnimplemented.
Column decode_image(const uint8_t* data, size_t size, const std::string& what);

// Whether this build decodes the format.
bool can_decode_jpeg();
bool can_decode_png();

}  // namespace spora::data
