// The one translation unit compiled to the plugin's SPIR-V module.
#include "elementwise.cl"
#include "reduce.cl"
#include "matmul.cl"
#include "softmax.cl"
#include "copy.cl"
#include "optim.cl"
