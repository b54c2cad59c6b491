//! What comes off the ring buffer: [`ring`] drains it on a thread of its own, [`decode`] turns its bytes into
//! the trace's events.

pub(crate) mod decode;
pub(crate) mod ring;
