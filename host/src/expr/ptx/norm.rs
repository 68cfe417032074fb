//! Tier 1's normalisation row kernels: every stage of a normalisation program
//! (`expr::norm`) and its result in one kernel, a block of [`SLOTS`] threads a row.
//!
//! Each stage folds its program's values over the row in the library's reduction order
//! (the one [`reduce`](super::reduce)'s group kernel and the CPU twin follow): thread `t`
//! is slot `t`, folding chunks `t, t + SLOTS, …` of `w` consecutive elements of each group
//! in increasing element order (its first element starting the accumulator), then the
//! halving tree over the group's used slots through shared memory, then (rows of more than
//! one group) the tree over the groups' values; `mean` divides by the row length. The
//! stage's value is then every thread's, and the later stages and the result read it as
//! an input. So the kernel gives the bits of the CPU twin's composition (each stage a
//! reduction into a temporary of its accumulator type, then the result).
//!
//! Rows of few chunks a slot ([`NormShape::cached`]) are read once: the rounds unrolled,
//! the inputs' values kept in registers from the first stage that reads them to the
//! result. Longer rows loop over their rounds and groups, each stage reading the row again
//! (mostly from L2).

use super::emit::Gen;
use super::kernel::{consts, text};
use super::types::{Ft, F32T, F64T, V};
use gpu_kernels::elem::ElemType;
use std::collections::HashMap;
use std::fmt::Write;
use strided_apply_expr::ir::Program;
use strided_apply_expr::reduce::{ReduceOp, SLOTS};

/// Most stages of a program (`expr::norm::MAX_STAGES`): the broadcast area's values a row.
const MAX_STAGES: u32 = 8;

/// Where a part's input comes from: kernel operand `k` (`1..`: the call's inputs; 0 is the
/// output) or stage `j`'s value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Src {
    Operand(u8),
    Stage(u8),
}

/// The layout a row kernel is generated for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct NormShape {
    /// Operands, the output first.
    pub ops: u8,
    /// Kept dimensions (rows), 1 to 6.
    pub nkept: u8,
    /// Bit `k`: operand `k` has row stride 1, every `slots × w` chunks aligned to its
    /// bytes (or 16), and the row length is a multiple of them: read (written) as vectors.
    pub unit: u16,
    /// Bit `k`: input `k` has row stride 0: read once a row.
    pub bcast: u16,
    /// Bit `k`: input `k` is one row shared by every row (kept strides 0): read again at
    /// each use (from L1) rather than kept in registers.
    pub shared: u16,
    /// Chunk rounds a slot takes (one group), unrolled with the inputs' values in
    /// registers; 0: loops over rounds and groups, each stage reading the row.
    pub cached: u8,
    /// Whether the result has the inputs' shape (else one value a row, thread 0's).
    pub rowwise: bool,
    /// `f64` accumulators (chunks of 2), else `f32` (chunks of 4).
    pub wide: bool,
    /// Threads a row (a power of two, at most [`SLOTS`]); a block of [`SLOTS`] threads
    /// holds `SLOTS / threads` rows in the read-once form, one otherwise.
    pub threads: u16,
    /// Adjacent slots a thread holds (1, 2 or 4): one vector of `adjacent × w` elements.
    pub adjacent: u8,
    /// The slots that may receive elements (a power of two, at most [`SLOTS`], at least
    /// `threads × adjacent`): thread `t` holds slots `t × adjacent + k + threads × adjacent
    /// × j`, `k < adjacent`, `j < span / (threads × adjacent)`.
    pub span: u16,
}

impl NormShape {
    /// Rows a block.
    pub(crate) fn rows_per_block(&self) -> u32 {
        if self.cached != 0 {
            (SLOTS / self.threads as u32).max(1)
        } else {
            1
        }
    }

    /// Threads a block.
    pub(crate) fn block(&self) -> u32 {
        self.threads as u32 * self.rows_per_block()
    }
}

/// A part of the program: a stage (`op`: its reduction) or the result (`None`), its
/// program and where each of the program's inputs comes from.
pub(crate) struct Part<'a> {
    pub op: Option<ReduceOp>,
    pub p: &'a Program,
    pub srcs: &'a [Src],
}

/// Rounds (vectors) a trip of the looping form's loops takes: their loads issued together
/// (one 16-byte load a thread in flight left rows of 65 536 elements and more latency
/// bound), folded in round order.
const UNROLL: u32 = 4;

/// Bytes of the shared memory of the groups' values (at most `MAX_GROUPS`).
const GROUP_BYTES: u32 = 8 * gpu_kernels::reduce::MAX_GROUPS;

/// The state of one kernel being written.
struct Row<'a> {
    shape: NormShape,
    types: &'a [ElemType],
    ft: &'static Ft,
    w: u32,
    /// Threads a row, adjacent slots a thread, slot sets a thread (`span / (threads ×
    /// adjacent)`).
    t: u32,
    k: u32,
    j: u32,
    /// The thread's index in its row, and `tl × adjacent`.
    tl: String,
    tk: String,
    n: String,
    /// Shared-memory addresses of this row's tree area and broadcast area.
    red: String,
    bc: String,
    /// Each operand's address of the row's element 0, and its row stride (elements).
    addr: Vec<String>,
    rs: Vec<String>,
    /// The values of the inputs of `bcast`.
    once: HashMap<usize, V>,
    /// Read-once form: each (round, slot set)'s vector start and lane predicates, and the
    /// inputs' values.
    rounds: HashMap<(u32, u32), (String, Vec<String>)>,
    cache: HashMap<(u32, u32, usize), Vec<V>>,
}

impl Row<'_> {
    /// Elements a thread's vector: `adjacent` chunks.
    fn vec(&self) -> u32 {
        self.k * self.w
    }

    /// `q0`'s lane predicates (`q0 + i < n`, `i <` [`vec`](Self::vec)).
    fn lanes(&self, g: &mut Gen, q0: &str) -> Vec<String> {
        (0..self.vec())
            .map(|i| {
                let (q, p) = (g.r(), g.p());
                emit!(g, "add.u32 {q}, {q0}, {i};");
                emit!(g, "setp.lt.u32 {p}, {q}, {};", self.n);
                p
            })
            .collect()
    }

    /// The start of the vector of slot set `j` in round `r` (a register) of the group at `lo`: element
    /// `lo + (r × SLOTS + tl × adjacent + threads × adjacent × j) × w`.
    fn start(&self, g: &mut Gen, lo: Option<&str>, r: &str, j: u32) -> String {
        let q0 = g.r();
        emit!(g, "mad.lo.u32 {q0}, {r}, {SLOTS}, {};", self.tk);
        if j > 0 {
            emit!(g, "add.u32 {q0}, {q0}, {};", self.t * self.k * j);
        }
        match lo {
            Some(lo) => emit!(g, "mad.lo.u32 {q0}, {q0}, {}, {lo};", self.w),
            None => emit!(g, "mul.lo.u32 {q0}, {q0}, {};", self.w),
        }
        q0
    }

    /// Read-once form: round `r`'s slot set `j`'s vector start and lane predicates.
    fn round(&mut self, g: &mut Gen, r: u32, j: u32) -> (String, Vec<String>) {
        if let Some(x) = self.rounds.get(&(r, j)) {
            return x.clone();
        }
        let rr = g.r();
        emit!(g, "mov.u32 {rr}, {r};");
        let q0 = self.start(g, None, &rr, j);
        let l = self.lanes(g, &q0);
        self.rounds.insert((r, j), (q0.clone(), l.clone()));
        (q0, l)
    }

    /// Operand `k`'s values of the vector at `q0` (lanes `lanes`).
    fn load(&mut self, g: &mut Gen, k: usize, q0: &str, lanes: &[String]) -> Vec<V> {
        let n = self.vec() as usize;
        if let Some(v) = self.once.get(&k) {
            return vec![v.clone(); n];
        }
        let e = self.types[k];
        if self.shape.unit >> k & 1 != 0 {
            let a = g.rd();
            emit!(g, "mul.wide.u32 {a}, {q0}, {};", e.size());
            emit!(g, "add.s64 {a}, {a}, {};", self.addr[k]);
            return g.guarded(&lanes[0], |g| g.load(e, &a, n));
        }
        (0..n)
            .map(|i| {
                let a = self.element(g, k, q0, i);
                g.guarded(&lanes[i], |g| g.load(e, &a, 1)).remove(0)
            })
            .collect()
    }

    /// Operand `k`'s address of element `q0 + i` of the row.
    fn element(&self, g: &mut Gen, k: usize, q0: &str, i: usize) -> String {
        let (q, off, a) = (g.r(), g.r(), g.rd());
        emit!(g, "add.u32 {q}, {q0}, {i};");
        emit!(g, "mul.lo.s32 {off}, {q}, {};", self.rs[k]);
        emit!(g, "mul.wide.s32 {a}, {off}, {};", self.types[k].size());
        emit!(g, "add.s64 {a}, {a}, {};", self.addr[k]);
        a
    }

    /// The inputs of `part` on the vector at `q0`, by lane: [`vec`](Self::vec) lists of
    /// the program's inputs (`at`: the read-once form's round and slot set, whose loads
    /// are kept, but for the inputs of `shared`).
    fn inputs(
        &mut self,
        g: &mut Gen,
        part: &Part<'_>,
        stages: &[V],
        q0: &str,
        lanes: &[String],
        at: Option<(u32, u32)>,
    ) -> Vec<Vec<V>> {
        let n = self.vec() as usize;
        let shared = self.shape.shared;
        let per_input: Vec<Vec<V>> = part
            .srcs
            .iter()
            .map(|s| match *s {
                Src::Stage(j) => vec![stages[j as usize].clone(); n],
                Src::Operand(k) => {
                    let k = k as usize;
                    match at {
                        Some((r, j)) if shared >> k & 1 == 0 => {
                            if let Some(v) = self.cache.get(&(r, j, k)) {
                                return v.clone();
                            }
                            let v = self.load(g, k, q0, lanes);
                            self.cache.insert((r, j, k), v.clone());
                            v
                        }
                        _ => self.load(g, k, q0, lanes),
                    }
                }
            })
            .collect();
        (0..n)
            .map(|i| per_input.iter().map(|v| v[i].clone()).collect())
            .collect()
    }

    /// Folds `part`'s values of the vector at `q0` into `accs` (chunk `c` of the vector
    /// into `accs[c]`); `first`: the predicate of the slots' first chunks (`None`: never),
    /// `"1"`: always.
    #[allow(clippy::too_many_arguments)]
    fn fold(
        &mut self,
        g: &mut Gen,
        part: &Part<'_>,
        consts: &[Option<V>],
        stages: &[V],
        accs: &[String],
        q0: &str,
        lanes: &[String],
        at: Option<(u32, u32)>,
        first: Option<&str>,
    ) {
        let ins = self.inputs(g, part, stages, q0, lanes, at);
        self.fold_values(g, part, consts, accs, lanes, &ins, first);
    }

    /// [`fold`](Self::fold) of the vector's inputs `ins` (by lane, as
    /// [`inputs`](Self::inputs) gives them).
    #[allow(clippy::too_many_arguments)]
    fn fold_values(
        &self,
        g: &mut Gen,
        part: &Part<'_>,
        consts: &[Option<V>],
        accs: &[String],
        lanes: &[String],
        ins: &[Vec<V>],
        first: Option<&str>,
    ) {
        let op = part.op.unwrap_or(ReduceOp::Sum);
        let ft = self.ft;
        let w = self.w as usize;
        for (i, lane) in ins.iter().enumerate() {
            let acc = &accs[i / w];
            let v = g.program(part.p, lane, consts);
            let x = g.float_of(&v, ft);
            let c = g.combine(op, ft, acc, &x);
            let t = match (i % w, first) {
                (0, Some("1")) => x,
                (0, Some(f)) => {
                    let s = g.fl(ft);
                    emit!(g, "selp.{} {s}, {x}, {c}, {f};", ft.t);
                    s
                }
                _ => c,
            };
            emit!(g, "@{} mov.{} {acc}, {t};", lanes[i], ft.t);
        }
    }

    /// `acc = combine(acc, other)` where slot `l + s < used` (`l`: `acc`'s slot).
    #[allow(clippy::too_many_arguments)]
    fn pair(
        &self,
        g: &mut Gen,
        op: ReduceOp,
        acc: &str,
        other: &str,
        slot: &str,
        s: u32,
        used: &str,
        also: Option<&str>,
    ) {
        let (hi, p) = (g.r(), g.p());
        emit!(g, "add.u32 {hi}, {slot}, {s};");
        match also {
            Some(a) => emit!(g, "setp.lt.and.u32 {p}, {hi}, {used}, {a};"),
            None => emit!(g, "setp.lt.u32 {p}, {hi}, {used};"),
        }
        let m = g.combine(op, self.ft, acc, other);
        emit!(g, "@{p} mov.{} {acc}, {m};", self.ft.t);
    }

    /// The halving tree over the first `used` slots of the row (`accs[j][k]`: the thread's
    /// slot `tl × adjacent + k + threads × adjacent × j`), level by level from `span / 2`
    /// (each level `s` combines slot `l < s` with `l + s` where `l + s < used`, as the
    /// library's tree): the levels within a thread's slot sets in registers, the levels
    /// between threads through shared memory (32 threads apart or more, a barrier each)
    /// and warp shuffles, the levels within a thread's adjacent slots in registers. Slot
    /// 0's value, every thread of the row's; `stage`: the broadcast area's index.
    fn tree(
        &self,
        g: &mut Gen,
        op: ReduceOp,
        accs: &[Vec<String>],
        used: &str,
        stage: u32,
    ) -> String {
        let ft = self.ft;
        let t = ft.t;
        let (tn, k) = (self.t, self.k);
        let tk = &self.tk;
        let acc = &accs[0];
        let mut stored = false;
        for level in levels(tn, k, self.j) {
            match level {
                Level::Sets { s } => {
                    let step = s / (tn * k);
                    for j in 0..step {
                        for kk in 0..k {
                            let slot = g.r();
                            emit!(g, "add.u32 {slot}, {tk}, {};", kk + tn * k * j);
                            let other = accs[(j + step) as usize][kk as usize].clone();
                            let a = &accs[j as usize][kk as usize];
                            self.pair(g, op, a, &other, &slot, s, used, None);
                        }
                    }
                }
                Level::Threads { d, shared: true } => {
                    if !stored {
                        for (kk, a) in acc.iter().enumerate() {
                            let at = g.r();
                            emit!(g, "mad.lo.u32 {at}, {tk}, 8, {};", self.red);
                            emit!(g, "st.shared.{t} [{at}+{}], {a};", 8 * kk);
                        }
                        stored = true;
                    }
                    emit!(g, "bar.sync 0;");
                    let lt = g.p();
                    emit!(g, "setp.lt.u32 {lt}, {}, {d};", self.tl);
                    let skip = g.label();
                    emit!(g, "@!{lt} bra {skip};");
                    let (at, bat) = (g.r(), g.r());
                    emit!(g, "mad.lo.u32 {at}, {tk}, 8, {};", self.red);
                    emit!(g, "add.u32 {bat}, {at}, {};", 8 * d * k);
                    for (kk, a) in acc.iter().enumerate() {
                        let (slot, b) = (g.r(), g.fl(ft));
                        emit!(g, "add.u32 {slot}, {tk}, {kk};");
                        emit!(g, "ld.shared.{t} {b}, [{bat}+{}];", 8 * kk);
                        self.pair(g, op, a, &b, &slot, d * k, used, None);
                        emit!(g, "st.shared.{t} [{at}+{}], {a};", 8 * kk);
                    }
                    emit!(g, "{skip}:");
                }
                Level::Threads { d, shared: false } => {
                    let lt = g.p();
                    emit!(g, "setp.lt.u32 {lt}, {}, {d};", self.tl);
                    for (kk, a) in acc.iter().enumerate() {
                        let b = self.shfl_down(g, a, d);
                        let slot = g.r();
                        emit!(g, "add.u32 {slot}, {tk}, {kk};");
                        self.pair(g, op, a, &b, &slot, d * k, used, Some(&lt));
                    }
                }
                Level::Adjacent { s } => {
                    for kk in 0..s {
                        let slot = g.r();
                        emit!(g, "add.u32 {slot}, {tk}, {kk};");
                        let other = acc[(kk + s) as usize].clone();
                        self.pair(g, op, &acc[kk as usize], &other, &slot, s, used, None);
                    }
                }
            }
        }
        // Thread 0's value to every thread of the row.
        let v = g.fl(ft);
        if tn <= 32 {
            let (lane, src) = (g.r(), g.r());
            emit!(g, "mov.u32 {lane}, %laneid;");
            emit!(g, "and.b32 {src}, {lane}, {};", !(tn - 1) & 31);
            self.shfl(g, "idx", &acc[0], &src, &v);
        } else {
            let (z, at) = (g.p(), g.r());
            emit!(g, "setp.eq.u32 {z}, {}, 0;", self.tl);
            emit!(g, "add.u32 {at}, {}, {};", self.bc, 8 * stage);
            emit!(g, "@{z} st.shared.{t} [{at}], {};", acc[0]);
            emit!(g, "bar.sync 0;");
            emit!(g, "ld.shared.{t} {v}, [{at}];");
        }
        v
    }

    /// `x` of the lane `d` above (`shfl.sync.down`; the top lanes' own).
    fn shfl_down(&self, g: &mut Gen, x: &str, d: u32) -> String {
        let v = g.fl(self.ft);
        self.shfl(g, "down", x, &d.to_string(), &v);
        v
    }

    /// `shfl.sync.{mode}` of `x` by `b` into `v` (two words for `f64`).
    fn shfl(&self, g: &mut Gen, mode: &str, x: &str, b: &str, v: &str) {
        let c = "0x1f";
        if self.ft.f64 {
            let (lo, hi, lo2, hi2) = (g.r(), g.r(), g.r(), g.r());
            emit!(g, "mov.b64 {{{lo}, {hi}}}, {x};");
            emit!(g, "shfl.sync.{mode}.b32 {lo2}, {lo}, {b}, {c}, 0xffffffff;");
            emit!(g, "shfl.sync.{mode}.b32 {hi2}, {hi}, {b}, {c}, 0xffffffff;");
            emit!(g, "mov.b64 {v}, {{{lo2}, {hi2}}};");
        } else {
            emit!(g, "shfl.sync.{mode}.b32 {v}, {x}, {b}, {c}, 0xffffffff;");
        }
    }

    /// `min(ceil(len / w), SLOTS)`: the used slots of a group of `len` elements.
    fn used(&self, g: &mut Gen, len: &str) -> String {
        let u = g.r();
        emit!(g, "add.u32 {u}, {len}, {};", self.w - 1);
        emit!(g, "shr.u32 {u}, {u}, {};", self.w.trailing_zeros());
        emit!(g, "min.u32 {u}, {u}, {SLOTS};");
        u
    }

    /// Fresh accumulators, `[j][k]`, zero.
    fn accs(&self, g: &mut Gen) -> Vec<Vec<String>> {
        (0..self.j)
            .map(|_| {
                (0..self.k)
                    .map(|_| {
                        let a = g.fl(self.ft);
                        emit!(g, "mov.{} {a}, {};", self.ft.t, self.ft.zero);
                        a
                    })
                    .collect()
            })
            .collect()
    }
}

/// One level of the row kernel's halving tree as the kernel runs it (level `s`: slot
/// `l < s` takes slot `l + s` where `l + s < used`, as the library's tree), for a thread
/// `tl` holding slots `tl × adjacent + k + threads × adjacent × j`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Level {
    /// Within each thread: slot set `j` takes set `j + s / (threads × adjacent)`.
    Sets { s: u32 },
    /// Thread `tl < d` takes thread `tl + d`'s slots (level `d × adjacent`): through
    /// shared memory with a barrier (`shared`: `d >= 32`, across warps), else a shuffle.
    Threads { d: u32, shared: bool },
    /// Within thread 0 (whose slot 0 is the tree's): adjacent slot `k < s` takes `k + s`.
    Adjacent { s: u32 },
}

/// The levels of the tree over `threads × adjacent × sets` slots, from the top: every
/// level of the library's tree over that many slots, once, in its order.
pub(crate) fn levels(threads: u32, adjacent: u32, sets: u32) -> Vec<Level> {
    let mut v = Vec::new();
    let mut s = threads * adjacent * sets / 2;
    while s >= threads * adjacent {
        v.push(Level::Sets { s });
        s /= 2;
    }
    let mut d = threads / 2;
    while d >= 1 {
        v.push(Level::Threads { d, shared: d >= 32 });
        d /= 2;
    }
    let mut s = adjacent / 2;
    while s >= 1 {
        v.push(Level::Adjacent { s });
        s /= 2;
    }
    v
}

/// The row kernel of `parts` (the stages in order, then the result) for `shape`, over
/// operands of `types` (the output first). Parameters, in order: the operands' addresses
/// (`.u64`, output first, each at its base element), each part's constants (`kc{j}`,
/// `.b8 [128]`), then `.u32` each: `rows`, `n` (the row length, at least 1),
/// `group_len`, `groups` (the groups that hold elements), `rounds` (chunk rounds a slot
/// of a group), the divisions by kept dimensions `0..nkept-1` (`kept{d}_*`), each
/// operand's kept strides (`.s32`, `ks{k}_{d}`) and row stride (`.s32`, `rs{k}`). Blocks
/// of [`NormShape::block`] threads, [`NormShape::rows_per_block`] rows each.
pub(crate) fn module(
    parts: &[Part<'_>],
    shape: NormShape,
    types: &[ElemType],
    sm: u32,
    lib: &str,
) -> String {
    let mut g = Gen {
        sm,
        lib: lib.to_string(),
        block: Some((shape.block(), 1)),
        ..Gen::default()
    };
    let ops = shape.ops as usize;
    let nkept = (shape.nkept as usize).clamp(1, 6);
    let ft = if shape.wide { &F64T } else { &F32T };
    let w: u32 = if shape.wide { 2 } else { 4 };
    let (tn, k) = (shape.threads.max(1) as u32, shape.adjacent.max(1) as u32);
    let j = (shape.span as u32 / (tn * k)).max(1);
    let per_block = shape.rows_per_block();
    let mut params: Vec<String> = (0..ops).map(|k| format!(".param .u64 ptr{k}")).collect();
    params.extend((0..parts.len()).map(|j| format!(".param .align 8 .b8 kc{j}[128]")));
    params
        .extend(["rows", "n", "group_len", "groups", "rounds"].map(|s| format!(".param .u32 {s}")));
    for d in 0..nkept - 1 {
        params.extend(["d", "magic", "shift"].map(|s| format!(".param .u32 kept{d}_{s}")));
    }
    for k in 0..ops {
        params.extend((0..nkept).map(|d| format!(".param .s32 ks{k}_{d}")));
    }
    params.extend((0..ops).map(|k| format!(".param .s32 rs{k}")));

    let base: Vec<String> = (0..ops)
        .map(|k| {
            let r = g.rd();
            emit!(g, "ld.param.u64 {r}, [ptr{k}];");
            emit!(g, "cvta.to.global.u64 {r}, {r};");
            r
        })
        .collect();
    let kcs: Vec<Vec<Option<V>>> = parts
        .iter()
        .enumerate()
        .map(|(j, part)| consts(&mut g, part.p, &format!("kc{j}")))
        .collect();
    emit!(g, ".shared .align 8 .b8 nrm_red[{}];", 8 * SLOTS * k);
    emit!(
        g,
        ".shared .align 8 .b8 nrm_bc[{}];",
        8 * MAX_STAGES * per_block
    );
    if shape.cached == 0 {
        emit!(g, ".shared .align 8 .b8 nrm_grp[{GROUP_BYTES}];");
    }
    let [tid, tl, seg, row, rows, n, glen, groups, rounds] = [0; 9].map(|_| g.r());
    emit!(g, "mov.u32 {tid}, %tid.x;");
    for (reg, name) in [
        (&rows, "rows"),
        (&n, "n"),
        (&glen, "group_len"),
        (&groups, "groups"),
        (&rounds, "rounds"),
    ] {
        emit!(g, "ld.param.u32 {reg}, [{name}];");
    }
    // The thread's row: `seg` of the block's; rows past the end compute the last row's
    // values and store nothing (every thread takes part in the barriers).
    emit!(g, "and.b32 {tl}, {tid}, {};", tn - 1);
    emit!(g, "shr.u32 {seg}, {tid}, {};", tn.trailing_zeros());
    emit!(g, "mov.u32 {row}, %ctaid.x;");
    emit!(g, "mad.lo.u32 {row}, {row}, {per_block}, {seg};");
    let (live, last) = (g.p(), g.r());
    emit!(g, "setp.lt.u32 {live}, {row}, {rows};");
    emit!(g, "sub.u32 {last}, {rows}, 1;");
    emit!(g, "min.u32 {row}, {row}, {last};");
    let tk = g.r();
    emit!(g, "mul.lo.u32 {tk}, {tl}, {k};");
    let (red, bc) = (g.r(), g.r());
    emit!(g, "mov.u32 {red}, nrm_red;");
    emit!(g, "mad.lo.u32 {red}, {seg}, {}, {red};", 8 * tn * k);
    emit!(g, "mov.u32 {bc}, nrm_bc;");
    emit!(g, "mad.lo.u32 {bc}, {seg}, {}, {bc};", 8 * MAX_STAGES);
    let divs: Vec<[String; 3]> = (0..nkept - 1)
        .map(|d| g.div_params(&format!("kept{d}")))
        .collect();
    let strides = g.stride_params("ks", ops, nkept);
    let offs = g.offsets(&row, &divs, &strides);
    let mut addr = Vec::new();
    let mut rs = Vec::new();
    for k in 0..ops {
        let (a, r) = (g.rd(), g.r());
        emit!(g, "mul.wide.s32 {a}, {}, {};", offs[k], types[k].size());
        emit!(g, "add.s64 {a}, {a}, {};", base[k]);
        emit!(g, "ld.param.s32 {r}, [rs{k}];");
        addr.push(a);
        rs.push(r);
    }
    let mut st = Row {
        shape,
        types,
        ft,
        w,
        t: tn,
        k,
        j,
        tl: tl.clone(),
        tk,
        n: n.clone(),
        red,
        bc,
        addr,
        rs,
        once: HashMap::new(),
        rounds: HashMap::new(),
        cache: HashMap::new(),
    };
    // The row-constant inputs, read once (the row has an element 0: `n >= 1`).
    for k in 1..ops {
        if shape.bcast >> k & 1 != 0 {
            let v = g.load(types[k], &st.addr[k], 1).remove(0);
            st.once.insert(k, v);
        }
    }

    let t = ft.t;
    let mut stages: Vec<V> = Vec::new();
    let (result, stage_parts) = match parts.split_last() {
        Some(x) => x,
        None => return text(&g, &params, 0),
    };
    for (si, part) in stage_parts.iter().enumerate() {
        let op = part.op.unwrap_or(ReduceOp::Sum);
        let accs = st.accs(&mut g);
        let value = if shape.cached != 0 {
            for r in 0..shape.cached as u32 {
                for jj in 0..j {
                    let (q0, lanes) = st.round(&mut g, r, jj);
                    let first = (r == 0).then_some("1");
                    st.fold(
                        &mut g,
                        part,
                        &kcs[si],
                        &stages,
                        &accs[jj as usize],
                        &q0,
                        &lanes,
                        Some((r, jj)),
                        first,
                    );
                }
            }
            let used = st.used(&mut g, &n);
            st.tree(&mut g, op, &accs, &used, si as u32)
        } else {
            // Groups, and rounds of each (one slot set a thread).
            let (gi, m, lo, len) = (g.r(), g.r(), g.r(), g.r());
            let (gtop, mtop) = (g.label(), g.label());
            let (first, more) = (g.p(), g.p());
            let value = g.fl(ft);
            emit!(g, "mov.u32 {gi}, 0;");
            emit!(g, "{gtop}:");
            emit!(g, "mul.lo.u32 {lo}, {gi}, {glen};");
            emit!(g, "sub.u32 {len}, {n}, {lo};");
            emit!(g, "min.u32 {len}, {len}, {glen};");
            emit!(g, "mov.u32 {m}, 0;");
            emit!(g, "{mtop}:");
            emit!(g, "setp.eq.u32 {first}, {m}, 0;");
            // UNROLL rounds a trip: every vector's loads, then the folds in round order.
            let mut pending = Vec::new();
            for u in 0..UNROLL {
                let (mu, inr) = (g.r(), g.p());
                emit!(g, "add.u32 {mu}, {m}, {u};");
                emit!(g, "setp.lt.u32 {inr}, {mu}, {rounds};");
                let q0 = st.start(&mut g, Some(&lo), &mu, 0);
                let lanes: Vec<String> = st
                    .lanes(&mut g, &q0)
                    .iter()
                    .map(|l| {
                        let p = g.p();
                        emit!(g, "and.pred {p}, {l}, {inr};");
                        p
                    })
                    .collect();
                let ins = st.inputs(&mut g, part, &stages, &q0, &lanes, None);
                pending.push((lanes, ins));
            }
            for (u, (lanes, ins)) in pending.iter().enumerate() {
                let f = (u == 0).then_some(first.as_str());
                st.fold_values(&mut g, part, &kcs[si], &accs[0], lanes, ins, f);
            }
            emit!(g, "add.u32 {m}, {m}, {UNROLL};");
            emit!(g, "setp.lt.u32 {more}, {m}, {rounds};");
            emit!(g, "@{more} bra {mtop};");
            let used = st.used(&mut g, &len);
            let v = st.tree(&mut g, op, &accs, &used, si as u32);
            emit!(g, "mov.{t} {value}, {v};");
            // Thread 0 keeps the group's value.
            let (zero, at, gb) = (g.p(), g.r(), g.r());
            emit!(g, "setp.eq.u32 {zero}, {tl}, 0;");
            emit!(g, "mov.u32 {gb}, nrm_grp;");
            emit!(g, "mad.lo.u32 {at}, {gi}, 8, {gb};");
            emit!(g, "@{zero} st.shared.{t} [{at}], {value};");
            // The next group's tree reuses the tree and broadcast areas.
            emit!(g, "bar.sync 0;");
            emit!(g, "add.u32 {gi}, {gi}, 1;");
            emit!(g, "setp.lt.u32 {more}, {gi}, {groups};");
            emit!(g, "@{more} bra {gtop};");
            // More than one group: thread 0's tree over their values.
            let (single, skip_tree) = (g.p(), g.label());
            emit!(g, "setp.le.u32 {single}, {groups}, 1;");
            emit!(g, "@{single} bra {skip_tree};");
            let not0 = g.p();
            let after = g.label();
            emit!(g, "setp.ne.u32 {not0}, {tl}, 0;");
            emit!(g, "@{not0} bra {after};");
            let (s, u1, c, l, hi, lat, hat) = (g.r(), g.r(), g.r(), g.r(), g.r(), g.r(), g.r());
            emit!(g, "sub.u32 {u1}, {groups}, 1;");
            emit!(g, "clz.b32 {c}, {u1};");
            emit!(g, "sub.u32 {c}, 31, {c};");
            emit!(g, "shl.b32 {s}, 1, {c};");
            let (ttop, ltop, lend, tend) = (g.label(), g.label(), g.label(), g.label());
            let p1 = g.p();
            emit!(g, "{ttop}:");
            emit!(g, "setp.eq.u32 {p1}, {s}, 0;");
            emit!(g, "@{p1} bra {tend};");
            emit!(g, "mov.u32 {l}, 0;");
            emit!(g, "{ltop}:");
            emit!(g, "add.u32 {hi}, {l}, {s};");
            emit!(g, "setp.ge.u32 {p1}, {l}, {s};");
            emit!(g, "setp.ge.or.u32 {p1}, {hi}, {groups}, {p1};");
            emit!(g, "@{p1} bra {lend};");
            let (a, b) = (g.fl(ft), g.fl(ft));
            emit!(g, "mad.lo.u32 {lat}, {l}, 8, {gb};");
            emit!(g, "mad.lo.u32 {hat}, {hi}, 8, {gb};");
            emit!(g, "ld.shared.{t} {a}, [{lat}];");
            emit!(g, "ld.shared.{t} {b}, [{hat}];");
            let cm = g.combine(op, ft, &a, &b);
            emit!(g, "st.shared.{t} [{lat}], {cm};");
            emit!(g, "add.u32 {l}, {l}, 1;");
            emit!(g, "bra {ltop};");
            emit!(g, "{lend}:");
            emit!(g, "shr.u32 {s}, {s}, 1;");
            emit!(g, "bra {ttop};");
            emit!(g, "{tend}:");
            emit!(g, "{after}:");
            emit!(g, "bar.sync 0;");
            emit!(g, "ld.shared.{t} {value}, [nrm_grp];");
            emit!(g, "bar.sync 0;");
            emit!(g, "{skip_tree}:");
            value
        };
        let value = if op == ReduceOp::Mean {
            let (nf, mv) = (g.fl(ft), g.fl(ft));
            emit!(g, "cvt.rn.{t}.u32 {nf}, {n};");
            emit!(g, "div.rn.{t} {mv}, {value}, {nf};");
            mv
        } else {
            value
        };
        stages.push(if ft.f64 { V::D(value) } else { V::F(value) });
    }

    // The result.
    let rk = &kcs[parts.len() - 1];
    let out = types[0];
    if !shape.rowwise {
        let skip = g.label();
        let not0 = g.p();
        emit!(g, "setp.ne.or.u32 {not0}, {tl}, 0, !{live};");
        emit!(g, "@{not0} bra {skip};");
        let ins: Vec<V> = result
            .srcs
            .iter()
            .map(|s| match *s {
                Src::Stage(j) => stages[j as usize].clone(),
                Src::Operand(_) => stages[0].clone(),
            })
            .collect();
        let v = g.program(result.p, &ins, rk);
        let a = st.addr[0].clone();
        g.store(result.p, &[v], &a);
        emit!(g, "{skip}:");
        emit!(g, "ret;");
        return text(&g, &params, 0);
    }
    let write = |g: &mut Gen, st: &mut Row<'_>, q0: &str, lanes: &[String], ins: &[Vec<V>]| {
        let vals: Vec<V> = ins
            .iter()
            .map(|lane| g.program(result.p, lane, rk))
            .collect();
        if shape.unit & 1 != 0 {
            let a = g.rd();
            emit!(g, "mul.wide.u32 {a}, {q0}, {};", out.size());
            emit!(g, "add.s64 {a}, {a}, {};", st.addr[0]);
            g.guarded(&lanes[0], |g| g.store(result.p, &vals, &a));
        } else {
            for (i, v) in vals.iter().enumerate() {
                let a = st.element(g, 0, q0, i);
                g.guarded(&lanes[i], |g| {
                    g.store(result.p, std::slice::from_ref(v), &a)
                });
            }
        }
    };
    // Rows past the end store nothing.
    let done = g.label();
    emit!(g, "@!{live} bra {done};");
    if shape.cached != 0 {
        for r in 0..shape.cached as u32 {
            for jj in 0..j {
                let (q0, lanes) = st.round(&mut g, r, jj);
                let ins = st.inputs(&mut g, result, &stages, &q0, &lanes, Some((r, jj)));
                write(&mut g, &mut st, &q0, &lanes, &ins);
            }
        }
    } else {
        // Vectors `tl, tl + threads, …` of the whole row, UNROLL a trip (loads first).
        let (c, q, more) = (g.r(), g.r(), g.p());
        let (top, end) = (g.label(), g.label());
        emit!(g, "mov.u32 {c}, {};", st.tk);
        emit!(g, "{top}:");
        emit!(g, "mul.lo.u32 {q}, {c}, {w};");
        emit!(g, "setp.ge.u32 {more}, {q}, {n};");
        emit!(g, "@{more} bra {end};");
        let mut pending = Vec::new();
        for u in 0..UNROLL {
            let q0 = g.r();
            emit!(g, "add.u32 {q0}, {c}, {};", u * tn * k);
            emit!(g, "mul.lo.u32 {q0}, {q0}, {w};");
            let lanes = st.lanes(&mut g, &q0);
            let ins = st.inputs(&mut g, result, &stages, &q0, &lanes, None);
            pending.push((q0, lanes, ins));
        }
        for (q0, lanes, ins) in &pending {
            write(&mut g, &mut st, q0, lanes, ins);
        }
        emit!(g, "add.u32 {c}, {c}, {};", UNROLL * tn * k);
        emit!(g, "bra {top};");
        emit!(g, "{end}:");
    }
    emit!(g, "{done}:");
    emit!(g, "ret;");
    text(&g, &params, 0)
}
