//! Benchmarks (filled in later).
