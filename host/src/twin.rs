//! The CPU twin's engine: walks a [`Plan`] with rayon over host memory, in runs of the
//! innermost collapsed dimension, with the kernels' own index arithmetic
//! ([`Geometry::offsets`]). The typed CPU twin ([`cpu`](crate::cpu)), run-time dispatch on
//! host tensors, `nd`, reductions and stencils all run on it.

use crate::alias::{check_aliasing, Region};
use crate::error::{Operand, Result};
use crate::layout::Layout;
use crate::plan::{plan, Plan};
use gpu_kernels::dispatch;
use gpu_kernels::ops::{Op1, Op2, Op3, Op4};
use gpu_kernels::{Elem, Geometry, MAX_DIMS};
use rayon::prelude::*;

/// Elements per rayon task; below two of these the walk stays on the calling thread.
const CHUNK: u64 = 1 << 15;

/// A raw pointer that may cross rayon tasks (this module's runs and the stencil twin).
#[derive(Clone, Copy)]
pub(crate) struct SendPtr<T>(pub(crate) *mut T);
// SAFETY: used only where the planner proved that distinct linear indices reach distinct
// output elements, so tasks over disjoint index ranges never touch the same element, and
// inputs are only read (`for_each_row`'s runs, `stencil::apply_cpu`'s chunks).
unsafe impl<T> Send for SendPtr<T> {}
unsafe impl<T> Sync for SendPtr<T> {}
impl<T> SendPtr<T> {
    pub(crate) fn get(self) -> *mut T {
        self.0
    }
}

/// Calls `row(offsets, len)` for runs of `len` consecutive linear indices of the plan,
/// where `offsets[k]` is operand `k`'s element offset from its base at the run's first index
/// and the run walks the innermost collapsed dimension (see [`inner_steps`]). A run never
/// crosses a row of the innermost dimension nor a rayon task's chunk. IndexToOffset (the
/// kernels' own [`Geometry::offsets`]) runs once per run.
///
/// `row` is a trait object, so rayon's machinery is compiled once per operand count rather
/// than once per (op, element types) in every crate that instantiates the twin (the test
/// binaries' build time): one indirect call per run, beside the run's index arithmetic.
fn for_each_row<const N: usize>(plan: &Plan<N>, row: &(dyn Fn([isize; N], usize) + Sync)) {
    let g: Geometry<u64, MAX_DIMS, N> = plan.geometry();
    let run = |lo: u64, hi: u64| {
        if plan.ndim == 0 {
            row([lo as isize; N], (hi - lo) as usize);
            return;
        }
        let inner = plan.sizes[0];
        let mut i = lo;
        while i < hi {
            let row_end = (i - i % inner + inner).min(hi);
            row(g.offsets(i, plan.ndim), (row_end - i) as usize);
            i = row_end;
        }
    };
    if plan.numel < 2 * CHUNK {
        run(0, plan.numel);
    } else {
        let chunks = plan.numel.div_ceil(CHUNK);
        (0..chunks)
            .into_par_iter()
            .for_each(|c| run(c * CHUNK, ((c + 1) * CHUNK).min(plan.numel)));
    }
}

/// Each operand's stride along a run of [`for_each_row`] (1 for every operand when the plan
/// is contiguous).
fn inner_steps<const N: usize>(plan: &Plan<N>) -> [isize; N] {
    if plan.ndim == 0 {
        [1; N]
    } else {
        std::array::from_fn(|k| plan.strides[k][0] as isize)
    }
}

/// A host slice as an operand of the aliasing checks.
pub(crate) fn region<'a, T>(operand: &'static str, data: &[T], layout: &'a Layout) -> Region<'a> {
    Region {
        operand,
        buffer: data.as_ptr() as u64,
        elem_size: size_of::<T>(),
        layout,
    }
}

/// Runs `row(ptrs, steps, len)` over the plan: `ptrs[k]` is operand `k`'s address at a
/// run's first element (from `bases[k]`, the address of the element at `plan.base[k]`, and
/// `sizes[k]` bytes per element) and `steps[k]` its stride along the run, in elements.
///
/// # Safety
/// For every offset of the plan, `bases[k]` moved by it stays inside operand `k`'s
/// allocation; distinct indices reach distinct output elements (runs of different tasks
/// write disjoint elements), and the output does not overlap the inputs.
unsafe fn walk<const N: usize>(
    plan: &Plan<N>,
    bases: [*mut u8; N],
    sizes: [usize; N],
    row: &(dyn Fn([*mut u8; N], [isize; N], usize) + Sync),
) {
    let bases = bases.map(SendPtr);
    let steps = inner_steps(plan);
    for_each_row(plan, &|off: [isize; N], len: usize| {
        // SAFETY: `off[k]` is an offset of the plan (the caller's bounds proof).
        let ptrs =
            std::array::from_fn(|k| unsafe { bases[k].get().offset(off[k] * sizes[k] as isize) });
        row(ptrs, steps, len)
    });
}

/// The CPU twin from buffer starts: plans `layouts` (output first), checks that the output
/// does not overlap itself, and runs `row` over the plan ([`walk`]) from `data[k]`, the
/// address operand `k`'s layout counts from (`sizes[k]` bytes per element).
///
/// # Safety
/// Every offset each layout reaches, from its `data`, is an element of one live
/// allocation, initialised for the inputs; no input element is an output element, nothing
/// else accesses the output's elements during the call, and `row` is sound on such runs.
pub(crate) unsafe fn run_layouts<const N: usize>(
    names: [Operand; N],
    layouts: [&Layout; N],
    data: [*mut u8; N],
    sizes: [usize; N],
    row: &(dyn Fn([*mut u8; N], [isize; N], usize) + Sync),
) -> Result<()> {
    let plan: Plan<N> = plan(layouts, names)?;
    let out = Region {
        operand: "out",
        buffer: data[0] as u64,
        elem_size: sizes[0],
        layout: layouts[0],
    };
    // The caller keeps the inputs apart from the output; this proves the output does not
    // overlap itself.
    check_aliasing(&out, &[])?;
    if plan.numel == 0 {
        return Ok(());
    }
    let bases = std::array::from_fn(|k| data[k].wrapping_add(plan.base[k] * sizes[k]));
    // SAFETY: the caller's bounds and aliasing proofs, and the output offsets are distinct
    // per index (no internal overlap), so runs of different tasks write disjoint elements.
    unsafe { walk(&plan, bases, sizes, row) };
    Ok(())
}

macro_rules! twin_apply {
    ($raw:ident, $trait:ident, $run:ident, out: $o:ident, [$($x:ident: $t:ident),*]) => {
        /// The CPU twin over pointers: the layouts' offsets count from each pointer.
        ///
        /// # Safety
        /// Every offset each layout reaches, from its pointer, is an element of one live
        /// allocation, initialised for the inputs; no input element is an output element,
        /// and nothing else accesses the output's elements during the call.
        pub(crate) unsafe fn $raw<Op: $trait<$o $(, $t)*>, $o: Elem $(, $t: Elem)*>(
            op: Op,
            out: (*mut $o, &Layout),
            $($x: (*const $t, &Layout)),*
        ) -> Result<()> {
            let data = [out.0.cast::<u8>() $(, $x.0.cast::<u8>().cast_mut())*];
            let sizes = [size_of::<$o>() $(, size_of::<$t>())*];
            // SAFETY: the caller's contract.
            unsafe {
                run_layouts(["out" $(, stringify!($x))*], [out.1 $(, $x.1)*], data, sizes, &|ptrs, steps, len| {
                    dispatch::$run::<Op, $o $(, $t)*>(op, len, ptrs, steps)
                })
            }
        }
    };
}

twin_apply!(apply1_raw, Op1, run1, out: T, []);
twin_apply!(apply2_raw, Op2, run2, out: O, [a: A]);
twin_apply!(apply3_raw, Op3, run3, out: O, [a: A, b: B]);
twin_apply!(apply4_raw, Op4, run4, out: O, [a: A, b: B, c: C]);

/// Lanes the CPU twin interprets a program on at once.
const PROGRAM_LANES: usize = 16;

/// Reads one element of `size` bytes as zero-extended bits.
///
/// # Safety
/// `p` points to a live, initialised element of `size` bytes, aligned for it.
unsafe fn read_bits(p: *const u8, size: usize) -> u64 {
    // SAFETY: the caller's contract.
    unsafe {
        match size {
            1 => *p as u64,
            2 => p.cast::<u16>().read() as u64,
            4 => p.cast::<u32>().read() as u64,
            _ => p.cast::<u64>().read(),
        }
    }
}

/// Writes the low `size` bytes of `bits` as one element.
///
/// # Safety
/// `p` points to a live element of `size` bytes, aligned for it, that nothing else
/// accesses during the call.
unsafe fn write_bits(p: *mut u8, size: usize, bits: u64) {
    // SAFETY: the caller's contract.
    unsafe {
        match size {
            1 => *p = bits as u8,
            2 => p.cast::<u16>().write(bits as u16),
            4 => p.cast::<u32>().write(bits as u32),
            _ => p.cast::<u64>().write(bits),
        }
    }
}

/// The CPU twin of an expression: plans `layouts` (output first, then the program's
/// inputs in order), and over every run loads each input once, converts it to its math
/// type, interprets `p` on [`PROGRAM_LANES`] lanes at a time and rounds the result once to
/// the output's element type. `elems[k]` is operand `k`'s element type, `data[k]` the
/// address its layout counts from.
///
/// # Safety
/// As [`run_layouts`]: every offset each layout reaches from its `data` is an element of
/// `elems[k]` in one live allocation (initialised for the inputs); no input element is an
/// output element and nothing else accesses the output during the call. `p` was checked by
/// the host (its loads name inputs `0..N - 1`).
pub(crate) unsafe fn run_program<const N: usize>(
    p: &strided_apply_expr::Program,
    names: [Operand; N],
    layouts: [&Layout; N],
    data: [*mut u8; N],
    elems: [gpu_kernels::elem::ElemType; N],
) -> Result<()> {
    let sizes: [usize; N] = std::array::from_fn(|k| elems[k].size());
    // SAFETY: forwarded contract; each run's pointers and steps reach only elements the
    // layouts reach.
    unsafe {
        run_layouts(names, layouts, data, sizes, &|ptrs, steps, len| {
            program_run(p, &ptrs, &steps, &elems, len)
        })
    }
}

/// One run of [`run_program`]: `len` elements of operand `k` at `ptrs[k] + i * steps[k]`
/// elements, of type `elems[k]`.
struct Run<'a> {
    ptrs: &'a [*mut u8],
    steps: &'a [isize],
    elems: &'a [gpu_kernels::elem::ElemType],
    len: usize,
}

impl Run<'_> {
    /// Element `i` of operand `k`.
    ///
    /// # Safety
    /// `i < len`, `k < elems.len()`, under [`run_program`]'s contract.
    #[inline(always)]
    unsafe fn at(&self, k: usize, i: usize) -> *mut u8 {
        // SAFETY: the caller's element of this run.
        unsafe { self.ptrs[k].offset(i as isize * self.steps[k] * self.elems[k].size() as isize) }
    }
}

/// Interprets `p` over one run. Not generic over the operand count, so each interpreter is
/// compiled once.
///
/// # Safety
/// [`run_program`]'s contract, for this run's elements.
#[inline(never)]
unsafe fn program_run(
    p: &strided_apply_expr::Program,
    ptrs: &[*mut u8],
    steps: &[isize],
    elems: &[gpu_kernels::elem::ElemType],
    len: usize,
) {
    use strided_apply_expr::Class;
    let run = Run {
        ptrs,
        steps,
        elems,
        len,
    };
    // The fast interpreter for programs of at most FAST_LOADED inputs (as the GPU's fast
    // kernels; the general one gives the same bits and keeps the binary smaller).
    let fast = if p.n_inputs as usize <= strided_apply_expr::eval::FAST_LOADED {
        Class::from_code(p.fast)
    } else {
        None
    };
    // SAFETY (each arm): forwarded.
    unsafe {
        match fast {
            Some(Class::F32) => fast_run::<f32>(p, &run),
            Some(Class::F64) => fast_run::<f64>(p, &run),
            Some(Class::I32) => fast_run::<i32>(p, &run),
            Some(Class::I64) => fast_run::<i64>(p, &run),
            Some(Class::U32) => fast_run::<u32>(p, &run),
            Some(Class::U8) => fast_run::<u8>(p, &run),
            _ => general_run(p, &run),
        }
    }
}

/// The general interpreter over one run, [`PROGRAM_LANES`] lanes at a time.
///
/// # Safety
/// [`run_program`]'s contract, for the run's elements.
#[inline(never)]
unsafe fn general_run(p: &strided_apply_expr::Program, run: &Run<'_>) {
    let Run { elems, len, .. } = *run;
    use strided_apply_expr::{eval, value, Class, MAX_INPUTS};
    let result = Class::from_code(p.result).unwrap_or(Class::F32);
    let mut i = 0;
    while i < len {
        let lanes = (len - i).min(PROGRAM_LANES);
        let mut inputs = [[0u64; PROGRAM_LANES]; MAX_INPUTS];
        for k in 1..elems.len() {
            for (j, lane) in inputs[k - 1][..lanes].iter_mut().enumerate() {
                // SAFETY: the caller's elements.
                *lane = value::widen(elems[k], unsafe {
                    read_bits(run.at(k, i + j), elems[k].size())
                });
            }
        }
        let r = eval::<PROGRAM_LANES>(p, &inputs);
        for (j, &v) in r[..lanes].iter().enumerate() {
            // SAFETY: the caller's output elements.
            unsafe {
                write_bits(
                    run.at(0, i + j),
                    elems[0].size(),
                    value::narrow(result, v, elems[0]),
                )
            };
        }
        i += lanes;
    }
}

/// The fast path of one numeric math type `T` over one run, as the GPU kernels run it.
///
/// # Safety
/// As [`general_run`]; `p` is a fast program of `T`'s class.
#[inline(never)]
unsafe fn fast_run<T: strided_apply_expr::eval::Eval>(
    p: &strided_apply_expr::Program,
    run: &Run<'_>,
) {
    let Run { elems, len, .. } = *run;
    use strided_apply_expr::eval::{fast_word, run_fast, FAST_LOADED};
    use strided_apply_expr::value;
    use strided_apply_expr::Class;
    let result = Class::from_code(p.result).unwrap_or(Class::F32);
    let mut i = 0;
    while i < len {
        let lanes = (len - i).min(PROGRAM_LANES);
        let mut inputs = [[T::dec(0); PROGRAM_LANES]; FAST_LOADED];
        for k in 1..elems.len().min(FAST_LOADED + 1) {
            for (j, lane) in inputs[k - 1][..lanes].iter_mut().enumerate() {
                // SAFETY: the caller's elements.
                let bits = unsafe { read_bits(run.at(k, i + j), elems[k].size()) };
                *lane = T::dec(value::widen(elems[k], bits));
            }
        }
        let r = run_fast::<T, PROGRAM_LANES, FAST_LOADED>(
            p.len as usize,
            |pc| fast_word(p.instrs[pc % p.instrs.len()]),
            |c| p.consts[c % p.consts.len()],
            |k| inputs[k % FAST_LOADED],
        );
        for (j, v) in r[..lanes].iter().enumerate() {
            let bits = value::narrow(result, v.enc(), elems[0]);
            // SAFETY: the caller's output elements.
            unsafe { write_bits(run.at(0, i + j), elems[0].size(), bits) };
        }
        i += lanes;
    }
}
