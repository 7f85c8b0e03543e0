# cmake -DIN=<file.spv> -DOUT=<file.cpp> -P embed_spirv.cmake: writes the
# bytes of IN as spora::ze::kSpirv / kSpirvSize (see ze_module.h).
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR size "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){16})" "\\1\n  " body "${body}")
file(WRITE ${OUT} "// Generated from ${IN}; do not edit.\n#include <cstddef>\nnamespace spora::ze {\n"
  "extern const unsigned char kSpirv[];\nextern const size_t kSpirvSize;\n"
  "alignas(4) const unsigned char kSpirv[] = {\n  ${body}\n};\nconst size_t kSpirvSize = ${size};\n}\n")
