//! winverbs.sys: the KMDF glue over `wv-core`. Compiled only for Windows targets.
//!
//! NOT BUILT HERE: nothing in this directory has been compiled on Windows yet.
#![cfg_attr(windows, no_std)]
