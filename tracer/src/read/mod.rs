//! The read wing: what is done with a trace once it is written.
//!
//! The live metrics too, which read the records as they are written. [`report`] (what a trace says, per process), [`export`] (Perfetto, CSV, dot,
//! Parquet), [`metrics`] (the `/metrics` endpoint), with [`classify`] (kernel families from names) and
//! [`phase`] (steps, sequences and phases; its step feeder is the one report, export and metrics share).
//! It reads [`crate::trace`] and [`crate::os`]; nothing here imports from `record`.

pub(crate) mod export;
pub(crate) mod metrics;
pub(crate) mod phase;
pub(crate) mod report;
pub(crate) mod top;
