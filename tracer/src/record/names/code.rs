//! Where a kernel's code lies: the file with the fat binary and the offload bundles of it that define
//! the kernel. A registered fat binary (`__hipRegisterFatBinary`) names its bundle; a kernel named from
//! its file (late attach) is looked up in the file's name index, built once (the finding is one
//! process's naming: `of/code.rs`).

/// Where a registered fat binary's code lies: the file as the process sees it, the bundle's offset in it
/// and its number ("0042"), when the file's fat binary holds one there.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FatBinaryCode {
    pub(crate) file: String,
    pub(crate) offset: u64,
    pub(crate) bundle: Option<String>,
}
