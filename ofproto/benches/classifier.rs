//! Classifier micro-benchmark (being written).
fn main() {}
