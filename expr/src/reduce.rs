//! Reductions of expressions in one pass: `sum`, `prod`, `amin`, `amax` or `mean` of a
//! program's values over some axes, each value computed where it is read (no temporary).
//!
//! # The order
//! The order of the library's reductions ([`gpu_kernels::reduce`]): groups, slots of
//! [`chunk`]`(size)` consecutive elements and halving trees, a fixed function of the
//! reduction length, with `size` the output element's size. So the GPU and the CPU twin
//! agree bit for bit, and the reduction of the one-input program `a` gives the library's
//! `reduce` bits.
//!
//! # The values
//! Each element is the program's result rounded once to the output's element type (as an
//! expression's run would store it), widened back to that type's math type ([`Class`]);
//! the accumulator is that math type (`f32` for `f16`/`bf16` outputs, each integer type
//! its own, wrapping), folded with the library's [`Reduce`] implementations, and the
//! result rounds once to the output type. Bool results are not reduced (the host refuses
//! them); `mean` is for float outputs only.
//!
//! The walk over one slot ([`Walk::slot`]) is this module's code on the GPU and in the CPU
//! twin alike; the trees are [`tree`]'s pairing.

use crate::eval::{fast_word, run, run_fast, Eval, FAST_LOADED};
use crate::ir::{Class, Instr, Program, MAX_INPUTS};
use crate::value::{elem_of, narrow, widen, Math};
use gpu_kernels::elem::ElemType;
pub use gpu_kernels::reduce::{
    chunk, group_len, groups_used, row_shift, tree, FINAL_BLOCK, KEPT_DIMS, RED_DIMS, SLOTS,
    SLOT_BITS,
};

/// Elements per interpreter pass in the GPU's group kernels (loads of that many elements of
/// each input in flight per thread): a fast path of `size`-byte math values takes 4 (2 for
/// 8-byte values, whose lanes take twice the registers).
pub const fn lanes(size: usize) -> usize {
    if size >= 8 {
        2
    } else {
        4
    }
}
/// The general interpreter's lanes: one (its values are 8-byte words in any case; two lanes
/// took an 856-byte stack frame).
pub const GENERAL_LANES: usize = 1;
/// Elements per interpreter pass in the CPU twin (the order of the fold is the same for any
/// count).
const TWIN_LANES: usize = 8;
use gpu_kernels::math::Num;
use gpu_kernels::reduce::{Amax, Amin, Mean, Prod, Reduce, Sum};
use gpu_kernels::FastDiv;

/// The final kernel: a block per output, the tree over its groups' values.
pub const FINAL_KERNEL: &str = "expr_reduce_final";

/// The reductions, by code ([`Geometry::op`]).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Sum (floats in their math type, integers wrap).
    Sum = 0,
    /// Product.
    Prod = 1,
    /// NaN-propagating minimum (IEEE 754-2019 `minimum`: `-0 < +0`); a reduction of nothing
    /// is an error.
    Amin = 2,
    /// NaN-propagating maximum (IEEE 754-2019 `maximum`: `-0 < +0`); a reduction of nothing
    /// is an error.
    Amax = 3,
    /// The sum divided by the length (float outputs only; NaN for a reduction of nothing).
    Mean = 4,
}

impl ReduceOp {
    /// Every reduction, in code order.
    pub const ALL: [ReduceOp; 5] = [
        ReduceOp::Sum,
        ReduceOp::Prod,
        ReduceOp::Amin,
        ReduceOp::Amax,
        ReduceOp::Mean,
    ];

    /// Its name (as the library's reduction of the same name).
    pub const fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Amin => "amin",
            ReduceOp::Amax => "amax",
            ReduceOp::Mean => "mean",
        }
    }

    /// The reduction of a name, `None` for another name.
    pub fn from_name(name: &str) -> Option<ReduceOp> {
        ReduceOp::ALL.into_iter().find(|r| r.name() == name)
    }

    /// Whether it reduces values of math type `c` (numbers; `mean` floats only).
    pub const fn takes(self, c: Class) -> bool {
        match self {
            ReduceOp::Mean => c.is_float(),
            _ => !matches!(c, Class::Bool),
        }
    }

    /// The result of a reduction of nothing in math type `c`, `None` where there is none.
    pub fn empty(self, c: Class) -> Option<u64> {
        let v = match self {
            ReduceOp::Sum => 0.0,
            ReduceOp::Prod => 1.0,
            ReduceOp::Amin | ReduceOp::Amax => return None,
            ReduceOp::Mean => f64::NAN,
        };
        Some(crate::value::from_f64(c, v))
    }
}

/// An accumulator of one reduction in one math type, both known at run time; values are
/// encoded as [`value`](crate::value) encodes them. Implements the library's [`Reduce`]
/// over encoded values, so its trees are the library's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fold {
    pub op: ReduceOp,
    pub class: Class,
}

impl Reduce<u64> for Fold {
    type Acc = u64;
    type Out = u64;
    #[inline(always)]
    fn first(&self, x: u64, _i: u32) -> u64 {
        // Every numeric class is its own accumulator type (`Reduce::first` is `to_acc`).
        x
    }
    #[inline(always)]
    fn fold(&self, acc: u64, x: u64, _i: u32) -> u64 {
        self.combine(acc, x)
    }
    #[inline(always)]
    fn combine(&self, a: u64, b: u64) -> u64 {
        fn typed<T: Math + Num<Acc = T>>(op: ReduceOp, a: u64, b: u64) -> u64 {
            combine_typed(op, T::dec(a), T::dec(b)).enc()
        }
        match self.class {
            Class::F32 => typed::<f32>(self.op, a, b),
            Class::F64 => typed::<f64>(self.op, a, b),
            Class::I32 => typed::<i32>(self.op, a, b),
            Class::I64 => typed::<i64>(self.op, a, b),
            Class::U32 => typed::<u32>(self.op, a, b),
            Class::U8 => typed::<u8>(self.op, a, b),
            Class::U64 => typed::<u64>(self.op, a, b),
            // Bool values are not reduced (the host refuses them).
            Class::Bool => a,
        }
    }
    #[inline(always)]
    fn finish(&self, acc: u64, n: u32) -> u64 {
        match (self.op, self.class) {
            (ReduceOp::Mean, Class::F32) => {
                <Mean as Reduce<f32>>::finish(&Mean, f32::dec(acc), n).enc()
            }
            (ReduceOp::Mean, Class::F64) => {
                <Mean as Reduce<f64>>::finish(&Mean, f64::dec(acc), n).enc()
            }
            _ => acc,
        }
    }
    fn empty(&self) -> Option<u64> {
        self.op.empty(self.class)
    }
    #[inline(always)]
    fn placeholder(&self) -> u64 {
        0
    }
}

/// `op`'s combination of two values of a numeric type that is its own accumulator: the
/// library's [`Reduce`] implementations (`mean` folds as a sum).
#[inline(always)]
pub fn combine_typed<T: Num<Acc = T>>(op: ReduceOp, a: T, b: T) -> T {
    match op {
        ReduceOp::Sum | ReduceOp::Mean => <Sum as Reduce<T>>::combine(&Sum, a, b),
        ReduceOp::Prod => <Prod as Reduce<T>>::combine(&Prod, a, b),
        ReduceOp::Amin => <Amin as Reduce<T>>::combine(&Amin, a, b),
        ReduceOp::Amax => <Amax as Reduce<T>>::combine(&Amax, a, b),
    }
}

/// Sizes and strides of one expression reduction, passed by value to its kernels.
///
/// As the library's `ReduceGeometry` (kept dimensions number the outputs, `kept[0]`
/// fastest; reduced dimensions number each output's elements, `red[0]` fastest; strides in
/// elements, two's complement in `u32`; unused dimensions size 1, stride 0), for the
/// output and up to [`MAX_INPUTS`] inputs, with the reduction and its empty value.
///
/// Invariants the host proves before a launch (kernels trust them):
/// 1. `1 <= nkept <= KEPT_DIMS`, `1 <= nred <= RED_DIMS`; the kept sizes' product is
///    `outputs >= 1`, the reduced sizes' `n`; `n`, `outputs * groups` and every offset
///    below fit in 31 bits.
/// 2. `groups == groups_used(n, w)`, `group_len == group_len(n, w)` and `row_shift ==
///    row_shift(n, w)` for `w = chunk(size of the output element)`; `blocks` is
///    `ceil(outputs / (SLOTS >> row_shift)) * groups` (the group kernel's logical blocks).
/// 3. For every output `o`, reduced index `r < n` and input `k` of the program, the
///    input offset `kept(o)[1 + k] + red(r)[k]` and the output offset `kept(o)[0]`, read as
///    signed, lie in their buffers (of the program's element types); distinct outputs
///    have distinct output offsets; the output shares no memory with the inputs or the
///    scratch.
/// 4. With `groups > 1`, the scratch holds `outputs * groups` accumulators (`u64`).
/// 5. `op` reduces the output's math type ([`ReduceOp::takes`]); `empty` is
///    [`ReduceOp::empty`] rounded to the output type where `n == 0` (then there is one).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Reduction length.
    pub n: u32,
    pub group_len: u32,
    pub groups: u32,
    pub outputs: u32,
    pub row_shift: u32,
    /// A [`ReduceOp`] code.
    pub op: u32,
    /// Logical blocks of the group kernel: `ceil(outputs / (SLOTS >> row_shift)) * groups`.
    pub blocks: u32,
    pub nkept: u32,
    pub nred: u32,
    /// The output's bits for a reduction of nothing.
    pub empty: u64,
    pub kept: [FastDiv; KEPT_DIMS],
    /// `kept_strides[0]`: output, `kept_strides[1 + k]`: input `k`.
    pub kept_strides: [[u32; KEPT_DIMS]; MAX_INPUTS + 1],
    pub red: [FastDiv; RED_DIMS],
    /// `red_strides[k]`: input `k`.
    pub red_strides: [[u32; RED_DIMS]; MAX_INPUTS],
}

/// `$body` for each constant `$d` of `0..6` below `$n`.
macro_rules! each_dim {
    ($n:expr, |$d:ident| $body:block) => {
        each_dim!(@ $n, $d, $body, 0 1 2 3 4 5)
    };
    (@ $n:expr, $d:ident, $body:block, $($v:literal)*) => {{
        $( if $v < $n { const $d: usize = $v; $body } )*
    }};
}
const _: () = assert!(KEPT_DIMS == 6 && RED_DIMS == 6);

/// `$body` for each constant `$k` of `0..MAX_INPUTS` below `$n`: constant indices, so a
/// kernel reads its parameters at constant offsets (a run-time index copies them into a
/// stack frame).
macro_rules! each_input {
    ($n:expr, |$k:ident| $body:block) => {
        each_input!(@ $n, $k, $body, 0 1 2 3 4 5 6 7)
    };
    (@ $n:expr, $k:ident, $body:block, $($v:literal)*) => {{
        $( if $v < $n { const $k: usize = $v; $body } )*
    }};
}
const _: () = assert!(MAX_INPUTS == 8);

/// `$body` for each constant `$j` of `0..8` below `$n` (lanes).
macro_rules! each_lane {
    ($n:expr, |$j:ident| $body:block) => {
        each_input!(@ $n, $j, $body, 0 1 2 3 4 5 6 7)
    };
}
const _: () = assert!(lanes(1) <= 8 && GENERAL_LANES <= 8 && TWIN_LANES <= 8);

/// `$body` for each constant `$k` of `0..FAST_LOADED` below `$n`.
macro_rules! each_fast_input {
    ($n:expr, |$k:ident| $body:block) => {
        each_input!(@ $n, $k, $body, 0 1 2 3)
    };
}
const _: () = assert!(FAST_LOADED == 4);

/// The group kernels by interpreter: the general one, then the fast paths' in the order
/// of `FAST_PATHS` (the kernels' order).
pub const GROUP_KERNELS: [&str; 7] = [
    "expr_gr_groups",
    "expr_fr_groups",
    "expr_dr_groups",
    "expr_ir_groups",
    "expr_lr_groups",
    "expr_ur_groups",
    "expr_br_groups",
];

/// The group kernel that reduces program `p`'s values: its fast path's where the output's
/// math type is the program's (the accumulator is then that type) and it reads at most
/// [`FAST_LOADED`] inputs, else the general one.
pub fn groups_kernel(p: &Program) -> &'static str {
    let out = Class::of(elem_of(p.out));
    let fast = crate::paths::fast_path(p).filter(|&i| {
        out == Some(crate::paths::FAST_PATHS[i]) && p.n_inputs as usize <= FAST_LOADED
    });
    GROUP_KERNELS[fast.map_or(0, |i| i + 1)]
}

impl Geometry {
    /// The reduction.
    #[inline(always)]
    pub fn fold(&self, class: Class) -> Fold {
        let op = match self.op {
            1 => ReduceOp::Prod,
            2 => ReduceOp::Amin,
            3 => ReduceOp::Amax,
            4 => ReduceOp::Mean,
            _ => ReduceOp::Sum,
        };
        Fold { op, class }
    }

    /// Output `o`'s offset and its `n_in` inputs' base offsets.
    #[inline(always)]
    #[allow(unused_assignments)] // the last dimension's quotient
    pub fn kept_offsets(&self, mut o: u32, n_in: usize) -> (isize, [isize; MAX_INPUTS]) {
        let nkept = self.nkept as usize;
        let mut oo = 0u32;
        let mut io = [0u32; MAX_INPUTS];
        each_dim!(nkept, |D| {
            let cur = if D + 1 == nkept {
                o
            } else {
                let (q, r) = self.kept[D].divmod(o);
                o = q;
                r
            };
            oo = oo.wrapping_add(cur.wrapping_mul(self.kept_strides[0][D]));
            each_input!(n_in, |K| {
                io[K] = io[K].wrapping_add(cur.wrapping_mul(self.kept_strides[1 + K][D]));
            });
        });
        (oo as i32 as isize, io.map(|v| v as i32 as isize))
    }

    /// The multi-index of reduced index `r` over the reduced dimensions (`red[0]`
    /// fastest; unused dimensions 0).
    #[inline(always)]
    #[allow(unused_assignments)] // the last dimension's quotient
    pub fn red_coords(&self, mut r: u32) -> [u32; RED_DIMS] {
        let nred = self.nred as usize;
        let mut c = [0u32; RED_DIMS];
        each_dim!(nred, |D| {
            c[D] = if D + 1 == nred {
                r
            } else {
                let (q, rem) = self.red[D].divmod(r);
                r = q;
                rem
            };
        });
        c
    }

    /// Input `k`'s offset at reduced multi-index `c` from the output's input base.
    #[inline(always)]
    pub fn red_offset_at(&self, c: &[u32; RED_DIMS], k: usize) -> isize {
        let mut off = 0u32;
        each_dim!(self.nred as usize, |D| {
            off = off.wrapping_add(c[D].wrapping_mul(self.red_strides[k][D]));
        });
        off as i32 as isize
    }

    /// Start and length of group `grp`.
    #[inline(always)]
    pub fn group(&self, grp: u32) -> (u32, u32) {
        let lo = grp * self.group_len;
        let left = self.n - lo;
        (
            lo,
            if left < self.group_len {
                left
            } else {
                self.group_len
            },
        )
    }

    /// Slots of a group of `len` elements that receive elements.
    #[inline(always)]
    pub fn used(&self, len: u32, w: u32) -> u32 {
        let u = len.div_ceil(w);
        if u < SLOTS {
            u
        } else {
            SLOTS
        }
    }
}

/// The bits of the `size`-byte element at `base + off * size`, zero-extended.
///
/// # Safety
/// That element lies in a live buffer.
#[inline(always)]
pub unsafe fn load_bits(base: u64, off: isize, size: usize) -> u64 {
    // SAFETY: the caller's.
    unsafe {
        match size {
            1 => *(base as *const u8).offset(off) as u64,
            2 => *(base as *const u16).offset(off) as u64,
            4 => *(base as *const u32).offset(off) as u64,
            _ => *(base as *const u64).offset(off),
        }
    }
}

/// Stores the low `size` bytes of `bits` at `base + off * size`.
///
/// # Safety
/// That element lies in a live buffer that nothing else accesses meanwhile.
#[inline(always)]
pub unsafe fn store_bits(base: u64, off: isize, size: usize, bits: u64) {
    // SAFETY: the caller's.
    unsafe {
        match size {
            1 => *(base as *mut u8).offset(off) = bits as u8,
            2 => *(base as *mut u16).offset(off) = bits as u16,
            4 => *(base as *mut u32).offset(off) = bits as u32,
            _ => *(base as *mut u64).offset(off) = bits,
        }
    }
}

/// The live lanes' `size`-byte elements at `base + off[j] * size`, zero-extended: one
/// branch on the size for every lane.
///
/// # Safety
/// Each live lane's element lies in a live buffer.
#[inline(always)]
pub unsafe fn load_lanes<const L: usize>(
    base: u64,
    off: &[isize; L],
    live: &[bool; L],
    size: usize,
) -> [u64; L] {
    macro_rules! lanes {
        ($t:ty) => {{
            let mut x = [0u64; L];
            each_lane!(L, |J| {
                if live[J] {
                    // SAFETY: the caller's, for a live lane.
                    x[J] = unsafe { *(base as *const $t).offset(off[J]) } as u64;
                }
            });
            x
        }};
    }
    match size {
        1 => lanes!(u8),
        2 => lanes!(u16),
        4 => lanes!(u32),
        _ => lanes!(u64),
    }
}

/// One thread's view of a reduction: the program (read through `fetch`, `word` (the fast
/// path's [`fast_word`]s) and `konst`, from shared memory on the
/// GPU, from the value in the twin) and the operands' addresses.
pub struct Walk<F, W, C> {
    pub fetch: F,
    pub word: W,
    pub konst: C,
    pub len: usize,
    pub n_in: usize,
    pub ins: [ElemType; MAX_INPUTS],
    pub result: Class,
    pub out: ElemType,
    pub fold: Fold,
    /// Elements per slot chunk: [`chunk`] of the output element's size.
    pub w: u32,
}

impl<F: Fn(usize) -> Instr, W: Fn(usize) -> u32, C: Fn(usize) -> u64> Walk<F, W, C> {
    /// The walk of program `p` (its metadata; the instructions come from `fetch` and
    /// `word`).
    #[inline(always)]
    pub fn new(p: &Program, g: &Geometry, fetch: F, word: W, konst: C) -> Self {
        let out = elem_of(p.out);
        let class = Class::of(out).unwrap_or(Class::F32);
        Walk {
            fetch,
            word,
            konst,
            len: p.len as usize,
            n_in: p.n_inputs as usize,
            ins: core::array::from_fn(|k| elem_of(p.inputs[k])),
            result: Class::from_code(p.result).unwrap_or(Class::F32),
            out,
            fold: g.fold(class),
            w: chunk(out.size()),
        }
    }

    /// The values of reduced indices `r[j]` (the live lanes `j`) of the output whose input
    /// bases are `base` (device or host addresses of each input's element at the output's
    /// base offset): the program's result rounded to the output type, in its math type.
    /// Every lane's loads first, then the interpreter over the lanes at once.
    ///
    /// # Safety
    /// The [`Geometry`] invariants; `r[j] < n` for every live lane.
    #[inline(always)]
    pub unsafe fn items<const L: usize>(
        &self,
        g: &Geometry,
        base: &[u64; MAX_INPUTS],
        r: &[u32; L],
        live: &[bool; L],
    ) -> [u64; L] {
        let mut c = [[0u32; RED_DIMS]; L];
        each_lane!(L, |J| {
            c[J] = g.red_coords(r[J]);
        });
        let mut x = [[0u64; L]; MAX_INPUTS];
        each_input!(self.n_in, |K| {
            let size = self.ins[K].size();
            // SAFETY: invariant 3 for the live lanes.
            each_lane!(L, |J| {
                if live[J] {
                    x[K][J] = unsafe { load_bits(base[K], g.red_offset_at(&c[J], K), size) };
                }
            });
        });
        each_input!(self.n_in, |K| {
            each_lane!(L, |J| {
                x[K][J] = widen(self.ins[K], x[K][J]);
            });
        });
        let v = run::<L>(self.len, &self.fetch, &self.konst, &x);
        let mut out = [0u64; L];
        each_lane!(L, |J| {
            out[J] = widen(self.out, narrow(self.result, v[J], self.out));
        });
        out
    }

    /// The values of reduced indices `r[j]` (live lanes) for a program of the fast path of
    /// math type `T` ([`run_fast`]), in `T`: the program's results before the output's
    /// rounding.
    ///
    /// # Safety
    /// As [`items`](Self::items); the program is one of `T`'s fast path (`Program::fast`)
    /// with at most [`FAST_LOADED`] inputs ([`groups_kernel`]).
    #[inline(always)]
    pub unsafe fn values_fast<T: Eval, const L: usize>(
        &self,
        g: &Geometry,
        base: &[u64; MAX_INPUTS],
        r: &[u32; L],
        live: &[bool; L],
    ) -> [T; L] {
        let n_in = self.n_in.min(FAST_LOADED);
        // One reduced dimension (the common case): each offset is one product. Otherwise
        // each input's offsets divide again (registers for every lane's multi-index cost
        // threads per SM).
        let one = g.nred == 1;
        let mut raw = [[0u64; L]; FAST_LOADED];
        each_fast_input!(n_in, |K| {
            let mut off = [0isize; L];
            each_lane!(L, |J| {
                off[J] = if one {
                    r[J].wrapping_mul(g.red_strides[K][0]) as i32 as isize
                } else {
                    g.red_offset_at(&g.red_coords(r[J]), K)
                };
            });
            // SAFETY: invariant 3 for the live lanes.
            raw[K] = unsafe { load_lanes(base[K], &off, live, self.ins[K].size()) };
        });
        let mut x = [[T::dec(0); L]; FAST_LOADED];
        each_fast_input!(n_in, |K| {
            x[K] = raw[K].map(|v| T::dec(widen(self.ins[K], v)));
        });
        // At most FAST_LOADED inputs (`groups_kernel`): none past them.
        let input = |k: usize| {
            if k < FAST_LOADED {
                x[k]
            } else {
                [T::dec(0); L]
            }
        };
        run_fast::<T, L, FAST_LOADED>(self.len, &self.word, &self.konst, input)
    }

    /// Slot `slot`'s value for a program of the fast path of `T` whose output's math type
    /// is `T` ([`groups_kernel`] takes it for no other): [`slot`](Self::slot)'s order and
    /// bits, with typed values (each rounded to the output type only where that is not
    /// `T` itself, a 16-bit float) and the reduction in `T`.
    ///
    /// # Safety
    /// As [`values_fast`](Self::values_fast); `Class::of(out) == T::CLASS`.
    #[inline(always)]
    pub unsafe fn slot_fast<T: Eval + Num<Acc = T>, const L: usize>(
        &self,
        g: &Geometry,
        base: &[u64; MAX_INPUTS],
        (lo, len): (u32, u32),
        slot: u32,
    ) -> Option<T> {
        let exact = self.out == T::CLASS.elem();
        // `slot`'s walk, written out rather than shared: passed to one generic walk as a
        // closure of typed lanes, the f32 kernel's lanes went to an 840-byte stack frame.
        let shift = self.w.trailing_zeros();
        let q =
            |p: u32| ((p >> shift) << (SLOT_BITS + shift)) + (slot << shift) + (p & (self.w - 1));
        let mut acc = None;
        let mut p = 0;
        while q(p) < len {
            let qs: [u32; L] = core::array::from_fn(|j| q(p + j as u32));
            let live = qs.map(|q| q < len);
            // SAFETY: the caller's, for the live lanes (`< len`).
            let mut v = unsafe { self.values_fast::<T, L>(g, base, &qs.map(|q| lo + q), &live) };
            if !exact {
                each_lane!(L, |J| {
                    v[J] = T::dec(widen(self.out, narrow(T::CLASS, v[J].enc(), self.out)));
                });
            }
            each_lane!(L, |J| {
                if live[J] {
                    acc = Some(match acc {
                        None => v[J],
                        Some(a) => combine_typed(self.fold.op, a, v[J]),
                    });
                }
            });
            p += L as u32;
        }
        acc
    }

    /// Slot `slot`'s value in group `(lo, len)` (`None` if it receives no element): its
    /// elements `q` with `(q / w) % SLOTS == slot`, folded in increasing `q`, taken `L` at a
    /// time: `items(r, live)` gives the values of reduced indices `r` ([`items`](Self::items)).
    /// One call of `items` in the loop: each call site inlines the whole interpreter (three
    /// copies ran five times slower, the code no longer fitting the instruction cache), and
    /// `L` elements per call keep `L` loads of each input in flight
    /// ([`slot_fast`](Self::slot_fast) is the fast paths' form).
    #[inline(always)]
    pub fn slot<const L: usize>(
        &self,
        (lo, len): (u32, u32),
        slot: u32,
        items: impl Fn(&[u32; L], &[bool; L]) -> [u64; L],
    ) -> Option<u64> {
        // The `p`-th element of the slot: chunk `p / w` of the slot's (`SLOTS * w` apart),
        // element `p % w` in it (`w` a power of two).
        let shift = self.w.trailing_zeros();
        let q =
            |p: u32| ((p >> shift) << (SLOT_BITS + shift)) + (slot << shift) + (p & (self.w - 1));
        let mut acc = None;
        let mut p = 0;
        while q(p) < len {
            let qs: [u32; L] = core::array::from_fn(|j| q(p + j as u32));
            let live = qs.map(|q| q < len);
            let v = items(&qs.map(|q| lo + q), &live);
            // Lanes by constant index (a loop the compiler leaves rolled indexes `v` at run
            // time, a stack frame).
            each_lane!(L, |J| {
                if live[J] {
                    acc = Some(match acc {
                        None => v[J],
                        Some(a) => self.fold.combine(a, v[J]),
                    });
                }
            });
            p += L as u32;
        }
        acc
    }

    /// The output's bits from the tree over its groups' values (`acc`), or the empty
    /// value for a reduction of nothing.
    #[inline(always)]
    pub fn output(&self, g: &Geometry, acc: u64) -> u64 {
        if g.n == 0 {
            g.empty
        } else {
            narrow(self.fold.class, self.fold.finish(acc, g.n), self.out)
        }
    }
}

/// The input bases of output `o`: each input's address advanced by its kept offset.
#[inline(always)]
pub fn input_bases(
    ptrs: &[u64],
    io: &[isize; MAX_INPUTS],
    ins: &[ElemType; MAX_INPUTS],
    n_in: usize,
) -> [u64; MAX_INPUTS] {
    let mut b = [0u64; MAX_INPUTS];
    each_input!(n_in, |K| {
        b[K] = ptrs[K + 1].wrapping_add((io[K] as i64).wrapping_mul(ins[K].size() as i64) as u64);
    });
    b
}

/// The CPU twin's value of group `grp` of output `o` (`None` for an empty group): the
/// slots' values, then the halving tree over them.
///
/// # Safety
/// The [`Geometry`] invariants for the host addresses `ptrs` (output first).
pub unsafe fn group_value(
    p: &Program,
    g: &Geometry,
    ptrs: &[u64; MAX_INPUTS + 1],
    o: u32,
    grp: u32,
) -> Option<u64> {
    let walk = Walk::new(
        p,
        g,
        |pc| p.instrs[pc % p.instrs.len()],
        |pc| fast_word(p.instrs[pc % p.instrs.len()]),
        |c| p.consts[c % p.consts.len()],
    );
    let (_, io) = g.kept_offsets(o, walk.n_in);
    let base = input_bases(ptrs, &io, &walk.ins, walk.n_in);
    let (lo, len) = g.group(grp);
    let used = g.used(len, walk.w) as usize;
    let mut slots = [0u64; SLOTS as usize];
    for (s, v) in slots[..used].iter_mut().enumerate() {
        // SAFETY: the caller's; slot `s < used` receives elements.
        // SAFETY (the items): the caller's, for live indices of this group (`< n`).
        *v = walk
            .slot::<TWIN_LANES>((lo, len), s as u32, |r, live| unsafe {
                walk.items(g, &base, r, live)
            })
            .unwrap_or(0);
    }
    tree(&walk.fold, &mut slots[..used])
}

/// The CPU twin's output `o` from its groups' values (`accs`, `g.groups` of them, none
/// for a reduction of nothing): its offset and bits.
pub fn output_bits(p: &Program, g: &Geometry, o: u32, accs: &mut [u64]) -> (isize, u64) {
    let walk = Walk::new(
        p,
        g,
        |pc| p.instrs[pc % p.instrs.len()],
        |pc| fast_word(p.instrs[pc % p.instrs.len()]),
        |c| p.consts[c % p.consts.len()],
    );
    let (oo, _) = g.kept_offsets(o, 0);
    let acc = tree(&walk.fold, accs).unwrap_or(0);
    (oo, walk.output(g, acc))
}
