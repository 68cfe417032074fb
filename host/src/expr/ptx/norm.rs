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
    /// Bit `k`: operand `k` has row stride 1 and every chunk aligned to its bytes, and the
    /// row length is a multiple of the chunk: read (written) as vectors of a chunk.
    pub unit: u16,
    /// Bit `k`: input `k` has row stride 0: read once a row.
    pub bcast: u16,
    /// Chunk rounds a slot takes (one group), unrolled with the inputs' values in
    /// registers; 0: loops over rounds and groups, each stage reading the row.
    pub cached: u8,
    /// Whether the result has the inputs' shape (else one value a row, thread 0's).
    pub rowwise: bool,
    /// `f64` accumulators (chunks of 2), else `f32` (chunks of 4).
    pub wide: bool,
}

/// A part of the program: a stage (`op`: its reduction) or the result (`None`), its
/// program and where each of the program's inputs comes from.
pub(crate) struct Part<'a> {
    pub op: Option<ReduceOp>,
    pub p: &'a Program,
    pub srcs: &'a [Src],
}

/// Bytes of the shared memory of the groups' values (at most `MAX_GROUPS`).
const GROUP_BYTES: u32 = 8 * gpu_kernels::reduce::MAX_GROUPS;

/// The state of one kernel being written.
struct Row<'a> {
    shape: NormShape,
    types: &'a [ElemType],
    ft: &'static Ft,
    w: u32,
    tid: String,
    n: String,
    /// Each operand's address of the row's element 0, and its row stride (elements).
    addr: Vec<String>,
    rs: Vec<String>,
    /// The values of the inputs of `bcast`.
    once: HashMap<usize, V>,
    /// Cached mode: each round's chunk start and lane predicates, and the inputs' values.
    rounds: HashMap<u32, (String, Vec<String>)>,
    cache: HashMap<(u32, usize), Vec<V>>,
}

impl Row<'_> {
    /// `q0`'s lane predicates (`q0 + i < n`).
    fn lanes(&self, g: &mut Gen, q0: &str) -> Vec<String> {
        (0..self.w)
            .map(|i| {
                let (q, p) = (g.r(), g.p());
                emit!(g, "add.u32 {q}, {q0}, {i};");
                emit!(g, "setp.lt.u32 {p}, {q}, {};", self.n);
                p
            })
            .collect()
    }

    /// Cached mode: round `r`'s chunk start `(r * SLOTS + tid) * w` and lane predicates.
    fn round(&mut self, g: &mut Gen, r: u32) -> (String, Vec<String>) {
        if let Some(x) = self.rounds.get(&r) {
            return x.clone();
        }
        let q0 = g.r();
        emit!(
            g,
            "mad.lo.u32 {q0}, {}, {}, {};",
            self.tid,
            self.w,
            r * SLOTS * self.w
        );
        let l = self.lanes(g, &q0);
        self.rounds.insert(r, (q0.clone(), l.clone()));
        (q0, l)
    }

    /// Operand `k`'s `w` values of the chunk at `q0` (lanes `lanes`).
    fn load(&mut self, g: &mut Gen, k: usize, q0: &str, lanes: &[String]) -> Vec<V> {
        let w = self.w as usize;
        if let Some(v) = self.once.get(&k) {
            return vec![v.clone(); w];
        }
        let e = self.types[k];
        if self.shape.unit >> k & 1 != 0 {
            let a = g.rd();
            emit!(g, "mul.wide.u32 {a}, {q0}, {};", e.size());
            emit!(g, "add.s64 {a}, {a}, {};", self.addr[k]);
            return g.guarded(&lanes[0], |g| g.load(e, &a, w));
        }
        (0..w)
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

    /// The inputs of `part` on the chunk at `q0`, by lane: `w` lists of the program's
    /// inputs (`round`: cached mode's round, whose loads are kept).
    fn inputs(
        &mut self,
        g: &mut Gen,
        part: &Part<'_>,
        stages: &[V],
        q0: &str,
        lanes: &[String],
        round: Option<u32>,
    ) -> Vec<Vec<V>> {
        let w = self.w as usize;
        let per_input: Vec<Vec<V>> = part
            .srcs
            .iter()
            .map(|s| match *s {
                Src::Stage(j) => vec![stages[j as usize].clone(); w],
                Src::Operand(k) => {
                    let k = k as usize;
                    match round {
                        Some(r) => {
                            if let Some(v) = self.cache.get(&(r, k)) {
                                return v.clone();
                            }
                            let v = self.load(g, k, q0, lanes);
                            self.cache.insert((r, k), v.clone());
                            v
                        }
                        None => self.load(g, k, q0, lanes),
                    }
                }
            })
            .collect();
        (0..w)
            .map(|i| per_input.iter().map(|v| v[i].clone()).collect())
            .collect()
    }

    /// Folds `part`'s values of the chunk at `q0` into `acc`; `first`: the predicate of
    /// the slot's first chunk (`None`: never), `always_first`: it is.
    #[allow(clippy::too_many_arguments)]
    fn fold_chunk(
        &mut self,
        g: &mut Gen,
        part: &Part<'_>,
        consts: &[Option<V>],
        stages: &[V],
        acc: &str,
        q0: &str,
        lanes: &[String],
        round: Option<u32>,
        first: Option<&str>,
    ) {
        let op = part.op.unwrap_or(ReduceOp::Sum);
        let ft = self.ft;
        let ins = self.inputs(g, part, stages, q0, lanes, round);
        for (i, lane) in ins.iter().enumerate() {
            let v = g.program(part.p, lane, consts);
            let x = g.float_of(&v, ft);
            let c = g.combine(op, ft, acc, &x);
            let t = match (i, first) {
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

    /// The halving tree over the `used` slots' accumulators (`acc`, thread `tid`'s) through
    /// shared memory: slot 0's value, every thread's.
    fn tree(&self, g: &mut Gen, op: ReduceOp, acc: &str, used: &str) -> String {
        let ft = self.ft;
        let t = ft.t;
        let tid = &self.tid;
        let (at, at_base) = (g.r(), g.r());
        emit!(g, "mov.u32 {at_base}, nrm_red;");
        emit!(g, "mad.lo.u32 {at}, {tid}, 8, {at_base};");
        emit!(g, "st.shared.{t} [{at}], {acc};");
        emit!(g, "bar.sync 0;");
        let (s, u1, c, none) = (g.r(), g.r(), g.r(), g.p());
        emit!(g, "sub.u32 {u1}, {used}, 1;");
        emit!(g, "clz.b32 {c}, {u1};");
        emit!(g, "sub.u32 {c}, 31, {c};");
        emit!(g, "shl.b32 {s}, 1, {c};");
        emit!(g, "setp.le.u32 {none}, {used}, 1;");
        emit!(g, "selp.u32 {s}, 0, {s}, {none};");
        let (top, skip, end) = (g.label(), g.label(), g.label());
        let (done, pair, hi) = (g.p(), g.p(), g.r());
        emit!(g, "{top}:");
        emit!(g, "setp.eq.u32 {done}, {s}, 0;");
        emit!(g, "@{done} bra {end};");
        emit!(g, "add.u32 {hi}, {tid}, {s};");
        emit!(g, "setp.lt.u32 {pair}, {tid}, {s};");
        emit!(g, "setp.lt.and.u32 {pair}, {hi}, {used}, {pair};");
        emit!(g, "@!{pair} bra {skip};");
        let (a, b, bat) = (g.fl(ft), g.fl(ft), g.r());
        emit!(g, "mad.lo.u32 {bat}, {hi}, 8, {at_base};");
        emit!(g, "ld.shared.{t} {a}, [{at}];");
        emit!(g, "ld.shared.{t} {b}, [{bat}];");
        let m = g.combine(op, ft, &a, &b);
        emit!(g, "st.shared.{t} [{at}], {m};");
        emit!(g, "{skip}:");
        emit!(g, "bar.sync 0;");
        emit!(g, "shr.u32 {s}, {s}, 1;");
        emit!(g, "bra {top};");
        emit!(g, "{end}:");
        let v = g.fl(ft);
        emit!(g, "ld.shared.{t} {v}, [nrm_red];");
        emit!(g, "bar.sync 0;");
        v
    }

    /// `min(ceil(len / w), SLOTS)`: the used slots of a group of `len` elements.
    fn used(&self, g: &mut Gen, len: &str) -> String {
        let u = g.r();
        emit!(g, "add.u32 {u}, {len}, {};", self.w - 1);
        emit!(g, "shr.u32 {u}, {u}, {};", self.w.trailing_zeros());
        emit!(g, "min.u32 {u}, {u}, {SLOTS};");
        u
    }
}

/// The row kernel of `parts` (the stages in order, then the result) for `shape`, over
/// operands of `types` (the output first). Parameters, in order: the operands' addresses
/// (`.u64`, output first, each at its base element), each part's constants (`kc{j}`,
/// `.b8 [128]`), then `.u32` each: `n` (the row length, at least 1), `group_len`,
/// `groups` (the groups that hold elements), `rounds` (chunk rounds a slot of a group),
/// the divisions by kept dimensions `0..nkept-1` (`kept{d}_*`), each operand's kept
/// strides (`.s32`, `ks{k}_{d}`) and row stride (`.s32`, `rs{k}`). A block of [`SLOTS`]
/// threads a row.
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
        block: Some((SLOTS, 1)),
        ..Gen::default()
    };
    let ops = shape.ops as usize;
    let nkept = (shape.nkept as usize).clamp(1, 6);
    let ft = if shape.wide { &F64T } else { &F32T };
    let w: u32 = if shape.wide { 2 } else { 4 };
    let mut params: Vec<String> = (0..ops).map(|k| format!(".param .u64 ptr{k}")).collect();
    params.extend((0..parts.len()).map(|j| format!(".param .align 8 .b8 kc{j}[128]")));
    params.extend(["n", "group_len", "groups", "rounds"].map(|s| format!(".param .u32 {s}")));
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
    emit!(g, ".shared .align 8 .b8 nrm_red[{}];", 8 * SLOTS);
    if shape.cached == 0 {
        emit!(g, ".shared .align 8 .b8 nrm_grp[{GROUP_BYTES}];");
    }
    let [tid, row, n, glen, groups, rounds] = [0; 6].map(|_| g.r());
    emit!(g, "mov.u32 {tid}, %tid.x;");
    emit!(g, "mov.u32 {row}, %ctaid.x;");
    for (reg, name) in [
        (&n, "n"),
        (&glen, "group_len"),
        (&groups, "groups"),
        (&rounds, "rounds"),
    ] {
        emit!(g, "ld.param.u32 {reg}, [{name}];");
    }
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
        tid: tid.clone(),
        n: n.clone(),
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
    for (j, part) in stage_parts.iter().enumerate() {
        let op = part.op.unwrap_or(ReduceOp::Sum);
        let acc = g.fl(ft);
        emit!(g, "mov.{t} {acc}, {};", ft.zero);
        let value = if shape.cached != 0 {
            for r in 0..shape.cached as u32 {
                let (q0, lanes) = st.round(&mut g, r);
                let first = (r == 0).then_some("1");
                st.fold_chunk(
                    &mut g,
                    part,
                    &kcs[j],
                    &stages,
                    &acc,
                    &q0,
                    &lanes,
                    Some(r),
                    first,
                );
            }
            let used = st.used(&mut g, &n);
            st.tree(&mut g, op, &acc, &used)
        } else {
            // Groups, and rounds of each.
            let (gi, m, lo, len, q0) = (g.r(), g.r(), g.r(), g.r(), g.r());
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
            emit!(g, "mad.lo.u32 {q0}, {m}, {SLOTS}, {tid};");
            emit!(g, "mad.lo.u32 {q0}, {q0}, {w}, {lo};");
            emit!(g, "setp.eq.u32 {first}, {m}, 0;");
            let lanes = st.lanes(&mut g, &q0);
            st.fold_chunk(
                &mut g,
                part,
                &kcs[j],
                &stages,
                &acc,
                &q0,
                &lanes,
                None,
                Some(&first),
            );
            emit!(g, "add.u32 {m}, {m}, 1;");
            emit!(g, "setp.lt.u32 {more}, {m}, {rounds};");
            emit!(g, "@{more} bra {mtop};");
            let used = st.used(&mut g, &len);
            let v = st.tree(&mut g, op, &acc, &used);
            emit!(g, "mov.{t} {value}, {v};");
            // Thread 0 keeps the group's value.
            let (zero, at, gb) = (g.p(), g.r(), g.r());
            emit!(g, "setp.eq.u32 {zero}, {tid}, 0;");
            emit!(g, "mov.u32 {gb}, nrm_grp;");
            emit!(g, "mad.lo.u32 {at}, {gi}, 8, {gb};");
            emit!(g, "@{zero} st.shared.{t} [{at}], {value};");
            emit!(g, "add.u32 {gi}, {gi}, 1;");
            emit!(g, "setp.lt.u32 {more}, {gi}, {groups};");
            emit!(g, "@{more} bra {gtop};");
            // More than one group: thread 0's tree over their values.
            let (single, skip_tree) = (g.p(), g.label());
            emit!(g, "setp.le.u32 {single}, {groups}, 1;");
            emit!(g, "@{single} bra {skip_tree};");
            emit!(g, "bar.sync 0;");
            let not0 = g.p();
            let after = g.label();
            emit!(g, "setp.ne.u32 {not0}, {tid}, 0;");
            emit!(g, "@{not0} bra {after};");
            let (s, u1, c, l, hi, lat, hat) = (g.r(), g.r(), g.r(), g.r(), g.r(), g.r(), g.r());
            emit!(g, "sub.u32 {u1}, {groups}, 1;");
            emit!(g, "clz.b32 {c}, {u1};");
            emit!(g, "sub.u32 {c}, 31, {c};");
            emit!(g, "shl.b32 {s}, 1, {c};");
            let (ttop, ltop, lend, tend) = (g.label(), g.label(), g.label(), g.label());
            let (p1, p2) = (g.p(), g.p());
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
            let _ = p2;
            emit!(g, "ld.shared.{t} {a}, [nrm_grp];");
            emit!(g, "st.shared.{t} [nrm_red], {a};");
            emit!(g, "{after}:");
            emit!(g, "bar.sync 0;");
            emit!(g, "ld.shared.{t} {value}, [nrm_red];");
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
        emit!(g, "setp.ne.u32 {not0}, {tid}, 0;");
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
    let write = |g: &mut Gen, st: &mut Row<'_>, q0: &str, lanes: &[String], round: Option<u32>| {
        let ins = st.inputs(g, result, &stages, q0, lanes, round);
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
    if shape.cached != 0 {
        for r in 0..shape.cached as u32 {
            let (q0, lanes) = st.round(&mut g, r);
            write(&mut g, &mut st, &q0, &lanes, Some(r));
        }
    } else {
        // Chunks `tid, tid + SLOTS, …` of the whole row.
        let (c, q0, more) = (g.r(), g.r(), g.p());
        let (top, end) = (g.label(), g.label());
        emit!(g, "mov.u32 {c}, {tid};");
        emit!(g, "{top}:");
        emit!(g, "mul.lo.u32 {q0}, {c}, {w};");
        emit!(g, "setp.ge.u32 {more}, {q0}, {n};");
        emit!(g, "@{more} bra {end};");
        let lanes = st.lanes(&mut g, &q0);
        write(&mut g, &mut st, &q0, &lanes, None);
        emit!(g, "add.u32 {c}, {c}, {SLOTS};");
        emit!(g, "bra {top};");
        emit!(g, "{end}:");
    }
    emit!(g, "ret;");
    text(&g, &params, 0)
}
