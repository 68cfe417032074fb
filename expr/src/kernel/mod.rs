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
//!
//! # Where the kernels are
//! This module holds the host's side: the kernel tables and which kernel runs a program.
//! The device code (GPU builds only) is in one module per layout:
//!
//! | module | what |
//! |---|---|
//! | `strided` | the element-wise kernels of the variants in [`NAMES`] (`expr_<class>s_<variant>`) |
//! | `vector` | the vectorised kernels (`expr_<class>v_vec`), the wide and the cheap one |
//! | `tiled` | the tiled kernels (`expr_<class>s_tile`) |
//! | `one_op` | the one-op kernels (`expr_<class>o_k<lanes>`) |
//! | `one_tiled` | the tiled one-op kernel (`expr_fo_tile`) |
//! | `device` (`groups.rs`) | the group and final kernels of expression reductions |
//! | `staging`, `interp` | what they share: the program staged in shared memory; operands' lanes, the fast paths' interpreter over them, and which interpreter a kernel runs |
//!
//! **The names of these modules are part of the image's bytes.** rustc hands LLVM the
//! crate's functions sorted by their mangled names, which hold the module path, and that
//! order reaches the PTX: the PTX of some kernels (the one-op and the group kernels) came
//! out with other register numbers or block layouts when their helpers' modules sorted
//! before theirs (`one`, `stage`). The names above keep every family's PTX and cubin
//! byte-identical to the single-file module they came from, as does keeping here every host
//! function (`name`, `one_kernel`, …: the crate's exported symbols, whose names LLVM hashes
//! into the names of the image's constant tables). Check the image after renaming or moving
//! any of them (`scripts/ptx --check`).

use crate::ir::{Class, Opcode, Program, MAX_INPUTS, MAX_INSTRS};
use crate::paths::fast_path;
pub use crate::paths::FAST_PATHS;
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

/// Elements per thread and dispatch of the vectorised kernels, by fast path (the order of
/// [`FAST_PATHS`]): one 16-byte vector of 4-byte elements; 8 lanes for `u8` math, whose
/// elements are mostly single bytes; none for 64-bit math (two lanes, one vector of 8-byte
/// elements, measured 1-4 % slower than the element-wise kernels: `benches/NOTES.md`).
pub const VECTOR_LANES: [Option<usize>; 6] = [Some(4), None, Some(4), None, Some(4), Some(8)];

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
mod interp;
#[cfg(target_arch = "nvptx64")]
mod one_op;
#[cfg(target_arch = "nvptx64")]
mod one_tiled;
#[cfg(target_arch = "nvptx64")]
mod staging;
#[cfg(target_arch = "nvptx64")]
mod strided;
#[cfg(target_arch = "nvptx64")]
mod tiled;
#[cfg(target_arch = "nvptx64")]
mod vector;

/// The group and final kernels of expression reductions (`groups.rs`). The module keeps the
/// name `device` that the whole of the kernels' device code had: the one function of the
/// image that stays out of line, a closure of `reduce_block`, is named by its path
/// (`kernel::device::reduce_block`), so another name would change the `expr_gr` family's
/// PTX and cubin.
#[cfg(target_arch = "nvptx64")]
#[path = "groups.rs"]
mod device;
