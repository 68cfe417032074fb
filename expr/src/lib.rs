//! Elementwise expressions as data.
//!
//! A [`Program`] is a small stack-machine program over up to [`MAX_INPUTS`] tensor inputs
//! and [`MAX_CONSTS`] constants (literals, and run-time scalars filled in at launch): each
//! input is loaded once and converted to its math type, the instructions run in those
//! types, and the result is rounded once to the output's element type. The program is a
//! plain `#[repr(C)]` value, so it can travel to a GPU kernel by value as a parameter; the
//! [`eval()`] interpreter is `no_std` and the same code runs in the CPU twin.
//!
//! | part | what |
//! |---|---|
//! | [`ir`] | the program format: [`Class`] (math types), [`Opcode`], [`Instr`], [`Program`] and its limits |
//! | [`value`] | element types into their math type and back (the `Cast` op's rules) |
//! | [`eval`](mod@eval) | the interpreter: `K` lanes at a time, one dispatch per instruction |
//! | [`kernel`] | the interpreter's GPU kernels, by layout |
//! | [`reduce`] | reductions of a program's values over axes, in one pass, in the library's order |
//!
//! Programs are built and checked by the host (`strided_apply::expr`): the stack depth of
//! every instruction, the math type of every value, the limits. The interpreter trusts a
//! checked program; an unchecked one cannot make it read or write out of bounds (every
//! index is masked), only compute garbage.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, stdarch_nvptx))]

pub mod eval;
pub mod ir;
pub mod kernel;
mod paths;
pub mod reduce;
pub mod t1lib;
pub mod value;

pub use eval::eval;
pub use ir::{Class, Instr, Opcode, Program, MAX_CONSTS, MAX_DEPTH, MAX_INPUTS, MAX_INSTRS};
