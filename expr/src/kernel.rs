//! Tier 0 on the GPU: the interpreter's own kernels, one per layout variant of the
//! planner and per interpreter (the general one, and a fast one per numeric math type:
//! [`NAMES`]; tiled ones, [`TILED_NAMES`]; one for fast programs of more than four inputs,
//! [`WIDE_NAMES`]) — never per op, never per element type. A kernel takes the [`Program`] by
//! value, the element count, the jointly collapsed geometry of the output and up to
//! [`MAX_INPUTS`] inputs, and their addresses ([`Pointers`]); element types and sizes are
//! read from the program at run time, so one kernel serves every dtype combination.
//!
//! Kernels are named `expr_<class><group>_<variant>`: the interpreter's class (`g` the
//! general one, then `f d i l u b` for the fast paths of [`FAST_PATHS`]), the layout group
//! (`v` vectorised, `s` strided and tiled, `r` reduction groups), then the variant. The
//! image's family of a kernel is its name up to the last `_`, so each class and group is a
//! family of its own, decoded and loaded on its first launch: a process's first `f32`
//! expression over dense operands decodes the `expr_fv` family (the vectorised, cheap and
//! wide kernels), not the whole interpreter.
//!
//! Each block first stages the program in shared memory (thread 0 copies it word by word
//! from the parameter space at constant offsets; a parameter read at a run-time index, as
//! `instrs[pc]`, would copy the whole parameter into a stack frame), and a fast path's
//! kernel the dispatch word of each instruction
//! ([`fast_word`](crate::eval::fast_word)), computed once per block; then every thread runs
//! the grid-stride loop: load each input by its size and widen it to its math type, run
//! the interpreter the CPU twin runs ([`run`](crate::eval::run), or
//! [`run_fast`](crate::eval::run_fast) for the fast paths), and round the result once into
//! the output.
//!
//! # Safety (every kernel)
//! The host (`strided_apply::expr`) launches these kernels only with a program its
//! compiler checked, [`STAGED_BYTES`] of dynamic shared memory, one-dimensional blocks,
//! and the planner's invariants for the geometry: every offset of every operand for
//! `i < n` lies in that operand's buffer (of the program's element type), output offsets
//! are distinct, and an input that shares memory with the output does so only at the same
//! offsets.

use crate::ir::{Class, Opcode, Program, MAX_INPUTS, MAX_INSTRS};
use gpu_kernels::elem::ElemType;

/// Operands of one launch: the output, then the inputs.
pub const OPERANDS: usize = MAX_INPUTS + 1;

/// Bytes of a [`Program`].
pub const PROGRAM_BYTES: u32 = core::mem::size_of::<Program>() as u32;

/// Bytes of dynamic shared memory every interpreter launch provides for the staged program:
/// the program, then the fast path's dispatch word of each instruction.
pub const STAGED_BYTES: u32 = PROGRAM_BYTES + 4 * MAX_INSTRS as u32;

/// The kernel image's module name (the crate's package name).
pub const MODULE: &str = "strided-apply-expr";

/// The variants, as indices of [`NAMES`]: contiguous operands (every offset is the linear
/// index) for the general interpreter, and vectorised for the fast paths (below); one to
/// three collapsed dimensions; up to six; and up to [`MAX_DIMS`](gpu_kernels::MAX_DIMS).
/// All index in 32 bits; the host launches larger plans as 32-bit pieces.
///
/// The fast paths' kernels of the first row (`expr_*v_vec`) are **vectorised**: one or two
/// collapsed dimensions (`Geometry<u32, 2, OPERANDS>`, `ndim` 1 or 2), each thread taking
/// [`VECTOR_LANES`] consecutive elements along dimension 0 per dispatch, read and written
/// as one vector per operand. The 64-bit paths have none (two lanes measured slower than
/// their element-wise kernels): their entries are the general contiguous kernel's, which
/// runs every program, and the host does not take them. Their contract, beyond the
/// module's: two dimensions (`ndim`
/// is not read; a one-dimensional plan has `sizes[1] == 1`); the output's dimension-0
/// stride is 1; each input's is 0 (one element for all lanes) or 1; with `sizes[1] > 1`,
/// `sizes[0]` is a multiple of the lanes; every operand of stride 1 starts a vector at an
/// address aligned to `lanes × element size` (its base is, and with `sizes[1] > 1` its
/// dimension-1 stride is a multiple of the lanes). With `sizes[1] == 1` the last vector may
/// be partial (read and written element by element).
pub const CONTIG: usize = 0;
/// One dimension: a kernel of its own (one-dimension plans on the two-dimension kernels,
/// `ndim` read at run time, ran 1–7 % slower in f32 and f64 and 18 % in bf16).
pub const D1: usize = 1;
pub const D2: usize = 2;
pub const D3: usize = 3;
/// Up to [`D6_DIMS`] dimensions (`ndim` read at run time, every dimension unrolled).
pub const D6: usize = 4;
/// Any rank up to [`MAX_DIMS`](gpu_kernels::MAX_DIMS): the general interpreter only (a plan
/// of more than [`D6_DIMS`] collapsed dimensions is rare; its loops over the dimensions
/// stay rolled, and a fast program runs on the general interpreter, which runs every
/// program).
pub const DN: usize = 5;

/// The dimensions of the [`D6`] variant.
pub const D6_DIMS: usize = 6;

/// Kernel names by variant and interpreter: the general one (every program), and the fast
/// paths of programs of one numeric math type ([`Program::fast`]), in the order of
/// [`FAST_PATHS`]. The fast paths' kernels take programs of at most
/// [`FAST_LOADED`](crate::eval::FAST_LOADED) inputs; the host runs a fast program of more
/// on a wide kernel ([`WIDE_NAMES`]) where there is one for its layout, else on the
/// general one.
pub const NAMES: [[&str; 7]; 6] = [
    [
        "expr_gs_c",
        "expr_fv_vec",
        "expr_gs_c",
        "expr_iv_vec",
        "expr_gs_c",
        "expr_uv_vec",
        "expr_bv_vec",
    ],
    [
        "expr_gs_d1",
        "expr_fs_d1",
        "expr_ds_d1",
        "expr_is_d1",
        "expr_ls_d1",
        "expr_us_d1",
        "expr_bs_d1",
    ],
    [
        "expr_gs_d2",
        "expr_fs_d2",
        "expr_ds_d2",
        "expr_is_d2",
        "expr_ls_d2",
        "expr_us_d2",
        "expr_bs_d2",
    ],
    [
        "expr_gs_d3",
        "expr_fs_d3",
        "expr_ds_d3",
        "expr_is_d3",
        "expr_ls_d3",
        "expr_us_d3",
        "expr_bs_d3",
    ],
    [
        "expr_gs_d6",
        "expr_fs_d6",
        "expr_ds_d6",
        "expr_is_d6",
        "expr_ls_d6",
        "expr_us_d6",
        "expr_bs_d6",
    ],
    ["expr_gs_dn"; 7],
];

/// The math types with a fast path, in the order of their kernels in [`NAMES`] (after the
/// general one).
pub const FAST_PATHS: [Class; 6] = [
    Class::F32,
    Class::F64,
    Class::I32,
    Class::I64,
    Class::U32,
    Class::U8,
];

/// Elements per thread and dispatch of the vectorised kernels, by fast path (the order of
/// [`FAST_PATHS`]): one 16-byte vector of 4-byte elements; 8 lanes for `u8` math, whose
/// elements are mostly single bytes; none for 64-bit math (two lanes, one vector of 8-byte
/// elements, measured 1-4 % slower than the element-wise kernels: `benches/NOTES.md`).
pub const VECTOR_LANES: [Option<usize>; 6] = [Some(4), None, Some(4), None, Some(4), Some(8)];

/// Index of `p`'s fast path in [`FAST_PATHS`], if it has one.
pub(crate) fn fast_path(p: &Program) -> Option<usize> {
    FAST_PATHS.iter().position(|&c| c as u8 == p.fast)
}

/// The general interpreter's kernels with the extended ops
/// ([`is_extended`](crate::eval::is_extended)): contiguous operands and any rank (a family of
/// its own, `expr_gx`, decoded on the first such program). The host runs such programs on
/// these two only: their ops cost far more than the rolled loop over the dimensions, and
/// each kernel holds every class's long functions (0.24 MB of sm_90 code).
pub const EXT_NAMES: [&str; 2] = ["expr_gx_c", "expr_gx_dn"];

/// Whether `p` holds an extended op or reads or writes `u64` (it runs on [`EXT_NAMES`]
/// where it runs on the general interpreter).
pub fn is_ext(p: &Program) -> bool {
    let u64_code = crate::ir::elem_code(ElemType::U64);
    p.code().iter().any(|&i| crate::eval::is_extended(i))
        || p.result == Class::U64 as u8
        || Some(p.out) == u64_code
        || p.inputs[..(p.n_inputs as usize).min(MAX_INPUTS)]
            .iter()
            .any(|&c| Some(c) == u64_code)
}

/// The kernel of `variant` that runs program `p`. A program with extended ops ([`is_ext`])
/// has the contiguous and the any-rank kernel only ([`EXT_NAMES`]): its launches take
/// [`CONTIG`] or [`DN`] (the host's contract), and any other variant names the any-rank
/// one.
pub fn name(variant: usize, p: &Program) -> &'static str {
    match fast_path(p) {
        Some(i) => NAMES[variant % NAMES.len()][i + 1],
        None if is_ext(p) => EXT_NAMES[(variant != CONTIG) as usize],
        None => NAMES[variant % NAMES.len()][0],
    }
}

/// The lanes of `p`'s vectorised kernel; `None` for a program without one (off the fast
/// paths, or of 64-bit math).
pub fn vector_lanes(p: &Program) -> Option<usize> {
    fast_path(p).and_then(|i| VECTOR_LANES[i])
}

/// Whether `p` runs on a fast path's kernels ([`FAST_PATHS`]).
pub fn is_fast(p: &Program) -> bool {
    fast_path(p).is_some()
}

/// The wide kernels, by fast path (the order of [`FAST_PATHS`]): fast programs of more
/// than [`FAST_LOADED`](crate::eval::FAST_LOADED) inputs, the first that many loaded before
/// the program runs and the others by their load instruction (in the math type's own
/// element type, [`fast_class`](crate::eval::fast_class)). Broadcast-invariant hoisting
/// makes such programs: the seed expression over a row, a column and a full input reads
/// five. `expr_fv_wide` (`f32` math) has the vectorised contract ([`CONTIG`]), and takes
/// programs whose operands are all of the math type's element type (no conversions: a
/// smaller kernel). Other math types
/// have none, and their wide programs run on the general interpreter: an `f64` kernel of
/// two dimensions (94 registers against `expr_ds_d2`'s 70) ran the hoisted seed expression
/// slower than `expr_ds_d2` the unhoisted one (592 against 636 GB/s, H100). Loads by the
/// load instruction in every fast kernel cost each of them registers and instructions
/// (`a + b` 1.5 %, the seed expression 5 % on `expr_fv_vec`): a kernel of its own.
pub const WIDE_NAMES: [Option<&str>; 6] = [Some("expr_fv_wide"), None, None, None, None, None];

/// The cheap kernels, by fast path (the order of [`FAST_PATHS`]): fast programs of at most
/// [`CHEAP_INPUTS`] inputs whose every op is cheap ([`is_cheap`](crate::eval::is_cheap)),
/// with the vectorised kernels' contract at [`CHEAP_LANES`] lanes: a dispatch without the
/// transcendental and division arms keeps twice the lanes at 3 blocks of 256 threads per
/// SM (78 registers on sm_90, against `expr_fv_vec`'s 56 at 4 lanes). `u8` math at 16 lanes
/// took 137 registers: none.
pub const CHEAP_NAMES: [Option<&str>; 6] = [Some("expr_fv_cheap"), None, None, None, None, None];

/// Inputs of the programs the cheap kernels take (each loaded before the program runs).
pub const CHEAP_INPUTS: usize = 3;

/// Lanes of the cheap kernels, by fast path.
pub const CHEAP_LANES: [Option<usize>; 6] = [Some(8), None, None, None, None, None];

/// The cheap kernel of `p` and its lanes, where it has one: a fast program of at most
/// [`CHEAP_INPUTS`] inputs, every op cheap.
pub fn cheap_kernel(p: &Program) -> Option<(&'static str, usize)> {
    let i =
        fast_path(p).filter(|_| p.n_inputs as usize <= CHEAP_INPUTS && crate::eval::is_cheap(p))?;
    Some((CHEAP_NAMES[i]?, CHEAP_LANES[i]?))
}

/// `p`'s wide kernel: a fast program of more than
/// [`FAST_LOADED`](crate::eval::FAST_LOADED) inputs with one ([`WIDE_NAMES`]), every
/// operand of its math type's own element type.
pub fn wide_name(p: &Program) -> Option<&'static str> {
    let i = fast_path(p).filter(|_| p.n_inputs as usize > crate::eval::FAST_LOADED)?;
    let own = crate::ir::elem_code(FAST_PATHS[i].elem());
    let inputs = p.inputs.get(..p.n_inputs as usize)?;
    (Some(p.out) == own && inputs.iter().all(|&e| Some(e) == own))
        .then_some(WIDE_NAMES[i])
        .flatten()
}

/// The tiled kernels (`expr_*s_tile`, the fast paths only, in the order of [`FAST_PATHS`]): tiles
/// of `TILE × TILE` elements of axes 0 × 1, the output's unit-stride axis and a staged
/// input's. The inputs marked in `TileArg::staged` (bit `k`: input `k`) are read through
/// shared memory, consecutive threads along axis 1, and the tile is computed and stored
/// with consecutive threads along axis 0; the others are read in place. Parameters
/// `(program, tiles, TileArg, Geometry<u32, 5, OPERANDS>, pointers)`: axes `[0, 1, batch…]`
/// (unused axes of size 1), block `k` taking tiles `k, k + grid, …` below `tiles`. Their
/// contract, beyond the module's: blocks of `32 × TILE / lanes` threads ([`tile_lanes`]),
/// [`tile_shared_bytes`] of dynamic shared memory, `tiles` the product of the tile counts
/// and the batch sizes, below 2^31.
pub const TILED_NAMES: [&str; 6] = [
    "expr_fs_tile",
    "expr_ds_tile",
    "expr_is_tile",
    "expr_ls_tile",
    "expr_us_tile",
    "expr_bs_tile",
];

/// Elements of a tile's side.
pub const TILE: u32 = 32;

/// Elements per thread and dispatch of the tiled kernels, by fast path: rows of the tile
/// (two for 8-byte math, whose values take two registers each).
pub const TILE_LANES: [usize; 6] = [4, 2, 4, 2, 4, 4];

/// Bytes of a staged value, by fast path: the raw bits as loaded, 8 bytes for 8-byte math.
const TILE_RAW_BYTES: [u32; 6] = [4, 8, 4, 8, 4, 4];

/// Inputs of a program of the tiled kernels: each may be staged, and the stages of four
/// are a block's shared memory.
pub const TILED_INPUTS: usize = 4;

/// The fast path of `p` if its inputs fit the tiled kernels ([`TILED_INPUTS`]).
fn tiled_path(p: &Program) -> Option<usize> {
    fast_path(p).filter(|_| p.n_inputs as usize <= TILED_INPUTS)
}

/// `p`'s tiled kernel, `None` off the fast paths or over [`TILED_INPUTS`].
pub fn tiled_name(p: &Program) -> Option<&'static str> {
    tiled_path(p).map(|i| TILED_NAMES[i])
}

/// The lanes of `p`'s tiled kernel ([`TILE_LANES`]).
pub fn tile_lanes(p: &Program) -> Option<usize> {
    tiled_path(p).map(|i| TILE_LANES[i])
}

/// Dynamic shared memory of `p`'s tiled kernel: the staged program, then a stage of
/// `TILE × (TILE + 1)` values per input (the padding column keeps the transposed reads free
/// of bank conflicts).
pub fn tile_shared_bytes(p: &Program) -> Option<u32> {
    tiled_path(p)
        .map(|i| STAGED_BYTES + TILED_INPUTS as u32 * TILE * (TILE + 1) * TILE_RAW_BYTES[i])
}

/// The one-op kernels (`expr_<class>o_k<lanes>`), by fast path (the order of
/// [`FAST_PATHS`]) and lanes: programs of a single op ([`one_op`]) with the vectorised
/// kernels' contract ([`CONTIG`]), one vector of `lanes` elements per thread (the widest
/// operand's 16 bytes) and no loop. The op is dispatched once per thread, not once per
/// instruction and element: the kernel holds only the loads, the op's lanes and the store,
/// so it keeps the registers, and so the threads per SM, of a specialised kernel. They need
/// no staged program (no shared memory).
pub const ONE_NAMES: [&[(usize, &str)]; 6] = [
    &[(4, "expr_fo_k4"), (8, "expr_fo_k8")],
    &[(2, "expr_do_k2")],
    &[(4, "expr_io_k4"), (8, "expr_io_k8"), (16, "expr_io_k16")],
    &[(2, "expr_lo_k2")],
    &[(4, "expr_uo_k4")],
    &[(16, "expr_bo_k16")],
];

/// Whether [`ONE_NAMES`] lists `name` for fast path `i` and `lanes` (the kernels' own
/// check of the list).
pub const fn one_listed(i: usize, lanes: usize, name: &str) -> bool {
    let list = ONE_NAMES[i];
    let mut j = 0;
    while j < list.len() {
        let (k, n) = list[j];
        if k == lanes && n.len() == name.len() {
            let (a, b) = (n.as_bytes(), name.as_bytes());
            let mut c = 0;
            while c < a.len() && a[c] == b[c] {
                c += 1;
            }
            if c == a.len() {
                return true;
            }
        }
        j += 1;
    }
    false
}

/// The ops of the one-op kernels: the cheap ops and division.
pub const ONE_OPS: [Opcode; 11] = [
    Opcode::Neg,
    Opcode::Abs,
    Opcode::Relu,
    Opcode::Add,
    Opcode::Sub,
    Opcode::Mul,
    Opcode::Div,
    Opcode::Min,
    Opcode::Max,
    Opcode::Fma,
    Opcode::Clamp,
];

/// Operands of a one-op program: at most three.
pub const ONE_OPERANDS: usize = 3;

/// The op of `p` if it is a one-op program: a fast program whose code is its operands,
/// then one op of [`ONE_OPS`] applied to them, operand `q` being input `q` for `q` below
/// the input count and a constant of index below [`ONE_OPERANDS`] after them (`a + b`,
/// `a * 2`, `clamp(a, 0, 6)`, `fma(a, b, c)`, `relu(a)`; not `2 * a` or `a + a`, which run
/// on the interpreter). A copy, the program `a` (a whole program hoisted, `positive`), is
/// one too: its op is `Load`, the identity.
pub fn one_op(p: &Program) -> Option<Opcode> {
    fast_path(p)?;
    let code = p.code();
    if let [i] = code {
        let copy = i.op == Opcode::Load as u8 && i.arg == 0 && p.n_inputs == 1;
        return copy.then_some(Opcode::Load);
    }
    let (last, operands) = code.split_last()?;
    let op = Opcode::from_code(last.op).filter(|o| ONE_OPS.contains(o))?;
    let n_in = p.n_inputs as usize;
    let fits = operands.len() == op.arity()
        && (1..=operands.len()).contains(&n_in)
        && operands.iter().enumerate().all(|(q, i)| {
            if q < n_in {
                i.op == Opcode::Load as u8 && i.arg as usize == q
            } else {
                i.op == Opcode::Const as u8 && (i.arg as usize) < ONE_OPERANDS
            }
        });
    fits.then_some(op)
}

/// `p`'s one-op kernel and its lanes: for a one-op program ([`one_op`]) whose operands (the
/// inputs and the output) are all of one element type, with a kernel of `16 / size` lanes.
pub fn one_kernel(p: &Program) -> Option<(&'static str, usize)> {
    let i = one_path(p)?;
    let lanes = 16 / crate::value::elem_of(p.out).size();
    ONE_NAMES[i]
        .iter()
        .find(|&&(k, _)| k == lanes)
        .map(|&(k, name)| (name, k))
}

/// The fast path of a one-op program ([`one_op`]) whose operands (inputs and output) are
/// all of one element type: the one-op kernels' programs (each arm of their dispatch is
/// one element type's loads, op and store).
fn one_path(p: &Program) -> Option<usize> {
    one_op(p)?;
    let i = fast_path(p)?;
    let n_in = p.n_inputs as usize;
    let e = crate::ir::elem_of_code(p.out)?;
    (one_elem(FAST_PATHS[i], e) && p.inputs[..n_in].iter().all(|&x| x == p.out)).then_some(i)
}

/// Whether the one-op kernels of math type `class` take operands of element type `e`: the
/// type's own, the 16-bit floats for `f32` math and `i8`, `i16`, `u16` for `i32` math (the
/// kernels hold an arm for these only).
pub const fn one_elem(class: Class, e: ElemType) -> bool {
    let own = class.elem() as u8 == e as u8;
    own || (matches!(class, Class::F32) && matches!(e, ElemType::F16 | ElemType::BF16))
        || (matches!(class, Class::I32)
            && matches!(e, ElemType::I8 | ElemType::I16 | ElemType::U16))
}

/// The tiled one-op kernels (`expr_<class>o_tile`) and their lanes, by fast path: the tiled
/// kernels' layout and contract ([`TILED_NAMES`]) for the programs of the one-op kernels,
/// with `lanes` rows of the tile per thread (blocks of `32 × TILE / lanes` threads). Eight
/// where the interpreter's tiled kernel takes four: the one-op kernel holds 48 registers at
/// four and 70 at eight, and the second loads twice the values per thread: measured on an
/// H100, f32 `a + bᵀ` went from 0.91–0.94 of the specialised kernel to 1.00–1.01
/// (`benches/NOTES.md`).
pub const ONE_TILED: [Option<(&str, usize)>; 6] =
    [Some(("expr_fo_tile", 8)), None, None, None, None, None];

/// `p`'s tiled one-op kernel and its lanes, where it has one ([`ONE_TILED`]).
pub fn one_tiled_kernel(p: &Program) -> Option<(&'static str, usize)> {
    ONE_TILED[one_path(p)?]
}

/// Device addresses of the operands, the output first; unused entries are 0 and never read.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pointers(pub [u64; OPERANDS]);

const _: () = assert!(
    PROGRAM_BYTES.is_multiple_of(8) && STAGED_BYTES.is_multiple_of(8) && STAGED_BYTES <= 48 * 1024
);

#[cfg(target_arch = "nvptx64")]
mod device {
    use super::{Pointers, CHEAP_INPUTS, ONE_OPERANDS, OPERANDS, PROGRAM_BYTES, STAGED_BYTES};
    use crate::eval::{fast_word, run_in, run_ops, Eval, FAST_INPUTS, FAST_LOADED};
    use crate::ir::{Class, Instr, Opcode, Program, MAX_INPUTS, MAX_INSTRS};
    use crate::reduce::{self, input_bases, load_bits, store_bits, Walk};
    use crate::value::{elem_of, narrow, narrow_in, narrow_own, widen, widen_own, Math};
    use core::arch::nvptx;
    use gpu_kernels::device::{
        block_rows_and_grid, ld_shared_u32, shared_base, shared_base32, st_shared_u32,
        sync_threads, sync_warp, thread_range, tile_thread, WARP,
    };
    use gpu_kernels::elem::ElemType;
    use gpu_kernels::geometry::{Geometry, Index};
    use gpu_kernels::reduce::{Reduce, FINAL_BLOCK, MAX_GROUPS, SLOT_BITS};
    use gpu_kernels::{TileArg, MAX_DIMS};

    /// `$body` once for each constant `$k` of `0..8`, so arrays indexed by `$k` are read at
    /// constant offsets (parameters) or kept in registers (values).
    macro_rules! each_input {
        (|$k:ident| $body:block) => {
            each_input!(@ $k, $body, 0 1 2 3 4 5 6 7)
        };
        (@ $k:ident, $body:block, $($n:literal)*) => {
            $( { const $k: usize = $n; $body } )*
        };
    }
    const _: () = assert!(MAX_INPUTS == 8);

    /// `$body` once for each constant `$k` of `0..FAST_LOADED`.
    macro_rules! each_fast_input {
        (|$k:ident| $body:block) => {
            each_input!(@ $k, $body, 0 1 2 3)
        };
    }
    const _: () = assert!(FAST_LOADED == 4 && super::TILED_INPUTS == FAST_LOADED);

    /// `$f(w)` for each constant `w` of `0..100`.
    macro_rules! hundred {
        ($f:ident) => { hundred!(@hi $f, 0 1 2 3 4 5 6 7 8 9) };
        (@hi $f:ident, $($h:literal)*) => { $( hundred!(@lo $f, $h, 0 1 2 3 4 5 6 7 8 9); )* };
        (@lo $f:ident, $h:literal, $($l:literal)*) => { $( $f($h * 10 + $l); )* };
    }

    /// Copies the program into this block's shared memory, and with `words` (a fast path's
    /// kernel) the dispatch word of each instruction after it ([`word`]); returns the
    /// program's shared address.
    ///
    /// # Safety
    /// The launch provides [`STAGED_BYTES`] of dynamic shared memory, and every thread of
    /// the block calls this once, with the same `words`, before any other shared-memory
    /// access.
    #[inline(always)]
    unsafe fn stage(p: &Program, words: bool) -> u32 {
        let base = shared_base32();
        if tile_thread().0 == 0 {
            const WORDS: usize = PROGRAM_BYTES as usize / 4;
            // SAFETY: `Program` is `repr(C)`, 400 bytes of plain integers, 4-byte aligned.
            let words = unsafe { &*(p as *const Program as *const [u32; WORDS]) };
            // Word `w` of the parameter at a constant offset (a loop would index the
            // parameter at run time, which copies it whole into a stack frame).
            let copy = |w: usize| {
                if w < WORDS {
                    // SAFETY: below PROGRAM_BYTES of the launch's shared memory, aligned.
                    unsafe { st_shared_u32(base + 4 * w as u32, words[w]) };
                }
            };
            const _: () = assert!(WORDS <= 100);
            hundred!(copy);
        }
        sync_threads();
        if words {
            // SAFETY: reading special registers has no preconditions.
            let (tid, threads) = unsafe { (nvptx::_thread_idx_x(), nvptx::_block_dim_x()) };
            let mut pc = tid as usize;
            while pc < MAX_INSTRS {
                // SAFETY: below STAGED_BYTES, aligned; the program is staged.
                unsafe {
                    st_shared_u32(
                        base + PROGRAM_BYTES + 4 * pc as u32,
                        fast_word(fetch(base, pc)),
                    )
                };
                pc += threads as usize;
            }
            sync_threads();
        }
        base
    }

    /// The fast path's dispatch word of instruction `pc` ([`fast_word`]), as staged.
    #[inline(always)]
    fn word(base: u32, pc: usize) -> u32 {
        // SAFETY: `pc < MAX_INSTRS` (the interpreter's bound), inside the staged words.
        unsafe { ld_shared_u32(base + PROGRAM_BYTES + 4 * pc as u32) }
    }

    /// Instruction `pc` of the staged program.
    #[inline(always)]
    fn fetch(base: u32, pc: usize) -> Instr {
        // SAFETY: `pc < MAX_INSTRS` (the interpreter's bound), inside the staged program.
        let w = unsafe { ld_shared_u32(base + 4 * pc as u32) };
        let b = w.to_le_bytes();
        Instr {
            op: b[0],
            class: b[1],
            depth: b[2],
            arg: b[3],
        }
    }

    /// Constant `c` of the staged program.
    #[inline(always)]
    fn konst(base: u32, c: usize) -> u64 {
        const CONSTS: u32 = core::mem::offset_of!(Program, consts) as u32;
        let at = base + CONSTS + 8 * c as u32;
        // SAFETY: `c < MAX_CONSTS` (the interpreter masks it), inside the staged program.
        let (lo, hi) = unsafe { (ld_shared_u32(at), ld_shared_u32(at + 4)) };
        lo as u64 | (hi as u64) << 32
    }

    /// `$body` for each `$d` below `D` and `$ndim`: unrolled by hand (a constant `$d`) for
    /// up to [`UNROLLED`] dimensions, so the geometry is read at constant parameter offsets
    /// whatever `ndim` is (a loop that the compiler leaves rolled indexes the parameter at
    /// run time, which copies it whole into a stack frame); a loop for the general kernel of
    /// every rank ([`DN`](super::DN)).
    macro_rules! each_dim {
        ($ndim:expr, |$d:ident| $body:block) => {
            if D <= UNROLLED {
                each_dim!(@ $ndim, $d, $body, 0 1 2 3 4 5)
            } else {
                let mut dd = 0;
                while dd < D && dd < $ndim {
                    #[allow(non_snake_case)]
                    let $d: usize = dd;
                    $body
                    dd += 1;
                }
            }
        };
        (@ $ndim:expr, $d:ident, $body:block, $($n:literal)*) => {{
            $( if $n < D && $n < $ndim { const $d: usize = $n; $body } )*
        }};
    }
    const UNROLLED: usize = super::D6_DIMS;
    const _: () = assert!(UNROLLED == 6);

    /// The multi-index of linear index `i` over the collapsed sizes (`ndim` in use).
    #[inline(always)]
    #[allow(unused_assignments)] // the outermost dimension's quotient
    fn coords_of<const D: usize>(
        g: &Geometry<u32, D, OPERANDS>,
        mut i: u32,
        ndim: usize,
    ) -> [u32; D] {
        let mut c = [0u32; D];
        each_dim!(ndim, |DD| {
            c[DD] = if DD + 1 == ndim {
                i
            } else {
                let size = g.sizes[DD];
                // SAFETY: the planner's invariant: every size in use is at least 1.
                unsafe { core::hint::assert_unchecked(size != 0) };
                let (q, r) = i.divmod(size);
                i = q;
                r
            };
        });
        c
    }

    /// Operand `k`'s element offset at multi-index `c`. Called with a constant `k`, so the
    /// geometry is read at constant offsets.
    #[inline(always)]
    fn offset_at<const D: usize>(
        g: &Geometry<u32, D, OPERANDS>,
        c: &[u32; D],
        ndim: usize,
        k: usize,
    ) -> isize {
        let mut off = 0u32;
        each_dim!(ndim, |DD| {
            off = off.wrapping_add(c[DD].wrapping_mul(g.strides[k][DD]));
        });
        off.signed()
    }

    /// The fast path: a program of one numeric math type `T` ([`run_fast`](crate::eval::run_fast)), `K` elements per
    /// dispatch — indices `i, i + step, …, i + (K - 1) step` of the grid-stride loop, so every
    /// lane's loads and stores stay coalesced across the warp.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn fast<T: Eval, R: Raw, const K: usize, const D: usize>(
        p: &Program,
        base: u32,
        n: u32,
        g: &Geometry<u32, D, OPERANDS>,
        ptrs: &Pointers,
        ndim: usize,
        first: u32,
        step: u32,
    ) {
        let n_in = p.n_inputs as usize;
        let out = elem_of(p.out);
        let ins: [ElemType; MAX_INPUTS] = core::array::from_fn(|k| elem_of(p.inputs[k]));
        // Element sizes once, before the loop (a size is a table lookup, a global load: in
        // the loop it delays every input's load).
        let size: [usize; FAST_LOADED] = core::array::from_fn(|k| ins[k].size());
        let out_size = out.size();
        let n = n as u64;
        let mut i = first as u64;
        while i < n {
            let idx: [u64; K] = core::array::from_fn(|j| i + j as u64 * step as u64);
            // Every input up front (guards in sequence, each with a constant input index:
            // exclusive arms of one `match` on the index would be merged by the compiler
            // into one arm indexing the parameters at run time, a stack frame); every load
            // of every input first, then the conversions, so the loads are all in flight
            // at once.
            let live: [bool; K] = core::array::from_fn(|j| idx[j] < n);
            // One multi-index per lane, shared by every operand (`ndim == 0`: contiguous,
            // every offset is the index).
            let coords: [[u32; D]; K] = core::array::from_fn(|j| coords_of(g, idx[j] as u32, ndim));
            let offset = |k: usize, j: usize| {
                if ndim == 0 {
                    idx[j] as isize
                } else {
                    offset_at(g, &coords[j], ndim, k)
                }
            };
            let mut raw = [[R::default(); K]; FAST_LOADED];
            each_fast_input!(|KK| {
                if KK < n_in {
                    let offs: [isize; K] = core::array::from_fn(|j| offset(KK + 1, j));
                    // SAFETY: input KK's offsets for the live lanes (module contract).
                    raw[KK] = unsafe { load_lanes(ptrs.0[KK + 1], &offs, &live, size[KK]) };
                }
            });
            // At most FAST_LOADED inputs (the contract at `NAMES`): none past them.
            let none = |_| [R::default(); K];
            let bits = interpret::<T, R, K, false, FAST_LOADED, false, false>(
                p, base, &ins, &raw, none, out,
            );
            let offs: [isize; K] = core::array::from_fn(|j| offset(0, j));
            // SAFETY: the output's offsets for the live lanes (module contract).
            unsafe { store_lanes(ptrs.0[0], &offs, &live, out_size, &bits) };
            i += K as u64 * step as u64;
        }
    }

    /// A fast program on `K` lanes of raw input bits (`raw[k]`: input `k`'s, of element
    /// type `ins[k]`, for the first [`FAST_LOADED`]; `more(k)` for the others, called by
    /// their load instruction): widened to `T`, interpreted, each result rounded once to
    /// `out`. A wide kernel (`INPUTS` past `FAST_LOADED`) takes every operand in `T`'s own
    /// element type ([`WIDE_NAMES`](super::WIDE_NAMES)): no conversion.
    /// `EVERY`: the widening and rounding branch to an arm of a constant type for every
    /// element type (the tiled kernels: 56 registers against 72 with a run-time fallback
    /// arm); else for the float types only (the other kernels: the seed expression ran 6 %
    /// slower on `expr_fv_vec` with every arm).
    #[inline(always)]
    fn interpret<
        T: Eval,
        R: Raw,
        const K: usize,
        const EVERY: bool,
        const INPUTS: usize,
        const OWN: bool,
        const CHEAP: bool,
    >(
        p: &Program,
        base: u32,
        ins: &[ElemType; MAX_INPUTS],
        raw: &[[R; K]; FAST_LOADED],
        more: impl Fn(usize) -> [R; K],
        out: ElemType,
    ) -> [u64; K] {
        let n_in = p.n_inputs as usize;
        let mut x = [[T::dec(0); K]; FAST_LOADED];
        each_fast_input!(|KK| {
            if KK < n_in && KK < INPUTS {
                x[KK] = if OWN {
                    raw[KK].map(|v| T::dec(v.bits()))
                } else {
                    widen_lanes::<T, R, K, EVERY>(ins[KK], &raw[KK])
                };
            }
        });
        let input = |k: usize| {
            if k < FAST_LOADED {
                x[k]
            } else {
                more(k).map(|v| T::dec(v.bits()))
            }
        };
        // The words' address as an induction variable of its own: derived from the block's
        // shared-memory base in every iteration, ptxas re-read that base (`S2UR`) per
        // interpreted instruction (`run_ops` calls `word` once per instruction, in order).
        let mut at = base + PROGRAM_BYTES;
        let r = run_ops::<T, K, INPUTS, CHEAP>(
            p.len as usize,
            |_| {
                // SAFETY: the staged words; `run_ops` reads at most `MAX_INSTRS` of them.
                let w = unsafe { ld_shared_u32(at) };
                at += 4;
                w
            },
            |c| konst(base, c),
            input,
        );
        if OWN {
            r.map(|v| v.enc())
        } else {
            narrow_lanes::<T, K, EVERY>(&r, out)
        }
    }

    /// Sixteen bytes, for 16-byte vector loads and stores.
    #[repr(C, align(16))]
    #[derive(Clone, Copy)]
    struct V4([u32; 4]);

    /// The `B` bytes at `p` (a power of two, at most 64, `p` aligned to `min(B, 16)`), as
    /// little-endian words; the words past them are 0.
    #[inline(always)]
    unsafe fn load_words<const B: usize>(p: *const u8) -> [u32; 16] {
        let mut w = [0u32; 16];
        // SAFETY (every arm): the caller's `B` readable, aligned bytes.
        unsafe {
            match B {
                1 => w[0] = *p as u32,
                2 => w[0] = *(p as *const u16) as u32,
                4 => w[0] = *(p as *const u32),
                8 => {
                    let v = *(p as *const u64);
                    w[0] = v as u32;
                    w[1] = (v >> 32) as u32;
                }
                _ => {
                    // Unrolled by hand: a loop LLVM keeps rolled indexes `w` at run time
                    // (a stack frame).
                    let q = p as *const V4;
                    macro_rules! part {
                        ($($c:literal)*) => {$(
                            if $c < B / 16 {
                                let v = *q.add($c);
                                w[4 * $c..4 * $c + 4].copy_from_slice(&v.0);
                            }
                        )*};
                    }
                    part!(0 1 2 3);
                }
            }
        }
        w
    }

    /// Stores the first `B` bytes of `w` at `p` (as [`load_words`]).
    #[inline(always)]
    unsafe fn store_words<const B: usize>(p: *mut u8, w: &[u32; 16]) {
        // SAFETY (every arm): the caller's `B` writable, aligned bytes.
        unsafe {
            match B {
                1 => *p = w[0] as u8,
                2 => *(p as *mut u16) = w[0] as u16,
                4 => *(p as *mut u32) = w[0],
                8 => *(p as *mut u64) = w[0] as u64 | (w[1] as u64) << 32,
                _ => {
                    let q = p as *mut V4;
                    macro_rules! part {
                        ($($c:literal)*) => {$(
                            if $c < B / 16 {
                                *q.add($c) =
                                    V4([w[4 * $c], w[4 * $c + 1], w[4 * $c + 2], w[4 * $c + 3]]);
                            }
                        )*};
                    }
                    part!(0 1 2 3);
                }
            }
        }
    }

    /// `K` consecutive `S`-byte elements at `base + off * S` (aligned to `K * S`), one
    /// vector load, zero-extended.
    #[inline(always)]
    unsafe fn load_vec<R: Raw, const K: usize, const S: usize>(base: u64, off: isize) -> [R; K] {
        let p = (base as *const u8).wrapping_offset(off * S as isize);
        // SAFETY: the caller's aligned vector in the operand's buffer.
        let w = unsafe {
            match K * S {
                1 => load_words::<1>(p),
                2 => load_words::<2>(p),
                4 => load_words::<4>(p),
                8 => load_words::<8>(p),
                16 => load_words::<16>(p),
                32 => load_words::<32>(p),
                _ => load_words::<64>(p),
            }
        };
        core::array::from_fn(|j| {
            let at = j * S;
            let word = w[at / 4] as u64;
            R::from_u64(match S {
                1 => (word >> (8 * (at % 4))) & 0xff,
                2 => (word >> (8 * (at % 4))) & 0xffff,
                4 => word,
                _ => word | (w[at / 4 + 1] as u64) << 32,
            })
        })
    }

    /// Stores the low `S` bytes of each of `bits` as `K` consecutive elements at `base +
    /// off * S` (aligned to `K * S`), one vector store.
    #[inline(always)]
    unsafe fn store_vec<const K: usize, const S: usize>(base: u64, off: isize, bits: &[u64; K]) {
        let mut w = [0u32; 16];
        let mut j = 0;
        while j < K {
            let at = j * S;
            match S {
                1 => w[at / 4] |= ((bits[j] & 0xff) as u32) << (8 * (at % 4)),
                2 => w[at / 4] |= ((bits[j] & 0xffff) as u32) << (8 * (at % 4)),
                4 => w[at / 4] = bits[j] as u32,
                _ => {
                    w[at / 4] = bits[j] as u32;
                    w[at / 4 + 1] = (bits[j] >> 32) as u32;
                }
            }
            j += 1;
        }
        let p = (base as *mut u8).wrapping_offset(off * S as isize);
        // SAFETY: the caller's aligned vector in the output's buffer.
        unsafe {
            match K * S {
                1 => store_words::<1>(p, &w),
                2 => store_words::<2>(p, &w),
                4 => store_words::<4>(p, &w),
                8 => store_words::<8>(p, &w),
                16 => store_words::<16>(p, &w),
                32 => store_words::<32>(p, &w),
                _ => store_words::<64>(p, &w),
            }
        }
    }

    /// One input's `K` lanes from element offset `off`: a vector (`unit`, `full`), one
    /// element for every lane (not `unit`: stride 0), or the live lanes one by one (the
    /// partial last vector).
    #[inline(always)]
    unsafe fn load_input<R: Raw, const K: usize>(
        base: u64,
        off: isize,
        size: usize,
        unit: bool,
        full: bool,
        live: &[bool; K],
    ) -> [R; K] {
        macro_rules! by_size {
            ($s:literal) => {
                if !unit {
                    // SAFETY (all three): the vectorised contract; `off` is in the buffer.
                    let x = R::from_u64(unsafe { load_bits(base, off, $s) });
                    [x; K]
                } else if full {
                    unsafe { load_vec::<R, K, $s>(base, off) }
                } else {
                    let offs: [isize; K] = core::array::from_fn(|j| off + j as isize);
                    unsafe { load_lanes(base, &offs, live, $s) }
                }
            };
        }
        match size {
            1 => by_size!(1),
            2 => by_size!(2),
            4 => by_size!(4),
            _ => by_size!(8),
        }
    }

    /// The vectorised kernels' loop (the contract at [`CONTIG`](super::CONTIG)): `K` lanes
    /// `i .. i + K` along dimension 0 per dispatch, one multi-index per vector.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn vector<
        T: Eval,
        R: Raw,
        const K: usize,
        const INPUTS: usize,
        const OWN: bool,
        const CHEAP: bool,
    >(
        p: &Program,
        base: u32,
        n: u32,
        g: &Geometry<u32, 2, OPERANDS>,
        ptrs: &Pointers,
        first: u32,
        step: u32,
    ) {
        let n_in = p.n_inputs as usize;
        let out = elem_of(p.out);
        let ins: [ElemType; MAX_INPUTS] = core::array::from_fn(|k| elem_of(p.inputs[k]));
        // Two dimensions always (a one-dimensional plan has `sizes[1] == 1`), so the
        // geometry is read at constant offsets.
        let ndim = 2;
        let flat = g.sizes[1] == 1;
        // Element sizes and strides once, before the loop (a size is a table lookup, a
        // global load: in the loop it delays every input's load).
        // `OWN` (the wide kernel): every operand of `T`'s own element type.
        let size: [usize; FAST_LOADED] = core::array::from_fn(|k| {
            if OWN {
                core::mem::size_of::<T>()
            } else {
                ins[k].size()
            }
        });
        let unit: [bool; FAST_LOADED] = core::array::from_fn(|k| g.strides[k + 1][0] == 1);
        let out_size = if OWN {
            core::mem::size_of::<T>()
        } else {
            out.size()
        };
        let vectors = n.div_ceil(K as u32);
        let mut v = first;
        while v < vectors {
            let i = v * K as u32;
            let full = n - i >= K as u32;
            let live: [bool; K] = core::array::from_fn(|j| (j as u32) < n - i);
            // No division for one dimension.
            let c = if flat { [i, 0] } else { coords_of(g, i, ndim) };
            let mut raw = [[R::default(); K]; FAST_LOADED];
            each_fast_input!(|KK| {
                if KK < n_in && KK < INPUTS {
                    let off = offset_at(g, &c, ndim, KK + 1);
                    // SAFETY: the vectorised contract for input KK.
                    raw[KK] =
                        unsafe { load_input(ptrs.0[KK + 1], off, size[KK], unit[KK], full, &live) };
                }
            });
            // A wide kernel's inputs past the first four: loaded by their load instruction,
            // in `T`'s own element type (`fast_class`). Others take at most FAST_LOADED
            // inputs (`NAMES`).
            let more = |k: usize| -> [R; K] {
                if INPUTS <= FAST_LOADED {
                    return [R::default(); K];
                }
                let off = offset_at(g, &c, ndim, k + 1);
                let unit = g.strides[k + 1][0] == 1;
                let size = core::mem::size_of::<T>();
                // SAFETY: the vectorised contract for input k.
                unsafe { load_input(ptrs.0[k + 1], off, size, unit, full, &live) }
            };
            // The cheap kernels take every element type's widening and rounding as an arm
            // of its own (`EVERY`): their run-time-type fallback over twice the lanes is a
            // loop LLVM leaves rolled, in a stack frame.
            let bits =
                interpret::<T, R, K, CHEAP, INPUTS, OWN, CHEAP>(p, base, &ins, &raw, more, out);
            let off = offset_at(g, &c, ndim, 0);
            macro_rules! store {
                ($s:literal) => {
                    if full {
                        // SAFETY: the output's aligned vector (the vectorised contract).
                        unsafe { store_vec::<K, $s>(ptrs.0[0], off, &bits) }
                    } else {
                        let offs: [isize; K] = core::array::from_fn(|j| off + j as isize);
                        // SAFETY: the live lanes' offsets are the output's.
                        unsafe { store_lanes(ptrs.0[0], &offs, &live, $s, &bits) }
                    }
                };
            }
            match out_size {
                1 => store!(1),
                2 => store!(2),
                4 => store!(4),
                _ => store!(8),
            }
            v = v.wadd(step);
        }
    }

    /// Raw element bits as loaded: `u32` for programs of 4-byte and narrower inputs,
    /// `u64` otherwise (half the registers for the first).
    trait Raw: Copy + Default {
        fn from_u64(v: u64) -> Self;
        fn bits(self) -> u64;
    }
    impl Raw for u32 {
        #[inline(always)]
        fn from_u64(v: u64) -> Self {
            v as u32
        }
        #[inline(always)]
        fn bits(self) -> u64 {
            self as u64
        }
    }
    impl Raw for u64 {
        #[inline(always)]
        fn from_u64(v: u64) -> Self {
            v
        }
        #[inline(always)]
        fn bits(self) -> u64 {
            self
        }
    }

    /// The live lanes' elements of `size` bytes at `base + offs[j] * size`, zero-extended:
    /// one branch on the size, then every load.
    #[inline(always)]
    unsafe fn load_lanes<R: Raw, const K: usize>(
        base: u64,
        offs: &[isize; K],
        live: &[bool; K],
        size: usize,
    ) -> [R; K] {
        macro_rules! lanes {
            ($t:ty) => {
                core::array::from_fn(|j| {
                    if live[j] {
                        // SAFETY: the caller's offsets of live lanes are in the buffer.
                        R::from_u64(unsafe { *(base as *const $t).offset(offs[j]) } as u64)
                    } else {
                        R::default()
                    }
                })
            };
        }
        match size {
            1 => lanes!(u8),
            2 => lanes!(u16),
            4 => lanes!(u32),
            _ => lanes!(u64),
        }
    }

    /// Stores the live lanes' low `size` bytes at `base + offs[j] * size`.
    #[inline(always)]
    unsafe fn store_lanes<const K: usize>(
        base: u64,
        offs: &[isize; K],
        live: &[bool; K],
        size: usize,
        bits: &[u64; K],
    ) {
        macro_rules! lanes {
            ($t:ty) => {{
                let mut j = 0;
                while j < K {
                    if live[j] {
                        // SAFETY: the caller's offsets of live lanes are in the buffer.
                        unsafe { *(base as *mut $t).offset(offs[j]) = bits[j] as $t };
                    }
                    j += 1;
                }
            }};
        }
        match size {
            1 => lanes!(u8),
            2 => lanes!(u16),
            4 => lanes!(u32),
            _ => lanes!(u64),
        }
    }

    /// `$lanes!(t)` for element type `$e`, with `t` a constant in each arm. `$every`: an arm
    /// for every element type (`$none` for a code that is none); else the float types' arms
    /// and `$own!(t)` of a run-time type for the others, which are of the math type itself
    /// there ([`fast_class`](crate::eval::fast_class)). [`widen_lanes`] and
    /// [`narrow_lanes`].
    macro_rules! by_elem {
        ($e:expr, $every:expr, $lanes:ident, $own:ident, $none:expr) => {
            if !$every {
                match $e {
                    ElemType::F32 => $lanes!(ElemType::F32),
                    ElemType::F64 => $lanes!(ElemType::F64),
                    ElemType::F16 => $lanes!(ElemType::F16),
                    ElemType::BF16 => $lanes!(ElemType::BF16),
                    other => $own!(other),
                }
            } else {
                match $e {
                    ElemType::F32 => $lanes!(ElemType::F32),
                    ElemType::F64 => $lanes!(ElemType::F64),
                    ElemType::F16 => $lanes!(ElemType::F16),
                    ElemType::BF16 => $lanes!(ElemType::BF16),
                    ElemType::I32 => $lanes!(ElemType::I32),
                    ElemType::I64 => $lanes!(ElemType::I64),
                    ElemType::U32 => $lanes!(ElemType::U32),
                    ElemType::U8 => $lanes!(ElemType::U8),
                    ElemType::Bool => $lanes!(ElemType::Bool),
                    ElemType::I8 => $lanes!(ElemType::I8),
                    ElemType::I16 => $lanes!(ElemType::I16),
                    ElemType::U16 => $lanes!(ElemType::U16),
                    ElemType::U64 => $lanes!(ElemType::U64),
                    ElemType::F8E4M3 => $lanes!(ElemType::F8E4M3),
                    ElemType::F8E5M2 => $lanes!(ElemType::F8E5M2),
                    // No program element type (`elem_of` gives one of the above).
                    _ => $none,
                }
            }
        };
    }

    /// Elements of type `e` widened to `T` ([`widen`]), one branch on the type (every arm
    /// a constant type: a fallback arm of a run-time type keeps its lanes in a loop over a
    /// stack frame).
    #[inline(always)]
    fn widen_lanes<T: Math, R: Raw, const K: usize, const EVERY: bool>(
        e: ElemType,
        bits: &[R; K],
    ) -> [T; K] {
        macro_rules! lanes {
            ($e:expr) => {
                core::array::from_fn(|j| T::dec(widen($e, bits[j].bits())))
            };
        }
        // The fast kernels' run-time arm: a type of `T`'s math type (`fast_class`).
        macro_rules! own {
            ($e:expr) => {
                core::array::from_fn(|j| T::dec(widen_own(T::CLASS, $e, bits[j].bits())))
            };
        }
        by_elem!(e, EVERY, lanes, own, [T::dec(0); K])
    }

    /// Values of `T` rounded once to the output type `e` ([`narrow`]), one branch on it.
    #[inline(always)]
    fn narrow_lanes<T: Math, const K: usize, const EVERY: bool>(
        v: &[T; K],
        e: ElemType,
    ) -> [u64; K] {
        macro_rules! lanes {
            ($e:expr) => {
                core::array::from_fn(|j| narrow(T::CLASS, v[j].enc(), $e))
            };
        }
        macro_rules! own {
            ($e:expr) => {
                core::array::from_fn(|j| narrow_own(T::CLASS, v[j].enc(), $e))
            };
        }
        by_elem!(e, EVERY, lanes, own, [0; K])
    }

    /// The grid-stride loop of every variant; `ndim == 0` is the contiguous one.
    #[inline(always)]
    unsafe fn body<const D: usize>(
        path: Path,
        p: &Program,
        n: u32,
        g: &Geometry<u32, D, OPERANDS>,
        ptrs: &Pointers,
        ndim: usize,
    ) {
        // SAFETY: the module contract's shared memory; called once by every thread.
        let general = matches!(path, Path::General | Path::GeneralExt);
        let base = unsafe { stage(p, !general) };
        let (first, step) = thread_range::<u32>();
        // SAFETY (both): forwarded; the host launches a fast kernel only for a program of
        // its math type (`Program::fast`).
        macro_rules! fast {
            ($t:ty, $r:ty, $k:literal) => {
                return unsafe { fast::<$t, $r, $k, D>(p, base, n, g, ptrs, ndim, first, step) }
            };
        }
        match path {
            Path::F32 => fast!(f32, u32, 4),
            Path::F64 => fast!(f64, u64, 2),
            Path::I32 => fast!(i32, u32, 4),
            Path::I64 => fast!(i64, u64, 2),
            Path::U32 => fast!(u32, u32, 4),
            Path::U8 => fast!(u8, u32, 4),
            Path::General | Path::GeneralExt => {}
        }
        let ext = matches!(path, Path::GeneralExt);
        let len = p.len as usize;
        let n_in = p.n_inputs as usize;
        let out = elem_of(p.out);
        let result = Class::from_code(p.result).unwrap_or(Class::F32);
        let ins: [ElemType; MAX_INPUTS] = core::array::from_fn(|k| elem_of(p.inputs[k]));
        let mut i = first;
        while i < n {
            let off: [isize; OPERANDS] = if ndim == 0 {
                [i as isize; OPERANDS]
            } else {
                let c = coords_of(g, i, ndim);
                let mut off = [0isize; OPERANDS];
                each_input!(|K| {
                    if K < n_in {
                        off[K + 1] = offset_at(g, &c, ndim, K + 1);
                    }
                });
                off[0] = offset_at(g, &c, ndim, 0);
                off
            };
            // Every load first, then every conversion: a conversion between two loads
            // would wait for the first load before the second is issued.
            let mut x = [[0u64; 1]; MAX_INPUTS];
            each_input!(|K| {
                if K < n_in {
                    // SAFETY: input K's offset for `i < n` (module contract).
                    x[K] = [unsafe { load_bits(ptrs.0[K + 1], off[K + 1], ins[K].size()) }];
                }
            });
            each_input!(|K| {
                if K < n_in {
                    x[K] = [widen(ins[K], x[K][0])];
                }
            });
            let (fetch, konst) = (|pc| fetch(base, pc), |c| konst(base, c));
            let v = if ext {
                run_in::<1, true>(len, fetch, konst, &x)
            } else {
                run_in::<1, false>(len, fetch, konst, &x)
            };
            // SAFETY: the output's offset for `i < n` (module contract).
            let bits = if ext {
                narrow(result, v[0], out)
            } else {
                narrow_in::<false>(result, v[0], out)
            };
            unsafe { store_bits(ptrs.0[0], off[0], out.size(), bits) };
            i = i.wadd(step);
        }
    }

    /// Which interpreter a kernel runs: each is its own kernel, so the fast paths' register
    /// counts (and so the threads an SM holds) are their own, not the general path's.
    #[derive(Clone, Copy)]
    enum Path {
        General,
        /// The general interpreter with the extended ops ([`is_extended`](crate::eval::is_extended)).
        GeneralExt,
        F32,
        F64,
        I32,
        I64,
        U32,
        U8,
    }

    /// A vectorised kernel's whole body (the vectorised, wide and cheap kernels): the
    /// program staged into shared memory, then [`vector`] over this thread's vectors.
    ///
    /// # Safety
    /// The module contract and the vectorised one, for a program that the kernel's
    /// parameters (`T`, `INPUTS`, `OWN`, `CHEAP`) serve; called once by every thread.
    #[inline(always)]
    unsafe fn staged_vector<
        T: Eval,
        R: Raw,
        const K: usize,
        const INPUTS: usize,
        const OWN: bool,
        const CHEAP: bool,
    >(
        p: &Program,
        n: u32,
        g: &Geometry<u32, 2, OPERANDS>,
        ptrs: &Pointers,
    ) {
        // SAFETY: the module contract's shared memory; called once by every thread.
        let base = unsafe { stage(p, true) };
        let (first, step) = thread_range::<u32>();
        // SAFETY: forwarded.
        unsafe { vector::<T, R, K, INPUTS, OWN, CHEAP>(p, base, n, g, ptrs, first, step) }
    }

    /// The vectorised kernels' body: the fast path `path`'s interpreter over
    /// [`VECTOR_LANES`](super::VECTOR_LANES) lanes.
    #[inline(always)]
    unsafe fn vectorised(
        path: Path,
        p: &Program,
        n: u32,
        g: &Geometry<u32, 2, OPERANDS>,
        ptrs: &Pointers,
    ) {
        macro_rules! go {
            ($t:ty, $r:ty, $i:literal, $class:ident) => {{
                const K: usize = match super::VECTOR_LANES[$i] {
                    Some(k) => k,
                    None => panic!("a fast path without a vectorised kernel"),
                };
                const _: () = assert!(matches!(super::FAST_PATHS[$i], Class::$class));
                // SAFETY: forwarded; the host launches it only for a program of this path.
                unsafe { staged_vector::<$t, $r, K, FAST_LOADED, false, false>(p, n, g, ptrs) }
            }};
        }
        match path {
            Path::F32 => go!(f32, u32, 0, F32),
            Path::I32 => go!(i32, u32, 2, I32),
            Path::U32 => go!(u32, u32, 4, U32),
            Path::U8 => go!(u8, u32, 5, U8),
            Path::General | Path::GeneralExt | Path::F64 | Path::I64 => {}
        }
    }

    macro_rules! entry {
        ($($name:literal $d:tt $ndim:tt;)*) => {$(
            entry!(@one $name, "gs", General, $d, $ndim);
            entry!(@one $name, "fs", F32, $d, $ndim);
            entry!(@one $name, "ds", F64, $d, $ndim);
            entry!(@one $name, "is", I32, $d, $ndim);
            entry!(@one $name, "ls", I64, $d, $ndim);
            entry!(@one $name, "us", U32, $d, $ndim);
            entry!(@one $name, "bs", U8, $d, $ndim);
        )*};
        (@one $name:literal, $class:literal, $path:ident, $d:tt, $ndim:tt) => {
            const _: () = {
                #[export_name = concat!("expr_", $class, "_", $name)]
                #[allow(improper_ctypes_definitions)]
                unsafe extern "ptx-kernel" fn entry(
                    p: Program,
                    n: u32,
                    g: Geometry<u32, $d, OPERANDS>,
                    ptrs: Pointers,
                ) {
                    let ndim = entry!(@ndim g $ndim);
                    // SAFETY: the module contract.
                    unsafe { body::<$d>(Path::$path, &p, n, &g, &ptrs, ndim) }
                }
            };
        };
        (@ndim $g:ident (fixed $n:literal)) => { $n };
        (@ndim $g:ident run) => { $g.ndim as usize };
    }

    /// The vectorised kernels, `expr_<class>v_vec`.
    macro_rules! vectorised {
        ($($suffix:literal $path:ident;)*) => {$(
            const _: () = {
                #[export_name = concat!("expr_", $suffix, "v_vec")]
                #[allow(improper_ctypes_definitions)]
                unsafe extern "ptx-kernel" fn entry(
                    p: Program,
                    n: u32,
                    g: Geometry<u32, 2, OPERANDS>,
                    ptrs: Pointers,
                ) {
                    // SAFETY: the module contract and the vectorised one.
                    unsafe { vectorised(Path::$path, &p, n, &g, &ptrs) }
                }
            };
        )*};
    }

    #[export_name = "expr_gs_c"]
    #[allow(improper_ctypes_definitions)]
    unsafe extern "ptx-kernel" fn contiguous(
        p: Program,
        n: u32,
        g: Geometry<u32, 1, OPERANDS>,
        ptrs: Pointers,
    ) {
        // SAFETY: the module contract; every offset is the linear index.
        unsafe { body::<1>(Path::General, &p, n, &g, &ptrs, 0) }
    }

    #[export_name = "expr_gx_c"]
    #[allow(improper_ctypes_definitions)]
    unsafe extern "ptx-kernel" fn contiguous_ext(
        p: Program,
        n: u32,
        g: Geometry<u32, 1, OPERANDS>,
        ptrs: Pointers,
    ) {
        // SAFETY: the module contract; every offset is the linear index.
        unsafe { body::<1>(Path::GeneralExt, &p, n, &g, &ptrs, 0) }
    }

    vectorised! {
        "f" F32;
        "i" I32;
        "u" U32;
        "b" U8;
    }

    /// `expr_fv_wide`: the vectorised kernel of `f32` math for wide programs (the contract at
    /// [`WIDE_NAMES`](super::WIDE_NAMES)).
    #[export_name = "expr_fv_wide"]
    #[allow(improper_ctypes_definitions)]
    unsafe extern "ptx-kernel" fn wide_f32(
        p: Program,
        n: u32,
        g: Geometry<u32, 2, OPERANDS>,
        ptrs: Pointers,
    ) {
        const _: () = assert!(matches!(super::FAST_PATHS[0], Class::F32));
        const K: usize = match super::VECTOR_LANES[0] {
            Some(k) => k,
            None => panic!("f32 has a vectorised kernel"),
        };
        // SAFETY: the module contract and the vectorised one; the host launches it only for
        // a wide program of `f32` math.
        unsafe { staged_vector::<f32, u32, K, FAST_INPUTS, true, false>(&p, n, &g, &ptrs) }
    }

    /// The cheap kernels ([`CHEAP_NAMES`](super::CHEAP_NAMES), and their contract): the
    /// vectorised layout, twice the lanes, the dispatch of the cheap ops only.
    macro_rules! cheap {
        ($($name:literal $t:ty, $i:literal, $class:ident;)*) => {$(
            const _: () = {
                #[export_name = $name]
                #[allow(improper_ctypes_definitions)]
                unsafe extern "ptx-kernel" fn entry(
                    p: Program,
                    n: u32,
                    g: Geometry<u32, 2, OPERANDS>,
                    ptrs: Pointers,
                ) {
                    const _: () = assert!(matches!(super::FAST_PATHS[$i], Class::$class));
                    const K: usize = match super::CHEAP_LANES[$i] {
                        Some(k) => k,
                        None => panic!("a fast path without a cheap kernel"),
                    };
                    // SAFETY: the module contract and the vectorised one; the host launches
                    // it only for a cheap program of this path.
                    unsafe {
                        staged_vector::<$t, u32, K, CHEAP_INPUTS, false, true>(&p, n, &g, &ptrs)
                    }
                }
            };
        )*};
    }

    cheap! {
        "expr_fv_cheap" f32, 0, F32;
    }

    /// The program code of element type `e` ([`ELEMS`](crate::ir::ELEMS)), at compile time.
    const fn code_of(e: ElemType) -> u8 {
        let mut i = 0;
        while i < crate::ir::ELEMS.len() {
            if crate::ir::ELEMS[i] as u8 == e as u8 {
                return i as u8;
            }
            i += 1;
        }
        u8::MAX
    }

    /// `$arm!(e, size)` for the element type of program code `$code`, `e` and its size
    /// constants in each arm (codes of [`ELEMS`](crate::ir::ELEMS), matched without a table
    /// load); `$none` for a code that is none.
    macro_rules! by_code {
        ($code:expr, $arm:ident, $none:expr) => {{
            match $code {
                c if c == code_of(ElemType::F32) => $arm!(ElemType::F32, 4),
                c if c == code_of(ElemType::BF16) => $arm!(ElemType::BF16, 2),
                c if c == code_of(ElemType::F16) => $arm!(ElemType::F16, 2),
                c if c == code_of(ElemType::U8) => $arm!(ElemType::U8, 1),
                c if c == code_of(ElemType::I32) => $arm!(ElemType::I32, 4),
                c if c == code_of(ElemType::U32) => $arm!(ElemType::U32, 4),
                c if c == code_of(ElemType::F64) => $arm!(ElemType::F64, 8),
                c if c == code_of(ElemType::I64) => $arm!(ElemType::I64, 8),
                c if c == code_of(ElemType::Bool) => $arm!(ElemType::Bool, 1),
                c if c == code_of(ElemType::I8) => $arm!(ElemType::I8, 1),
                c if c == code_of(ElemType::I16) => $arm!(ElemType::I16, 2),
                c if c == code_of(ElemType::U16) => $arm!(ElemType::U16, 2),
                _ => $none,
            }
        }};
    }

    /// `$body` once for each constant `$j` of `0..16`, the lanes of a 16-byte vector (a loop
    /// over lanes that LLVM leaves rolled indexes the lane arrays at run time: a stack
    /// frame).
    macro_rules! each_lane {
        (|$j:ident| $body:block) => {
            each_lane!(@ $j, $body, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)
        };
        (@ $j:ident, $body:block, $($n:literal)*) => {
            $( { const $j: usize = $n; $body } )*
        };
    }

    /// Lane `j` of a vector of `S`-byte elements held as little-endian words.
    #[inline(always)]
    fn lane<const S: usize>(w: &[u32; 4], j: usize) -> u64 {
        match S {
            1 => ((w[j / 4] >> (8 * (j % 4))) & 0xff) as u64,
            2 => ((w[j / 2] >> (16 * (j % 2))) & 0xffff) as u64,
            4 => w[j] as u64,
            _ => w[2 * j] as u64 | (w[2 * j + 1] as u64) << 32,
        }
    }

    /// Sets lane `j` (zero before) of a vector of `S`-byte elements held as words to the
    /// low `S` bytes of `bits`.
    #[inline(always)]
    fn set_lane<const S: usize>(w: &mut [u32; 4], j: usize, bits: u64) {
        match S {
            1 => w[j / 4] |= ((bits & 0xff) as u32) << (8 * (j % 4)),
            2 => w[j / 2] |= ((bits & 0xffff) as u32) << (16 * (j % 2)),
            4 => w[j] = bits as u32,
            _ => {
                w[2 * j] = bits as u32;
                w[2 * j + 1] = (bits >> 32) as u32;
            }
        }
    }

    /// One operand's 16 bytes (`16 / S` elements of `S` bytes) from element offset `off` of
    /// `base`, as words: one vector where `unit` and `full`; one element in every lane where
    /// not `unit` (stride 0); the live lanes one by one otherwise (a partial last vector).
    /// The lanes stay packed until the op's arm unpacks them.
    ///
    /// # Safety
    /// The vectorised contract for this operand at `off`.
    #[inline(always)]
    unsafe fn load_packed<const S: usize>(
        base: u64,
        off: isize,
        unit: bool,
        full: bool,
        n_live: u32,
    ) -> [u32; 4] {
        let mut w = [0u32; 4];
        if unit && full {
            // SAFETY: the caller's aligned 16-byte vector.
            let v =
                unsafe { load_words::<16>((base as *const u8).wrapping_offset(off * S as isize)) };
            w.copy_from_slice(&v[..4]);
        } else if !unit {
            // SAFETY: the caller's element at `off`.
            let x = unsafe { load_bits(base, off, S) };
            each_lane!(|J| {
                if J < 16 / S {
                    set_lane::<S>(&mut w, J, x);
                }
            });
        } else {
            each_lane!(|J| {
                if J < 16 / S && (J as u32) < n_live {
                    // SAFETY: a live lane's element (the caller's contract).
                    let x = unsafe { load_bits(base, off + J as isize, S) };
                    set_lane::<S>(&mut w, J, x);
                }
            });
        }
        w
    }

    /// A one-op program's op code, read at constant offsets of the parameter (a run-time
    /// index would copy it whole into a stack frame). Guards in sequence: exclusive arms
    /// that differ in a constant index are merged by LLVM into one read at a run-time index.
    #[inline(always)]
    fn one_code(p: &Program) -> u8 {
        let operands = (p.len as usize).wrapping_sub(1);
        let mut op = p.instrs[3].op;
        if operands == 0 {
            op = p.instrs[0].op;
        }
        if operands == 1 {
            op = p.instrs[1].op;
        }
        if operands == 2 {
            op = p.instrs[2].op;
        }
        op
    }

    /// A one-op program's constant operands in `T` (operand `q` past the inputs; 0
    /// elsewhere), read as [`one_code`] reads the op.
    #[inline(always)]
    fn one_consts<T: Math>(p: &Program) -> [T; ONE_OPERANDS] {
        let n_in = p.n_inputs as usize;
        let operands = (p.len as usize).wrapping_sub(1);
        let konst = |q: usize| {
            let arg = p.instrs[q].arg;
            let mut bits = p.consts[2];
            if arg == 0 {
                bits = p.consts[0];
            }
            if arg == 1 {
                bits = p.consts[1];
            }
            T::dec(bits)
        };
        core::array::from_fn(|q| {
            if q >= n_in && q < operands {
                konst(q)
            } else {
                T::dec(0)
            }
        })
    }

    /// A one-op kernel's body ([`ONE_NAMES`](super::ONE_NAMES)): this thread's vector of `K`
    /// lanes, every operand of one element type ([`one_kernel`](super::one_kernel)) of
    /// `16 / K` bytes: the inputs loaded as packed 16-byte vectors, constants taken from
    /// the program, the op dispatched once (each arm unpacks, widens, computes, rounds and
    /// packs its lanes: no lane array crosses a branch), one vector stored.
    ///
    /// # Safety
    /// The module contract without the shared memory, and the vectorised contract for `K`
    /// lanes; `p` is a one-op program ([`one_op`](super::one_op)) of `T`'s math type whose
    /// operands are all of one element type of `16 / K` bytes.
    #[inline(always)]
    unsafe fn one<T: Eval, const K: usize>(
        p: &Program,
        n: u32,
        g: &Geometry<u32, 2, OPERANDS>,
        ptrs: &Pointers,
    ) {
        let (v, _) = thread_range::<u32>();
        if v >= n.div_ceil(K as u32) {
            return;
        }
        let i = v * K as u32;
        let n_live = n - i;
        let c = if g.sizes[1] == 1 {
            [i, 0]
        } else {
            coords_of(g, i, 2)
        };
        let op = one_code(p);
        macro_rules! body {
            ($e:expr, $s:literal) => {
                if K * $s == 16 && super::one_elem(T::CLASS, $e) {
                    let k = one_consts::<T>(p);
                    // SAFETY (every arm): forwarded; every operand is of element type `$e`,
                    // and the program has the inputs the arm names.
                    if $s >= 4 {
                        unsafe { one_typed::<T, K, $s, 0>($e, p, g, ptrs, c, n_live, &k, op) }
                    } else {
                        // Lanes narrower than a register: the input count as a constant, so
                        // no lane selects between an input and a constant (registers).
                        match p.n_inputs {
                            1 => unsafe {
                                one_typed::<T, K, $s, 1>($e, p, g, ptrs, c, n_live, &k, op)
                            },
                            2 => unsafe {
                                one_typed::<T, K, $s, 2>($e, p, g, ptrs, c, n_live, &k, op)
                            },
                            _ => unsafe {
                                one_typed::<T, K, $s, 3>($e, p, g, ptrs, c, n_live, &k, op)
                            },
                        }
                    }
                }
            };
        }
        by_code!(p.out, body, ())
    }

    /// [`one`] for operands of element type `e` of `S` bytes (a constant in each call), of
    /// `N` inputs (`N == 0`: the program's count, read at run time).
    ///
    /// # Safety
    /// As [`one`]; `k[q]` is operand `q`'s value where it is a constant; `N` is 0 or the
    /// program's input count.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn one_typed<T: Eval, const K: usize, const S: usize, const N: usize>(
        e: ElemType,
        p: &Program,
        g: &Geometry<u32, 2, OPERANDS>,
        ptrs: &Pointers,
        c: [u32; 2],
        n_live: u32,
        k: &[T; ONE_OPERANDS],
        op: u8,
    ) {
        let n_in = if N == 0 { p.n_inputs as usize } else { N };
        let full = n_live >= K as u32;
        let mut w = [[0u32; 4]; ONE_OPERANDS];
        macro_rules! operand {
            ($($q:literal)*) => {$(
                if $q < n_in {
                    let off = offset_at(g, &c, 2, $q + 1);
                    let unit = g.strides[$q + 1][0] == 1;
                    // SAFETY: the vectorised contract for input $q.
                    w[$q] = unsafe { load_packed::<S>(ptrs.0[$q + 1], off, unit, full, n_live) };
                }
            )*};
        }
        operand!(0 1 2);
        // Operand q of lane j in T: input q's lane, or the constant.
        let x = |q: usize, j: usize| {
            if q < n_in {
                T::dec(widen(e, lane::<S>(&w[q], j)))
            } else {
                k[q]
            }
        };
        macro_rules! ops {
            ($($name:ident $arity:tt),*) => {
                match Opcode::from_code(op) {
                    $(Some(Opcode::$name) => ops!(@ $name $arity),)*
                    _ => return,
                }
            };
            (@ $name:ident $arity:tt) => {{
                if N > $arity {
                    // More inputs than operands: no such one-op program (`one_op`).
                    return;
                }
                let mut r = [0u32; 4];
                each_lane!(|J| {
                    if J < K {
                        let y = ops!(@@ $name $arity J);
                        set_lane::<S>(&mut r, J, narrow(T::CLASS, y.enc(), e));
                    }
                });
                r
            }};
            // The copy: input 0 as it is.
            (@@ Load 1 $j:ident) => {
                x(0, $j)
            };
            (@@ $name:ident 1 $j:ident) => {
                T::unary(Opcode::$name, x(0, $j))
            };
            (@@ $name:ident 2 $j:ident) => {
                T::binary(Opcode::$name, x(0, $j), x(1, $j))
            };
            (@@ $name:ident 3 $j:ident) => {
                T::ternary(Opcode::$name, x(0, $j), x(1, $j), x(2, $j))
            };
        }
        let r = ops!(
            Load 1, Neg 1, Abs 1, Relu 1, Add 2, Sub 2, Mul 2, Div 2, Min 2, Max 2, Fma 3, Clamp 3
        );
        let off = offset_at(g, &c, 2, 0);
        if full {
            let mut words = [0u32; 16];
            words[..4].copy_from_slice(&r);
            let out = (ptrs.0[0] as *mut u8).wrapping_offset(off * S as isize);
            // SAFETY: the output's aligned 16-byte vector (the vectorised contract).
            unsafe { store_words::<16>(out, &words) };
        } else {
            each_lane!(|J| {
                if J < K && (J as u32) < n_live {
                    // SAFETY: a live lane's element of the output.
                    unsafe { store_bits(ptrs.0[0], off + J as isize, S, lane::<S>(&r, J)) };
                }
            });
        }
    }

    /// The one-op kernels, `expr_<class>o_k<lanes>` ([`ONE_NAMES`](super::ONE_NAMES)).
    macro_rules! one_kernels {
        ($($name:literal $t:ty, $i:literal, $k:literal;)*) => {$(
            const _: () = {
                #[export_name = $name]
                #[allow(improper_ctypes_definitions)]
                unsafe extern "ptx-kernel" fn entry(
                    p: Program,
                    n: u32,
                    g: Geometry<u32, 2, OPERANDS>,
                    ptrs: Pointers,
                ) {
                    const _: () = assert!(super::one_listed($i, $k, $name));
                    // SAFETY: the module contract and the vectorised one; the host launches
                    // it only for a one-op program of this path and lanes.
                    unsafe { one::<$t, $k>(&p, n, &g, &ptrs) }
                }
            };
        )*};
    }

    one_kernels! {
        "expr_fo_k4" f32, 0, 4;
        "expr_fo_k8" f32, 0, 8;
        "expr_do_k2" f64, 1, 2;
        "expr_io_k4" i32, 2, 4;
        "expr_io_k8" i32, 2, 8;
        "expr_io_k16" i32, 2, 16;
        "expr_lo_k2" i64, 3, 2;
        "expr_uo_k4" u32, 4, 4;
        "expr_bo_k16" u8, 5, 16;
    }

    entry! {
        "d1" 1 (fixed 1);
        "d2" 2 (fixed 2);
        "d3" 3 (fixed 3);
        "d6" { super::D6_DIMS } run;
    }

    /// Stores `v` (its low 4 bytes, or 8 for `R = u64`) at shared address `at`.
    ///
    /// # Safety
    /// `at` is inside the launch's shared memory, aligned to `size_of::<R>()`.
    #[inline(always)]
    unsafe fn st_raw<R: Raw>(at: u32, v: u64) {
        // SAFETY: the caller's.
        unsafe {
            st_shared_u32(at, v as u32);
            if core::mem::size_of::<R>() == 8 {
                st_shared_u32(at + 4, (v >> 32) as u32);
            }
        }
    }

    /// The value [`st_raw`] stored at `at`.
    ///
    /// # Safety
    /// As [`st_raw`].
    #[inline(always)]
    unsafe fn ld_raw<R: Raw>(at: u32) -> R {
        // SAFETY: the caller's.
        unsafe {
            let lo = ld_shared_u32(at) as u64;
            R::from_u64(if core::mem::size_of::<R>() == 8 {
                lo | (ld_shared_u32(at + 4) as u64) << 32
            } else {
                lo
            })
        }
    }

    /// Tile `b`'s origin along axes 0 and 1 and its batch index along axes 2–4 (the tiled
    /// kernels' order: axis 0 fastest).
    #[inline(always)]
    fn tile_origin(t: &TileArg, b: u32) -> (u32, u32, [u32; 3]) {
        let (r, x) = t.tiles_x.divmod(b);
        let (r, y) = t.tiles_y.divmod(r);
        let (r, c2) = t.batch[0].divmod(r);
        let (c4, c3) = t.batch[1].divmod(r);
        (x * super::TILE, y * super::TILE, [c2, c3, c4])
    }

    /// Operand `k`'s offsets of `K` lanes: element `(i, j)` of batch element `batch`, then
    /// steps of `(di, dj)` (32-bit wrapping, as the planner proved every offset in 32 bits).
    #[inline(always)]
    fn tile_lanes<const K: usize>(
        g: &Geometry<u32, 5, OPERANDS>,
        k: usize,
        (i, j): (u32, u32),
        batch: &[u32; 3],
        (di, dj): (u32, u32),
    ) -> [isize; K] {
        let s = &g.strides[k];
        let o = i
            .wrapping_mul(s[0])
            .wrapping_add(j.wrapping_mul(s[1]))
            .wrapping_add(batch[0].wrapping_mul(s[2]))
            .wrapping_add(batch[1].wrapping_mul(s[3]))
            .wrapping_add(batch[2].wrapping_mul(s[4]));
        let step = di.wrapping_mul(s[0]).wrapping_add(dj.wrapping_mul(s[1]));
        core::array::from_fn(|l| o.wrapping_add(step.wrapping_mul(l as u32)).signed())
    }

    /// The tiled kernels' loop (the contract at [`TILED_NAMES`](super::TILED_NAMES)): `K`
    /// rows of the tile per thread and dispatch.
    #[inline(always)]
    unsafe fn tiled<T: Eval, R: Raw, const K: usize>(
        p: &Program,
        tiles: u32,
        t: &TileArg,
        g: &Geometry<u32, 5, OPERANDS>,
        ptrs: &Pointers,
    ) {
        // SAFETY: the contract's shared memory; called once by every thread.
        let base = unsafe { stage(p, true) };
        let n_in = p.n_inputs as usize;
        let out = elem_of(p.out);
        let ins: [ElemType; MAX_INPUTS] = core::array::from_fn(|k| elem_of(p.inputs[k]));
        let size: [usize; FAST_LOADED] = core::array::from_fn(|k| ins[k].size());
        let out_size = out.size();
        const TILE: u32 = super::TILE;
        let rows = TILE / K as u32;
        let raw_bytes = core::mem::size_of::<R>() as u32;
        // Input k's stage: TILE rows (axis-0 index in the tile) of TILE + 1 values.
        let stage_of = |k: usize| base + STAGED_BYTES + k as u32 * TILE * (TILE + 1) * raw_bytes;
        let staged = |k: usize| t.staged >> k & 1 != 0;
        let (tx, ty, first) = tile_thread();
        let (_, grid) = block_rows_and_grid();
        let (n0, n1) = (g.sizes[0], g.sizes[1]);
        let mut b = first;
        while b < tiles {
            let (x0, y0, batch) = tile_origin(t, b);
            // A whole tile inside the plan: every lane live, no bounds to check.
            let full = x0 + TILE <= n0 && y0 + TILE <= n1;
            // Operand k's offsets of K lanes: element (x0 + i, y0 + j) of this tile's batch,
            // then steps of (di, dj) (32-bit wrapping, as the planner proved every offset
            // in 32 bits).
            let lanes_at = |k: usize, at: (u32, u32), step: (u32, u32)| {
                tile_lanes::<K>(g, k, (x0 + at.0, y0 + at.1), &batch, step)
            };
            // Stage: thread (tx, ty) loads elements (ty + rows·l, tx) of each staged input,
            // consecutive threads along axis 1.
            let live: [bool; K] = core::array::from_fn(|l| {
                full || (x0 + ty + rows * (l as u32) < n0 && y0 + tx < n1)
            });
            each_fast_input!(|KK| {
                if KK < n_in && staged(KK) {
                    let offs = lanes_at(KK + 1, (ty, tx), (rows, 0));
                    // SAFETY: the live lanes are elements of the plan (module contract).
                    let v: [R; K] = unsafe { load_lanes(ptrs.0[KK + 1], &offs, &live, size[KK]) };
                    let at = stage_of(KK) + (ty * (TILE + 1) + tx) * raw_bytes;
                    let mut l = 0;
                    while l < K {
                        // SAFETY: row ty + rows·l, column tx of input KK's stage.
                        unsafe {
                            st_raw::<R>(
                                at + (l as u32 * rows * (TILE + 1)) * raw_bytes,
                                v[l].bits(),
                            )
                        };
                        l += 1;
                    }
                }
            });
            sync_threads();
            // Compute: thread (tx, ty) takes elements (tx, ty + rows·l), consecutive
            // threads along axis 0. A staged value is read whether live or not (in the
            // stage either way; a dead lane's result is not stored).
            let live: [bool; K] = core::array::from_fn(|l| {
                full || (x0 + tx < n0 && y0 + ty + rows * (l as u32) < n1)
            });
            let mut raw = [[R::default(); K]; FAST_LOADED];
            each_fast_input!(|KK| {
                if KK < n_in {
                    raw[KK] = if staged(KK) {
                        let at = stage_of(KK) + (tx * (TILE + 1) + ty) * raw_bytes;
                        // SAFETY: row tx, columns ty + rows·l of input KK's stage.
                        core::array::from_fn(|l| unsafe {
                            ld_raw::<R>(at + l as u32 * rows * raw_bytes)
                        })
                    } else {
                        let offs = lanes_at(KK + 1, (tx, ty), (0, rows));
                        // SAFETY: the live lanes are elements of the plan (module contract).
                        unsafe { load_lanes(ptrs.0[KK + 1], &offs, &live, size[KK]) }
                    };
                }
            });
            // At most TILED_INPUTS inputs (the host's `tiled_name`): none past them.
            let none = |_| [R::default(); K];
            let bits = interpret::<T, R, K, true, FAST_LOADED, false, false>(
                p, base, &ins, &raw, none, out,
            );
            let offs = lanes_at(0, (tx, ty), (0, rows));
            // SAFETY: the live lanes' output offsets (module contract).
            unsafe { store_lanes(ptrs.0[0], &offs, &live, out_size, &bits) };
            // The stage is read to the end before the next tile's loads overwrite it.
            sync_threads();
            b = b.wadd(grid);
        }
    }

    /// A tiled one-op kernel's body ([`ONE_TILED`](super::ONE_TILED)): the
    /// tiled kernels' tiles, staging and lanes ([`tiled`]), the op dispatched once per
    /// tile instead of an interpreter pass, every operand of one element type.
    ///
    /// # Safety
    /// The contract of [`TILED_NAMES`](super::TILED_NAMES); `p` is a program of
    /// [`one_tiled_kernel`](super::one_tiled_kernel) for `T`'s math type.
    #[inline(always)]
    unsafe fn one_tiled<T: Eval, R: Raw, const K: usize>(
        p: &Program,
        tiles: u32,
        t: &TileArg,
        g: &Geometry<u32, 5, OPERANDS>,
        ptrs: &Pointers,
    ) {
        let op = one_code(p);
        let k = one_consts::<T>(p);
        macro_rules! body {
            ($e:expr, $s:literal) => {
                if $s <= core::mem::size_of::<R>() && super::one_elem(T::CLASS, $e) {
                    // SAFETY: forwarded; every operand is of element type `$e`.
                    unsafe { one_tiled_typed::<T, R, K, $s>($e, p, tiles, t, g, ptrs, &k, op) }
                }
            };
        }
        by_code!(p.out, body, ())
    }

    /// [`one_tiled`] for operands of element type `e` of `S` bytes (a constant in each call).
    ///
    /// # Safety
    /// As [`one_tiled`]; `k[q]` is operand `q`'s value where it is a constant.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn one_tiled_typed<T: Eval, R: Raw, const K: usize, const S: usize>(
        e: ElemType,
        p: &Program,
        tiles: u32,
        t: &TileArg,
        g: &Geometry<u32, 5, OPERANDS>,
        ptrs: &Pointers,
        k: &[T; ONE_OPERANDS],
        op: u8,
    ) {
        let n_in = p.n_inputs as usize;
        let base = shared_base32();
        const TILE: u32 = super::TILE;
        let rows = TILE / K as u32;
        let raw_bytes = core::mem::size_of::<R>() as u32;
        // Input q's stage: TILE rows of TILE + 1 values (the tiled kernels' layout).
        let stage_of = |q: usize| base + STAGED_BYTES + q as u32 * TILE * (TILE + 1) * raw_bytes;
        let staged = |q: usize| t.staged >> q & 1 != 0;
        let (tx, ty, first) = tile_thread();
        let (_, grid) = block_rows_and_grid();
        let (n0, n1) = (g.sizes[0], g.sizes[1]);
        let mut b = first;
        while b < tiles {
            let (x0, y0, batch) = tile_origin(t, b);
            let full = x0 + TILE <= n0 && y0 + TILE <= n1;
            let lanes_at = |k: usize, at: (u32, u32), step: (u32, u32)| {
                tile_lanes::<K>(g, k, (x0 + at.0, y0 + at.1), &batch, step)
            };
            // Every global load of the tile first, so all are in flight together (as the
            // library's tiled kernels): the staged inputs' elements (ty + rows·l, tx),
            // consecutive threads along axis 1, and the others' elements (tx, ty + rows·l)
            // of the compute phase; then the staged values go to shared memory.
            let live1: [bool; K] = core::array::from_fn(|l| {
                full || (x0 + ty + rows * (l as u32) < n0 && y0 + tx < n1)
            });
            let live: [bool; K] = core::array::from_fn(|l| {
                full || (x0 + tx < n0 && y0 + ty + rows * (l as u32) < n1)
            });
            let mut raw = [[R::default(); K]; ONE_OPERANDS];
            macro_rules! load {
                ($($q:literal)*) => {$(
                    if $q < n_in {
                        raw[$q] = if staged($q) {
                            let offs = lanes_at($q + 1, (ty, tx), (rows, 0));
                            // SAFETY: the live lanes are elements of the plan (module contract).
                            unsafe { load_lanes(ptrs.0[$q + 1], &offs, &live1, S) }
                        } else {
                            let offs = lanes_at($q + 1, (tx, ty), (0, rows));
                            // SAFETY: the live lanes are elements of the plan.
                            unsafe { load_lanes(ptrs.0[$q + 1], &offs, &live, S) }
                        };
                    }
                )*};
            }
            load!(0 1 2);
            macro_rules! stage {
                ($($q:literal)*) => {$(
                    if $q < n_in && staged($q) {
                        let at = stage_of($q) + (ty * (TILE + 1) + tx) * raw_bytes;
                        each_lane!(|L| {
                            if L < K {
                                // SAFETY: row ty + rows·L, column tx of input $q's stage.
                                unsafe {
                                    st_raw::<R>(
                                        at + (L as u32 * rows * (TILE + 1)) * raw_bytes,
                                        raw[$q][L].bits(),
                                    )
                                };
                            }
                        });
                    }
                )*};
            }
            stage!(0 1 2);
            sync_threads();
            macro_rules! unstage {
                ($($q:literal)*) => {$(
                    if $q < n_in && staged($q) {
                        let at = stage_of($q) + (tx * (TILE + 1) + ty) * raw_bytes;
                        // SAFETY: row tx, columns ty + rows·l of input $q's stage.
                        raw[$q] = core::array::from_fn(|l| unsafe {
                            ld_raw::<R>(at + l as u32 * rows * raw_bytes)
                        });
                    }
                )*};
            }
            unstage!(0 1 2);
            let x = |q: usize, j: usize| {
                if q < n_in {
                    T::dec(widen(e, raw[q][j].bits()))
                } else {
                    k[q]
                }
            };
            macro_rules! ops {
                ($($name:ident $arity:tt),*) => {
                    match Opcode::from_code(op) {
                        $(Some(Opcode::$name) => ops!(@ $name $arity),)*
                        _ => [0u64; K],
                    }
                };
                (@ $name:ident $arity:tt) => {{
                    // Unrolled by lane: an `array::from_fn` here stays a call through
                    // local memory in the PTX for the unary ops.
                    let mut r = [0u64; K];
                    each_lane!(|J| {
                        if J < K {
                            r[J] = narrow(T::CLASS, ops!(@@ $name $arity J).enc(), e);
                        }
                    });
                    r
                }};
                // The copy: input 0 as it is.
            (@@ Load 1 $j:ident) => {
                x(0, $j)
            };
            (@@ $name:ident 1 $j:ident) => {
                    T::unary(Opcode::$name, x(0, $j))
                };
                (@@ $name:ident 2 $j:ident) => {
                    T::binary(Opcode::$name, x(0, $j), x(1, $j))
                };
                (@@ $name:ident 3 $j:ident) => {
                    T::ternary(Opcode::$name, x(0, $j), x(1, $j), x(2, $j))
                };
            }
            let bits: [u64; K] = ops!(
                Load 1, Neg 1, Abs 1, Relu 1, Add 2, Sub 2, Mul 2, Div 2, Min 2, Max 2, Fma 3, Clamp 3
            );
            let offs = lanes_at(0, (tx, ty), (0, rows));
            // SAFETY: the live lanes' output offsets (module contract).
            unsafe { store_lanes(ptrs.0[0], &offs, &live, S, &bits) };
            // The stage is read to the end before the next tile's loads overwrite it.
            sync_threads();
            b = b.wadd(grid);
        }
    }

    /// The tiled one-op kernels, `expr_<class>o_tile`.
    #[export_name = "expr_fo_tile"]
    #[allow(improper_ctypes_definitions)]
    unsafe extern "ptx-kernel" fn one_tiled_f32(
        p: Program,
        tiles: u32,
        t: TileArg,
        g: Geometry<u32, 5, OPERANDS>,
        ptrs: Pointers,
    ) {
        const _: () = assert!(matches!(super::FAST_PATHS[0], Class::F32));
        const K: usize = match super::ONE_TILED[0] {
            Some((_, lanes)) => lanes,
            None => panic!("expr_fo_tile is listed in ONE_TILED"),
        };
        // SAFETY: the tiled kernels' contract; the host launches it only for a program of
        // `one_tiled_kernel` of f32 math, with its lanes.
        unsafe { one_tiled::<f32, u32, K>(&p, tiles, &t, &g, &ptrs) }
    }

    /// The tiled kernels, `expr_<class>s_tile`.
    macro_rules! tiled {
        ($($suffix:literal $t:ty, $r:ty, $i:literal, $class:ident;)*) => {$(
            const _: () = {
                const K: usize = super::TILE_LANES[$i];
                const _: () = assert!(matches!(super::FAST_PATHS[$i], Class::$class));
                #[export_name = concat!("expr_", $suffix, "s_tile")]
                #[allow(improper_ctypes_definitions)]
                unsafe extern "ptx-kernel" fn entry(
                    p: Program,
                    tiles: u32,
                    t: TileArg,
                    g: Geometry<u32, 5, OPERANDS>,
                    ptrs: Pointers,
                ) {
                    // SAFETY: the module contract and the tiled one; the host launches it
                    // only for a program of this path.
                    unsafe { tiled::<$t, $r, K>(&p, tiles, &t, &g, &ptrs) }
                }
            };
        )*};
    }

    tiled! {
        "f" f32, u32, 0, F32;
        "d" f64, u64, 1, F64;
        "i" i32, u32, 2, I32;
        "l" i64, u64, 3, I64;
        "u" u32, u32, 4, U32;
        "b" u8, u32, 5, U8;
    }

    /// The halving tree over the `1 << shift` slots of thread `tid`'s segment of the
    /// block, as `gpu_kernels::reduce`'s row kernel pairs them ([`tree`](crate::reduce::tree)):
    /// the thread holds its slot's value `v`, the first `used` slots take part, a block
    /// barrier before each level of at least a warp of pairs and a warp barrier before the
    /// others (a segment of at most a warp of slots lies in one warp). Slot 0's thread
    /// returns the tree's value. Every thread of the block calls it with the same `shift`.
    ///
    /// # Safety
    /// `sm` holds `SLOTS` accumulators of this block's shared memory; `tid < SLOTS`.
    #[inline(always)]
    unsafe fn segment_tree<R: Reduce<T>, T>(
        op: &R,
        sm: *mut R::Acc,
        mut v: R::Acc,
        tid: u32,
        shift: u32,
        used: u32,
    ) -> R::Acc {
        let slot = tid & ((1 << shift) - 1);
        // SAFETY (every access below): `seg + slot + s` with `slot + s < 1 << shift`
        // stays in the thread's segment, inside the `SLOTS` accumulators.
        let seg = unsafe { sm.add((tid - slot) as usize) };
        unsafe { *sm.add(tid as usize) = v };
        let mut s = (1u32 << shift) / 2;
        if s >= WARP {
            sync_threads();
        }
        while s >= 1 {
            if s < WARP {
                sync_warp();
            }
            if slot < s {
                if slot + s < used {
                    v = op.combine(v, unsafe { *seg.add((slot + s) as usize) });
                }
                unsafe { *seg.add(slot as usize) = v };
            }
            if s / 2 >= WARP {
                sync_threads();
            }
            s /= 2;
        }
        v
    }

    /// The group kernels of an expression reduction (`crate::reduce`), one per interpreter
    /// (`reduce::GROUP_KERNELS`): logical block `b < blocks` reduces group `b % groups` of
    /// `SLOTS >> row_shift` consecutive outputs, thread `t` folding slot `t % (1 <<
    /// row_shift)` of output `t >> row_shift` among them; one group's value is the output,
    /// more go to the scratch. Any grid: block `k` takes the logical blocks `k, k + grid,
    /// …`. `SLOTS` threads, [`STAGED_BYTES`] + `8 * SLOTS` bytes of dynamic shared memory.
    ///
    /// # Safety
    /// The module contract's program (a fast kernel only for a program of its path), the
    /// [`Geometry`](crate::reduce::Geometry) invariants, the launch shape above.
    #[inline(always)]
    unsafe fn reduce_groups(
        path: Path,
        p: &Program,
        g: &reduce::Geometry,
        ptrs: &Pointers,
        scratch: u64,
    ) {
        // SAFETY: the launch's shared memory; called once by every thread.
        let base = unsafe { stage(p, !matches!(path, Path::General)) };
        let walk = Walk::new(
            p,
            g,
            |pc| fetch(base, pc),
            |pc| word(base, pc),
            |c| konst(base, c),
        );
        let (tid, _, first) = tile_thread();
        let (_, grid) = block_rows_and_grid();
        // Each block takes the logical blocks `first, first + grid, …` (the program staged
        // once for all of them).
        let mut bid = first;
        while bid < g.blocks {
            // The previous logical block's tree is read to the end before this one's
            // slots overwrite it.
            sync_threads();
            // SAFETY: forwarded; every thread of the block takes the same logical blocks.
            unsafe { reduce_block(path, &walk, g, ptrs, scratch, tid, bid) };
            bid += grid;
        }
    }

    /// Logical block `bid` of a group kernel ([`reduce_groups`]).
    ///
    /// # Safety
    /// As [`reduce_groups`]; every thread of the block calls it with the same `bid`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn reduce_block<F: Fn(usize) -> Instr, W: Fn(usize) -> u32, C: Fn(usize) -> u64>(
        path: Path,
        walk: &Walk<F, W, C>,
        g: &reduce::Geometry,
        ptrs: &Pointers,
        scratch: u64,
        tid: u32,
        bid: u32,
    ) {
        let shift = g.row_shift;
        let slot = tid & ((1 << shift) - 1);
        let o = ((bid / g.groups) << (SLOT_BITS - shift)) + (tid >> shift);
        let grp = bid % g.groups;
        // Invariant 2: only the last logical block has outputs past the last; theirs read
        // and write nothing, and their offsets are the last output's.
        let live = o < g.outputs;
        let (lo, len) = g.group(grp);
        let (oo, io) = g.kept_offsets(if live { o } else { g.outputs - 1 }, walk.n_in);
        let bases = input_bases(&ptrs.0, &io, &walk.ins, walk.n_in);
        let group = if live { (lo, len) } else { (lo, 0) };
        // SAFETY (the items): invariant 3 for this output's group; the host launches a
        // fast kernel only for a program of its path whose output has its math type
        // (`reduce::groups_kernel`).
        macro_rules! fast {
            ($t:ty) => {{
                const L: usize = reduce::lanes(core::mem::size_of::<$t>());
                unsafe { walk.slot_fast::<$t, L>(g, &bases, group, slot) }.map(|v| v.enc())
            }};
        }
        let v = match path {
            // The reduce kernels run every program's ops (`run`, extended ones included).
            Path::General | Path::GeneralExt => {
                const G: usize = reduce::GENERAL_LANES;
                walk.slot::<G>(group, slot, |r, live| unsafe {
                    walk.items::<G>(g, &bases, r, live)
                })
            }
            Path::F32 => fast!(f32),
            Path::F64 => fast!(f64),
            Path::I32 => fast!(i32),
            Path::I64 => fast!(i64),
            Path::U32 => fast!(u32),
            Path::U8 => fast!(u8),
        };
        let v = v.unwrap_or(0);
        // SAFETY: the launch's shared memory holds `SLOTS` accumulators after the staged
        // program (8-byte aligned: `STAGED_BYTES` is a multiple of 8); every thread calls
        // the tree with the same `shift <= SLOT_BITS`.
        let v = unsafe {
            let sm = shared_base().add(STAGED_BYTES as usize) as *mut u64;
            segment_tree(&walk.fold, sm, v, tid, shift, g.used(len, walk.w))
        };
        if live && slot == 0 {
            if g.groups == 1 {
                // SAFETY: invariant 3, the output's offset.
                unsafe { store_bits(ptrs.0[0], oo, walk.out.size(), walk.output(g, v)) };
            } else {
                // SAFETY: invariant 4.
                unsafe { *(scratch as *mut u64).add((o * g.groups + grp) as usize) = v };
            }
        }
    }

    /// The group kernels, `expr_<class>r_groups`.
    macro_rules! reduce_groups {
        ($($suffix:literal $path:ident;)*) => {$(
            const _: () = {
                #[export_name = concat!("expr_", $suffix, "r_groups")]
                #[allow(improper_ctypes_definitions)]
                unsafe extern "ptx-kernel" fn entry(
                    p: Program,
                    g: reduce::Geometry,
                    ptrs: Pointers,
                    scratch: u64,
                ) {
                    // SAFETY: the module contract and `reduce_groups`'.
                    unsafe { reduce_groups(Path::$path, &p, &g, &ptrs, scratch) }
                }
            };
        )*};
    }

    reduce_groups! {
        "g" General;
        "f" F32;
        "d" F64;
        "i" I32;
        "l" I64;
        "u" U32;
        "b" U8;
    }

    /// The final kernel of an expression reduction of more than one group: block `o`
    /// trees over output `o`'s group values in the scratch and writes the output.
    /// `FINAL_BLOCK` threads, `8 * groups` bytes of dynamic shared memory.
    ///
    /// # Safety
    /// As the group kernels, after one on the same stream.
    #[export_name = "expr_reduce_final"]
    #[allow(improper_ctypes_definitions)]
    unsafe extern "ptx-kernel" fn reduce_final(
        p: Program,
        g: reduce::Geometry,
        ptrs: Pointers,
        scratch: u64,
    ) {
        // The walk's program is not read here: its output type and reduction only.
        let walk = Walk::new(&p, &g, |_| Instr::default(), |_| 0, |_| 0);
        let (tid, _, o) = tile_thread();
        let sm = shared_base() as *mut u64;
        let mut l = tid;
        while l < g.groups {
            // SAFETY: invariant 4; `l < groups`, the shared array's length.
            unsafe {
                *sm.add(l as usize) = *(scratch as *const u64).add((o * g.groups + l) as usize)
            };
            l += FINAL_BLOCK;
        }
        // The halving tree over the groups, as `tree` pairs them.
        let mut s = MAX_GROUPS / 2;
        while s >= 1 {
            sync_threads();
            let mut l = tid;
            while l < s {
                if l + s < g.groups {
                    // SAFETY: `l + s < groups`, within the shared array.
                    unsafe {
                        *sm.add(l as usize) = walk
                            .fold
                            .combine(*sm.add(l as usize), *sm.add((l + s) as usize))
                    };
                }
                l += FINAL_BLOCK;
            }
            s /= 2;
        }
        sync_threads();
        if tid == 0 {
            let (oo, _) = g.kept_offsets(o, 0);
            // SAFETY: invariant 3; `*sm` is the tree's value.
            unsafe { store_bits(ptrs.0[0], oo, walk.out.size(), walk.output(&g, *sm)) };
        }
    }

    #[export_name = "expr_gs_dn"]
    #[allow(improper_ctypes_definitions)]
    unsafe extern "ptx-kernel" fn any_rank(
        p: Program,
        n: u32,
        g: Geometry<u32, MAX_DIMS, OPERANDS>,
        ptrs: Pointers,
    ) {
        // SAFETY: the module contract.
        unsafe { body::<MAX_DIMS>(Path::General, &p, n, &g, &ptrs, g.ndim as usize) }
    }

    #[export_name = "expr_gx_dn"]
    #[allow(improper_ctypes_definitions)]
    unsafe extern "ptx-kernel" fn any_rank_ext(
        p: Program,
        n: u32,
        g: Geometry<u32, MAX_DIMS, OPERANDS>,
        ptrs: Pointers,
    ) {
        // SAFETY: the module contract.
        unsafe { body::<MAX_DIMS>(Path::GeneralExt, &p, n, &g, &ptrs, g.ndim as usize) }
    }
}
