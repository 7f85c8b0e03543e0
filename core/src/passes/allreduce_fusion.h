// Gradient all-reduce buckets (allreduce_fusion.cpp): their size, which the
// strategy search's cost model prices too (parallel/cost_model.h).
#pragma once

namespace spora::passes {

// Bytes per bucket: SPORA_ALLREDUCE_BUCKET_MB (MiB; 0 turns fusion off),
// default 25 MiB. A value that is not a size is an error naming it.
double gradient_bucket_bytes();

}  // namespace spora::passes
