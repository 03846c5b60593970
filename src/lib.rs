//! Support shared by the workspace's examples and integration tests (not published).
#![allow(missing_docs)]
