//! Shards (being written).
