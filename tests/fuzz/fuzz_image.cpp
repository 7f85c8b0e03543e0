// JPEG and PNG decoding (data/image_decode.h: vision.Decode,
// ImageFolderDataset): the input is the encoded image, decoded in memory as
// the pipeline does. A refusal must name the image (the "what" argument: the
// user finds the bad file by it); an image that decodes must be the HWC
// uint8 RGB column the header promises, within the 2^28-pixel cap.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "data/image_decode.h"
#include "fuzz_util.h"

namespace {

constexpr const char* kName = "fuzz/input.img";

void check_decoded(const spora::data::Column& c) {
  const auto& s = c.shape;
  const bool ok = c.dtype == SPORA_DTYPE_U8 && s.size() == 3 && s[0] > 0 && s[1] > 0 && s[2] == 3 &&
                  s[0] * s[1] <= (int64_t{1} << 28) && c.bytes.size() == static_cast<size_t>(s[0] * s[1] * 3);
  if (!ok) {
    std::fprintf(stderr, "spora fuzz image: decoded to dtype %d, shape %s, %zu bytes (want HWC u8, 3 channels)\n",
                 static_cast<int>(c.dtype), spora::data::shape_str(s).c_str(), c.bytes.size());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    check_decoded(spora::data::decode_image(data, size, kName));
  } catch (const spora::Error& e) {
    if (std::string(e.what()).find(kName) == std::string::npos)
      spora::fuzz::report_escape("image (a refusal that does not name the image)", e.what());
    spora::fuzz::report_refusal("image", e.what());
  } catch (const std::exception& e) {
    spora::fuzz::report_escape("image", e.what());
  }
  return 0;
}
