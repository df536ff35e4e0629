//! Port I/O (placeholder, being written).
