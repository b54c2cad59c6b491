//! Naming for one process: the behaviour of [`super::Of`] for each source, one file each, above the data
//! that source keeps (`maps.rs` and `of/maps.rs`, `cuda.rs` and `of/cuda.rs`, ...). These files name the data
//! children and [`super::Names`], [`super::Of`]; neither names them back (a binding calls their methods).

mod code;
mod cuda;
mod elf_symbols;
mod finder;
mod maps;
mod rocr;
mod spirv;
