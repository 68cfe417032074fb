//! The interpreter's fast paths: the math types whose programs run on an interpreter of
//! their own ([`FAST_PATHS`]), and which one a program takes.

use crate::ir::{Class, Program};

/// The math types with a fast path, in the order of their kernels in the kernel
/// tables (`kernel::NAMES`, after the general one).
pub const FAST_PATHS: [Class; 6] = [
    Class::F32,
    Class::F64,
    Class::I32,
    Class::I64,
    Class::U32,
    Class::U8,
];

/// Index of `p`'s fast path in [`FAST_PATHS`], if it has one.
pub(crate) fn fast_path(p: &Program) -> Option<usize> {
    FAST_PATHS.iter().position(|&c| c as u8 == p.fast)
}
