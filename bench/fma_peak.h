// Measures this machine's fp32 FMA peak (GFLOP/s) on all OpenMP threads:
// independent AVX-512 (or AVX2) FMA chains, enough of them to cover the
// latency, no memory traffic. The reference the matmul/conv figures are
// divided by.
#pragma once

double measure_fma_peak_gflops();
