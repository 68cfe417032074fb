//! Tier 1's expression reductions: the group kernel of an expression reduction
//! (`strided_apply_expr::reduce`) written out as PTX, the program inlined at each element
//! (the interpreter's group kernel dispatches every instruction of every element: 5–17×
//! slower, `benches/RESULTS.md`).
//!
//! The kernel computes what the interpreter's group kernel computes, in the same order, so
//! the bits are the interpreter's (and the CPU twin's). The order: group `grp` of an
//! output has `min(ceil(len / w), SLOTS)` used slots (`w` = [`chunk`] of the output's
//! size); slot `s` folds chunks `s, s + SLOTS, …` of `w` consecutive elements in increasing
//! element order, its first element starting the accumulator; then the halving tree over
//! the used slots. Who folds which slot is free: a block of `SLOTS` threads takes `SLOTS >>
//! tshift` consecutive outputs of one group, `T = 1 << tshift` threads an output, thread
//! `tl` folding slots `tl + m * T` for `m < per` ([`RedShape::split`]: `per` slots a
//! thread, one chunk of each per round of its loop, all loads first). The tree's levels
//! between a thread's own slots are register operations, the levels of a warp of pairs or
//! more between threads go through shared memory after a block barrier, the lower ones by
//! warp shuffles: the same pairs. Thread `tl == 0` writes the output (one group) or its
//! group's accumulator to the scratch (the interpreter's final kernel trees over them).
//! The column shape ([`RedShape::col_y`]) deals the same slots to threads otherwise: `COL_X`
//! consecutive outputs a block, thread `(x, y)` folding slots `y, y + col_y, …` of output
//! `x` one after the other into shared memory, then the tree there.
//!
//! Each value is the program's result rounded once to the output type and widened to its
//! math type (the accumulator type: `f32` for 16-bit floats), as the interpreter's walk.

use super::emit::Gen;
use super::kernel::{prologue, text};
use super::types::{elem, Ft, F32T, F64T, V};
use gpu_kernels::elem::ElemType;
use std::fmt::Write;
use strided_apply_expr::ir::{Class, Program};
use strided_apply_expr::reduce::{chunk, ReduceOp, SLOTS, SLOT_BITS};

/// An expression reduction's group kernel, as [`Shape::Reduce`](super::Shape::Reduce)
/// names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct RedShape {
    /// The reduction.
    pub op: ReduceOp,
    /// `log2` of the slots per output ([`row_shift`](strided_apply_expr::reduce::row_shift)).
    pub shift: u8,
    /// Kept (output) dimensions, 1 to 6.
    pub nkept: u8,
    /// Bit `k`: input operand `k` has reduced stride 1 and every chunk of it is aligned to
    /// its bytes (at most 16): read as vectors.
    pub unit: u16,
    /// Bit `k`: input operand `k` has reduced stride 0: read once per thread.
    pub bcast: u16,
    /// `log2` of the slots a thread folds (at most 2: four slots), each round of the slot
    /// loop one chunk of each, their loads first.
    pub per: u8,
    /// The column shape where nonzero: blocks of [`COL_X`] consecutive outputs × `col_y`
    /// threads (a power of two, at most 32), thread `(x, y)` folding slots `y, y + col_y,
    /// …` of output `x` one after the other into shared memory, then the tree there (for
    /// reduced axes of stride > 1 whose outputs are consecutive elements: a warp reads 32
    /// consecutive outputs' elements at once). `f32` accumulators only (the slots' 32 KB of
    /// shared memory); `shift` and `per` unused.
    pub col_y: u8,
}

/// The column shape's outputs per block (threads along `x`).
pub(crate) const COL_X: u32 = 32;

impl RedShape {
    /// `(log2 slots a thread, log2 threads an output)`: `per` at most `shift`.
    pub(crate) fn split(&self) -> (u32, u32) {
        let shift = (self.shift as u32).min(SLOT_BITS);
        let p = (self.per as u32).min(2).min(shift);
        (p, shift - p)
    }

    /// The slots a thread folds (`log2`, [`per`](Self::per)) for a reduction of length `n`
    /// in chunks of `w`, by the chunks each slot folds: four slots a thread for one or two
    /// chunks a slot, two up to 16 chunks, one past that (two for 16-bit outputs, whose
    /// chunks of eight take more instructions a byte). Measured on an H200 over rows of 128
    /// to 32768 elements (`benches/NOTES.md`); a choice of speed only, the order is the
    /// slots'.
    pub(crate) fn per_for(n: u32, w: u32) -> u8 {
        let per_slot = n.div_ceil(w.max(1)).div_ceil(SLOTS);
        if per_slot <= 2 {
            2
        } else if per_slot <= 16 || w >= 8 {
            1
        } else {
            0
        }
    }

    /// The kernel's blocks (of `SLOTS` threads) for `outputs` outputs of `groups` groups.
    pub(crate) fn blocks(&self, outputs: u32, groups: u32) -> u64 {
        let per_block = if self.col_y != 0 {
            COL_X
        } else {
            SLOTS >> self.split().1
        };
        outputs.div_ceil(per_block) as u64 * groups as u64
    }
}

/// The accumulator's float type for an output element type.
fn acc_type(out: ElemType) -> &'static Ft {
    if out == ElemType::F64 {
        &F64T
    } else {
        &F32T
    }
}

impl Gen {
    /// `op`'s combination of accumulators `a` (the lower slot's) and `b`, as the library's
    /// `Reduce` implementations: `.rn` sums and products, IEEE 754-2019 maximum and minimum
    /// (NaN wins, `-0 < +0`) by `max.NaN`/`min.NaN` on sm_80 and later for `f32`, else
    /// by the library's software form (a NaN operand gives the canonical NaN, equal operands
    /// merge their sign bits, else the greater (lesser); ties to `a`).
    pub(super) fn combine(&mut self, op: ReduceOp, ft: &Ft, a: &str, b: &str) -> String {
        let t = ft.t;
        let out = self.fl(ft);
        match op {
            ReduceOp::Sum | ReduceOp::Mean => emit!(self, "add.rn.{t} {out}, {a}, {b};"),
            ReduceOp::Prod => emit!(self, "mul.rn.{t} {out}, {a}, {b};"),
            ReduceOp::Amax | ReduceOp::Amin => {
                let max = op == ReduceOp::Amax;
                let m = if max { "max" } else { "min" };
                if !ft.f64 && self.sm >= 80 {
                    emit!(self, "{m}.NaN.f32 {out}, {a}, {b};");
                } else {
                    let (nan, eq, wins) = (self.p(), self.p(), self.p());
                    let (ba, bb, sel) = (self.bits(ft), self.bits(ft), self.fl(ft));
                    let (merged, pick) = (self.fl(ft), self.fl(ft));
                    emit!(self, "setp.nan.{t} {nan}, {a}, {b};");
                    emit!(self, "setp.eq.{t} {eq}, {a}, {b};");
                    emit!(self, "mov.{} {ba}, {a};", ft.b);
                    emit!(self, "mov.{} {bb}, {b};", ft.b);
                    let bit = if max { "and" } else { "or" };
                    emit!(self, "{bit}.{} {ba}, {ba}, {bb};", ft.b);
                    emit!(self, "mov.{} {merged}, {ba};", ft.b);
                    let cmp = if max { "gt" } else { "lt" };
                    emit!(self, "setp.{cmp}.{t} {wins}, {b}, {a};");
                    emit!(self, "selp.{t} {sel}, {b}, {a}, {wins};");
                    emit!(self, "selp.{t} {pick}, {merged}, {sel}, {eq};");
                    emit!(self, "selp.{t} {out}, {}, {pick}, {nan};", ft.nan);
                }
            }
        }
        out
    }

    /// Program value `v` as the fold takes it: rounded to output type `out` and widened to
    /// its math type `ft`.
    fn fold_value(&mut self, v: &V, out: ElemType, ft: &Ft) -> String {
        let x = self.float_of(v, ft);
        match out {
            ElemType::F16 | ElemType::BF16 => self.round16(&x, out),
            _ => x,
        }
    }

    /// `acc = first ? x : combine(acc, x)` for the first value of a chunk (`first`: no
    /// element folded yet), `acc = combine(acc, x)` for the others.
    fn fold(&mut self, op: ReduceOp, ft: &Ft, acc: &str, x: &str, first: Option<&str>) {
        let c = self.combine(op, ft, acc, x);
        match first {
            Some(f) => emit!(self, "selp.{} {acc}, {x}, {c}, {f};", ft.t),
            None => emit!(self, "mov.{} {acc}, {c};", ft.t),
        }
    }
}

/// The reduction kernel of `p` for `r` (see the module documentation). Parameters, in order:
/// the operands' addresses (`.u64`, output first, each at its base element), the constants
/// (`.b8 [128]`), then `.u32` each: `n` (the reduction length, at least 1), `group_len`,
/// `groups`, `outputs`, the division by `groups` (`grp_d`, `_magic`, `_shift`), the
/// divisions by kept dimensions `0..nkept-1` (`kept{d}_*`), each operand's kept strides
/// (`.s32`, `ks{k}_{d}`, output first), each input's reduced stride (`.s32`, `rs{k}`), and
/// the scratch's address (`.u64`). [`RedShape::blocks`] blocks of `SLOTS` threads.
pub(crate) fn module(p: &Program, r: RedShape, sm: u32, lib: &str) -> String {
    let mut g = Gen {
        sm,
        lib: lib.to_string(),
        ..Gen::default()
    };
    let ops = 1 + p.n_inputs as usize;
    let nkept = (r.nkept as usize).clamp(1, 6);
    let shift = (r.shift as u32).min(SLOT_BITS);
    let out = elem(p.out);
    let ft = acc_type(out);
    let t = ft.t;
    let w = chunk(out.size());
    // The column shape takes `f32` accumulators only (the host asks for no other).
    let cols = r.col_y != 0 && !ft.f64;
    let col_y = (r.col_y as u32).clamp(1, 32).next_power_of_two();
    let (pshift, tshift) = if cols { (0, 0) } else { r.split() };
    let (per, threads) = (1usize << pshift, 1u32 << tshift);
    g.block = Some(if cols { (COL_X, col_y) } else { (SLOTS, 1) });
    let types: Vec<ElemType> = (0..ops)
        .map(|k| elem(if k == 0 { p.out } else { p.inputs[k - 1] }))
        .collect();
    let mut params: Vec<String> = (0..ops).map(|k| format!(".param .u64 ptr{k}")).collect();
    params.push(".param .align 8 .b8 kc[128]".into());
    params.extend(["n", "group_len", "groups", "outputs"].map(|s| format!(".param .u32 {s}")));
    params.extend(["d", "magic", "shift"].map(|s| format!(".param .u32 grp_{s}")));
    for d in 0..nkept - 1 {
        params.extend(["d", "magic", "shift"].map(|s| format!(".param .u32 kept{d}_{s}")));
    }
    for k in 0..ops {
        params.extend((0..nkept).map(|d| format!(".param .s32 ks{k}_{d}")));
    }
    params.extend((1..ops).map(|k| format!(".param .s32 rs{k}")));
    params.push(".param .u64 scratch".into());

    let (base, consts) = prologue(&mut g, p, ops);
    // The tree's levels of a warp of pairs or more between threads go through shared memory.
    let shared_levels = tshift > 5;
    if shared_levels {
        emit!(g, ".shared .align 8 .b8 sa_red[{}];", 8 * SLOTS);
    }
    if cols {
        emit!(g, ".shared .align 8 .b8 sa_col[{}];", 4 * SLOTS * COL_X);
    }
    let [tid, bid, n, group_len, groups, outputs] = [0; 6].map(|_| g.r());
    emit!(g, "mov.u32 {tid}, %tid.x;");
    emit!(g, "mov.u32 {bid}, %ctaid.x;");
    for (reg, name) in [(&n, "n"), (&group_len, "group_len"), (&groups, "groups")] {
        emit!(g, "ld.param.u32 {reg}, [{name}];");
    }
    emit!(g, "ld.param.u32 {outputs}, [outputs];");
    // Logical block `bid`: outputs from `(bid / groups) << (SLOT_BITS - tshift)`, group
    // `bid % groups`; this thread's output and first slot `tl` (its others `tl + m * T`).
    let grp_div = g.div_params("grp");
    let (ob, grp) = g.divmod(&bid, &grp_div);
    let (o, tl, live, oc) = (g.r(), g.r(), g.p(), g.r());
    // The column shape's thread `x` (its output in the block).
    let x = g.r();
    if cols {
        // Output `ob * COL_X + x`; `tl` is `y`, the thread's first slot.
        emit!(g, "mov.u32 {x}, %tid.x;");
        emit!(g, "mov.u32 {tl}, %tid.y;");
        emit!(g, "mad.lo.u32 {o}, {ob}, {COL_X}, {x};");
    } else {
        emit!(g, "shl.b32 {o}, {ob}, {};", SLOT_BITS - tshift);
        let seg = g.r();
        emit!(g, "shr.u32 {seg}, {tid}, {tshift};");
        emit!(g, "add.u32 {o}, {o}, {seg};");
        emit!(g, "and.b32 {tl}, {tid}, {};", threads - 1);
    }
    emit!(g, "setp.lt.u32 {live}, {o}, {outputs};");
    // Threads past the last output read nothing (no elements) and take the last output's
    // offsets.
    emit!(g, "sub.u32 {oc}, {outputs}, 1;");
    emit!(g, "selp.u32 {oc}, {o}, {oc}, {live};");
    let (lo, len) = (g.r(), g.r());
    emit!(g, "mul.lo.u32 {lo}, {grp}, {group_len};");
    emit!(g, "sub.u32 {len}, {n}, {lo};");
    emit!(g, "min.u32 {len}, {len}, {group_len};");
    emit!(g, "selp.u32 {len}, {len}, 0, {live};");
    // The output's offset and the inputs' base offsets (kept dimensions).
    let divs: Vec<[String; 3]> = (0..nkept - 1)
        .map(|d| g.div_params(&format!("kept{d}")))
        .collect();
    let strides = g.stride_params("ks", ops, nkept);
    let offs = g.offsets(&oc, &divs, &strides);
    // `q`: the element (in the group) of slot `tl`'s current chunk; slot `tl + m * T`'s is
    // `q + m * T * w`. Each input's address at `lo + q`, its steps between a slot's chunks
    // (`SLOTS * w` elements), between the thread's slots (`T * w`) and between elements.
    struct In {
        e: ElemType,
        rs: String,
        offset: String,
        base: String,
        addr: String,
        step: String,
        slot_step: String,
        lane: String,
        kind: Kind,
    }
    enum Kind {
        Unit,
        Strided,
        Bcast(V),
    }
    let mut ins: Vec<In> = Vec::new();
    for k in 1..ops {
        let e = types[k];
        let size = e.size() as u32;
        let (rs, addr) = (g.r(), g.rd());
        let (step, slot_step, lane) = (g.rd(), g.rd(), g.rd());
        emit!(g, "ld.param.s32 {rs}, [rs{k}];");
        let kind = if r.bcast >> k & 1 != 0 {
            emit!(g, "mul.wide.s32 {addr}, {}, {size};", offs[k]);
            emit!(g, "add.s64 {addr}, {addr}, {};", base[k]);
            // Read once: the reduction's first element is there (`n >= 1`; a live output's
            // offsets, or the last output's).
            Kind::Bcast(g.load(e, &addr, 1).remove(0))
        } else {
            emit!(g, "mul.wide.s32 {step}, {rs}, {};", SLOTS * w * size);
            emit!(g, "mul.wide.s32 {slot_step}, {rs}, {};", threads * w * size);
            emit!(g, "mul.wide.s32 {lane}, {rs}, {size};");
            if r.unit >> k & 1 != 0 {
                Kind::Unit
            } else {
                Kind::Strided
            }
        };
        ins.push(In {
            e,
            rs,
            offset: offs[k].clone(),
            base: base[k].clone(),
            addr,
            step,
            slot_step,
            lane,
            kind,
        });
    }
    let (q, slot, col_loop) = (g.r(), g.r(), g.label());
    // The column shape: slot `slot = y + col_y * m` for each `m`, one after the other.
    emit!(g, "mov.u32 {slot}, {tl};");
    if cols {
        emit!(g, "{col_loop}:");
    }
    emit!(g, "mul.lo.u32 {q}, {slot}, {w};");
    let first: Vec<String> = (0..per).map(|_| g.p()).collect();
    let acc: Vec<String> = (0..per).map(|_| g.fl(ft)).collect();
    for (f, a) in first.iter().zip(&acc) {
        emit!(g, "setp.eq.u32 {f}, 0, 0;");
        emit!(g, "mov.{t} {a}, {};", ft.zero);
    }
    let (start, off) = (g.r(), g.r());
    emit!(g, "add.u32 {start}, {lo}, {q};");
    for i in ins.iter().filter(|i| !matches!(i.kind, Kind::Bcast(_))) {
        emit!(g, "mad.lo.s32 {off}, {start}, {}, {};", i.rs, i.offset);
        emit!(g, "mul.wide.s32 {}, {off}, {};", i.addr, i.e.size());
        emit!(g, "add.s64 {0}, {0}, {1};", i.addr, i.base);
    }
    let read = |i: &In| !matches!(i.kind, Kind::Bcast(_));
    // Each input's address for the thread's slot `m` (its first slot's address moved on).
    let slot_addrs = |g: &mut Gen, m: usize| -> Vec<String> {
        ins.iter()
            .map(|i| {
                if m == 0 || !read(i) {
                    return i.addr.clone();
                }
                let a = g.rd();
                emit!(g, "mad.lo.s64 {a}, {}, {m}, {};", i.slot_step, i.addr);
                a
            })
            .collect()
    };
    // The inputs of `lanes` consecutive elements at `at[k]` (each input's address).
    let values = |g: &mut Gen, at: &[String], lanes: usize| -> Vec<Vec<V>> {
        ins.iter()
            .zip(at)
            .map(|(i, a)| match &i.kind {
                Kind::Bcast(v) => vec![v.clone(); lanes],
                Kind::Unit => g.load(i.e, a, lanes),
                Kind::Strided => {
                    let mut vs = Vec::with_capacity(lanes);
                    let la = g.rd();
                    emit!(g, "mov.b64 {la}, {a};");
                    for j in 0..lanes {
                        if j > 0 {
                            emit!(g, "add.s64 {la}, {la}, {};", i.lane);
                        }
                        vs.push(g.load(i.e, &la, 1).remove(0));
                    }
                    vs
                }
            })
            .collect()
    };
    // The program's values of those elements, rounded to the output and widened.
    let compute = |g: &mut Gen, loaded: &[Vec<V>], lanes: usize| -> Vec<String> {
        (0..lanes)
            .map(|j| {
                let lane: Vec<V> = loaded.iter().map(|v| v[j].clone()).collect();
                let v = g.program(p, &lane, &consts);
                g.fold_value(&v, out, ft)
            })
            .collect()
    };
    // Rounds: one full chunk of each of the thread's slots (full where the last slot's
    // is), every load first.
    let (full, end, round, tails) = (g.p(), g.r(), g.label(), g.label());
    emit!(g, "{round}:");
    emit!(
        g,
        "add.u32 {end}, {q}, {};",
        (per as u32 - 1) * threads * w + w
    );
    emit!(g, "setp.le.u32 {full}, {end}, {len};");
    emit!(g, "@!{full} bra {tails};");
    let mut loaded = Vec::new();
    for m in 0..per {
        let at = slot_addrs(&mut g, m);
        loaded.push(values(&mut g, &at, w as usize));
    }
    for m in 0..per {
        let xs = compute(&mut g, &loaded[m], w as usize);
        for (j, x) in xs.iter().enumerate() {
            g.fold(r.op, ft, &acc[m], x, (j == 0).then_some(first[m].as_str()));
        }
        emit!(g, "setp.ne.u32 {}, 0, 0;", first[m]);
    }
    emit!(g, "add.u32 {q}, {q}, {};", SLOTS * w);
    for i in ins.iter().filter(|i| read(i)) {
        emit!(g, "add.s64 {0}, {0}, {1};", i.addr, i.step);
    }
    emit!(g, "bra {round};");
    // What is left of each slot: at most one chunk (the next round's chunks start past the
    // last slot's chunk, which ends past `len`), element by element up to its end or `len`.
    emit!(g, "{tails}:");
    let (qm, em, more) = (g.r(), g.r(), g.p());
    for m in 0..per {
        let (elem_loop, next) = (g.label(), g.label());
        emit!(g, "add.u32 {qm}, {q}, {};", m as u32 * threads * w);
        emit!(g, "add.u32 {em}, {qm}, {w};");
        emit!(g, "min.u32 {em}, {em}, {len};");
        let at: Vec<String> = slot_addrs(&mut g, m)
            .into_iter()
            .zip(&ins)
            .map(|(a, i)| {
                if !read(i) {
                    return a;
                }
                let own = g.rd();
                emit!(g, "mov.b64 {own}, {a};");
                own
            })
            .collect();
        emit!(g, "{elem_loop}:");
        emit!(g, "setp.ge.u32 {more}, {qm}, {em};");
        emit!(g, "@{more} bra {next};");
        let loaded = values(&mut g, &at, 1);
        let xs = compute(&mut g, &loaded, 1);
        g.fold(r.op, ft, &acc[m], &xs[0], Some(&first[m]));
        emit!(g, "setp.ne.u32 {}, 0, 0;", first[m]);
        emit!(g, "add.u32 {qm}, {qm}, 1;");
        for (a, i) in at.iter().zip(&ins).filter(|(_, i)| read(i)) {
            emit!(g, "add.s64 {a}, {a}, {};", i.lane);
        }
        emit!(g, "bra {elem_loop};");
        emit!(g, "{next}:");
    }

    // The tree over the group's used slots, `min(ceil(len / w), SLOTS)`: the levels
    // between the thread's own slots in registers, then the thread's first slot's.
    let used = g.r();
    emit!(g, "add.u32 {used}, {len}, {};", w - 1);
    emit!(g, "shr.u32 {used}, {used}, {};", w.trailing_zeros());
    emit!(g, "min.u32 {used}, {used}, {SLOTS};");
    if cols {
        // The slot's value at `sa_col[slot][x]`; the next slot; then the tree over the
        // slots, level by level, each thread `y` taking pairs `l = y + col_y * i < s`.
        let (at, col_base, more_slots) = (g.rd(), g.rd(), g.p());
        emit!(g, "mov.u64 {col_base}, sa_col;");
        let idx = g.r();
        emit!(g, "mad.lo.u32 {idx}, {slot}, {COL_X}, {x};");
        emit!(g, "mul.wide.u32 {at}, {idx}, 4;");
        emit!(g, "add.s64 {at}, {at}, {col_base};");
        emit!(g, "st.shared.f32 [{at}], {};", acc[0]);
        emit!(g, "add.u32 {slot}, {slot}, {col_y};");
        emit!(g, "setp.lt.u32 {more_slots}, {slot}, {SLOTS};");
        emit!(g, "@{more_slots} bra {col_loop};");
        let (mine, pair_in, l_reg) = (g.rd(), g.p(), g.r());
        let mut s = SLOTS / 2;
        while s >= 1 {
            emit!(g, "bar.sync 0;");
            for i in 0..(s / col_y).max(1) {
                // Pair `(l, l + s)` for `l = y + col_y * i`, where `l < s` and `l + s < used`.
                emit!(g, "add.u32 {l_reg}, {tl}, {};", col_y * i + s);
                emit!(g, "setp.lt.u32 {pair_in}, {l_reg}, {used};");
                if s < col_y {
                    let lt = g.p();
                    emit!(g, "setp.lt.u32 {lt}, {tl}, {s};");
                    emit!(g, "and.pred {pair_in}, {pair_in}, {lt};");
                }
                emit!(g, "mad.lo.u32 {idx}, {l_reg}, {COL_X}, {x};");
                emit!(g, "sub.u32 {idx}, {idx}, {};", s * COL_X);
                emit!(g, "mul.wide.u32 {mine}, {idx}, 4;");
                emit!(g, "add.s64 {mine}, {mine}, {col_base};");
                let (a, b) = (g.f(), g.f());
                emit!(g, "ld.shared.f32 {a}, [{mine}];");
                emit!(g, "ld.shared.f32 {b}, [{mine}+{}];", 4 * s * COL_X);
                let c = g.combine(r.op, ft, &a, &b);
                emit!(g, "@{pair_in} st.shared.f32 [{mine}], {c};");
            }
            s /= 2;
        }
        emit!(g, "bar.sync 0;");
        emit!(g, "mul.wide.u32 {at}, {x}, 4;");
        emit!(g, "add.s64 {at}, {at}, {col_base};");
        emit!(g, "ld.shared.f32 {}, [{at}];", acc[0]);
    }
    let (act, pair_in, sum) = (g.p(), g.p(), g.r());
    // (The column shape's tree is above.)
    let mut s = if cols { 0 } else { (1u32 << shift) / 2 };
    while s >= threads {
        let half = (s / threads) as usize;
        for m in 0..half {
            // Slot `tl + m * T` with slot `tl + m * T + s`, the thread's slot `m + s / T`.
            emit!(g, "add.u32 {sum}, {tl}, {};", m as u32 * threads + s);
            emit!(g, "setp.lt.u32 {pair_in}, {sum}, {used};");
            let c = g.combine(r.op, ft, &acc[m], &acc[m + half]);
            emit!(g, "selp.{t} {0}, {c}, {0}, {pair_in};", acc[m]);
        }
        s /= 2;
    }
    let acc = acc[0].clone();
    // One level's pair for the thread's first slot `tl`: `acc = combine(acc, other)` where
    // `tl < s` and `tl + s < used`.
    let pair = |g: &mut Gen, other: &str, s: u32| {
        emit!(g, "setp.lt.u32 {act}, {tl}, {s};");
        emit!(g, "add.u32 {sum}, {tl}, {s};");
        emit!(g, "setp.lt.and.u32 {pair_in}, {sum}, {used}, {act};");
        let c = g.combine(r.op, ft, &acc, other);
        emit!(g, "selp.{t} {acc}, {c}, {acc}, {pair_in};");
    };
    let sm_at = g.rd();
    if shared_levels {
        let (sm_base, tid64) = (g.rd(), g.rd());
        emit!(g, "mov.u64 {sm_base}, sa_red;");
        emit!(g, "mul.wide.u32 {tid64}, {tid}, 8;");
        emit!(g, "add.s64 {sm_at}, {sm_base}, {tid64};");
        emit!(g, "st.shared.{t} [{sm_at}], {acc};");
    }
    while s >= 32 {
        let skip = g.label();
        emit!(g, "bar.sync 0;");
        emit!(g, "setp.lt.u32 {act}, {tl}, {s};");
        emit!(g, "@!{act} bra {skip};");
        let other = g.fl(ft);
        emit!(g, "ld.shared.{t} {other}, [{sm_at}+{}];", 8 * s);
        pair(&mut g, &other, s);
        emit!(g, "st.shared.{t} [{sm_at}], {acc};");
        emit!(g, "{skip}:");
        s /= 2;
    }
    // Levels within a warp (a segment of at most 32 threads lies in one warp).
    while s >= 1 {
        let other = g.fl(ft);
        if ft.f64 {
            let (bits, lo32, hi32) = (g.rd(), g.r(), g.r());
            emit!(g, "mov.b64 {bits}, {acc};");
            emit!(g, "mov.b64 {{{lo32}, {hi32}}}, {bits};");
            emit!(g, "shfl.sync.down.b32 {lo32}, {lo32}, {s}, 31, 0xffffffff;");
            emit!(g, "shfl.sync.down.b32 {hi32}, {hi32}, {s}, 31, 0xffffffff;");
            emit!(g, "mov.b64 {bits}, {{{lo32}, {hi32}}};");
            emit!(g, "mov.b64 {other}, {bits};");
        } else {
            let bits = g.r();
            emit!(g, "mov.b32 {bits}, {acc};");
            emit!(g, "shfl.sync.down.b32 {bits}, {bits}, {s}, 31, 0xffffffff;");
            emit!(g, "mov.b32 {other}, {bits};");
        }
        pair(&mut g, &other, s);
        s /= 2;
    }

    // Slot 0 of a live output: the output (one group) or the group's accumulator.
    let (writes, to_scratch, scratch_label) = (g.p(), g.p(), g.label());
    emit!(g, "setp.eq.and.u32 {writes}, {tl}, 0, {live};");
    emit!(g, "@!{writes} bra DONE;");
    emit!(g, "setp.ne.u32 {to_scratch}, {groups}, 1;");
    emit!(g, "@{to_scratch} bra {scratch_label};");
    let value = if r.op == ReduceOp::Mean {
        let (nf, m) = (g.fl(ft), g.fl(ft));
        emit!(g, "cvt.rn.{t}.u32 {nf}, {n};");
        emit!(g, "div.rn.{t} {m}, {acc}, {nf};");
        m
    } else {
        acc.clone()
    };
    let oa = g.rd();
    emit!(g, "mul.wide.s32 {oa}, {}, {};", offs[0], out.size());
    emit!(g, "add.s64 {oa}, {oa}, {};", base[0]);
    match out {
        ElemType::F16 | ElemType::BF16 => {
            let h = g.bits16(&value, out);
            emit!(g, "st.global.b16 [{oa}], {h};");
        }
        _ => emit!(g, "st.global.{t} [{oa}], {value};"),
    }
    emit!(g, "bra DONE;");
    emit!(g, "{scratch_label}:");
    let (at, idx, sa, bits) = (g.rd(), g.r(), g.rd(), g.rd());
    emit!(g, "mad.lo.u32 {idx}, {o}, {groups}, {grp};");
    emit!(g, "ld.param.u64 {sa}, [scratch];");
    emit!(g, "cvta.to.global.u64 {sa}, {sa};");
    emit!(g, "mul.wide.u32 {at}, {idx}, 8;");
    emit!(g, "add.s64 {at}, {at}, {sa};");
    if ft.f64 {
        emit!(g, "mov.b64 {bits}, {acc};");
    } else {
        let b32 = g.r();
        emit!(g, "mov.b32 {b32}, {acc};");
        emit!(g, "cvt.u64.u32 {bits}, {b32};");
    }
    emit!(g, "st.global.u64 [{at}], {bits};");
    emit!(g, "DONE:");
    emit!(g, "ret;");
    text(&g, &params, 0)
}

/// Whether a reduction's values fold in `class` here: floats only (tier 1's programs).
pub(crate) fn takes(out: ElemType) -> bool {
    matches!(Class::of(out), Some(Class::F32 | Class::F64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(shift: u8, per: u8) -> RedShape {
        RedShape {
            op: ReduceOp::Sum,
            shift,
            nkept: 1,
            unit: 0,
            bcast: 0,
            per,
            col_y: 0,
        }
    }

    /// A thread folds at most as many slots as an output has; the blocks cover every output
    /// of every group, `SLOTS >> tshift` outputs a block.
    #[test]
    fn threads_slots_and_blocks() {
        assert_eq!(shape(8, 2).split(), (2, 6));
        assert_eq!(shape(5, 1).split(), (1, 4));
        assert_eq!(shape(1, 2).split(), (1, 0));
        assert_eq!(shape(0, 2).split(), (0, 0));
        assert_eq!(shape(8, 7).split(), (2, 6));
        // 1000 outputs of 64 threads: 4 a block.
        assert_eq!(shape(8, 2).blocks(1000, 1), 250);
        assert_eq!(shape(8, 0).blocks(1000, 3), 3000);
        // Rows of one slot, one thread each: 256 outputs a block.
        assert_eq!(shape(0, 0).blocks(257, 1), 2);
        // Columns: 32 outputs a block, whatever the slots.
        let cols = RedShape {
            col_y: 8,
            ..shape(8, 2)
        };
        assert_eq!(cols.blocks(1000, 2), 64);
    }

    /// Every reduction kernel names the block it launches with (`.maxntid`), so ptxas keeps
    /// a column kernel of 32 × 32 threads within 64 registers a thread.
    #[test]
    fn kernels_name_their_block() {
        use crate::expr::{Arg, Expr};
        let c = Expr::parse("exp(a - b) * sin(a)")
            .and_then(|e| {
                e.compile(
                    &[
                        ("a", Arg::Tensor(ElemType::F32)),
                        ("b", Arg::Tensor(ElemType::F32)),
                    ],
                    None,
                )
            })
            .expect("compiles");
        let p = *c.program();
        let rows = module(&p, shape(8, 2), 90, "");
        assert!(rows.contains(".maxntid 256, 1, 1\n{"), "{rows}");
        for (y, want) in [(8, ".maxntid 32, 8, 1"), (32, ".maxntid 32, 32, 1")] {
            let cols = module(
                &p,
                RedShape {
                    col_y: y,
                    ..shape(8, 0)
                },
                90,
                "",
            );
            assert!(cols.contains(want), "{cols}");
        }
    }

    /// The measured choice: four slots a thread for one or two chunks a slot, two up to 16,
    /// one past that for 4-byte outputs and two for 16-bit ones.
    #[test]
    fn slots_a_thread_by_chunks_a_slot() {
        assert_eq!(RedShape::per_for(128, 4), 2);
        assert_eq!(RedShape::per_for(2048, 4), 2);
        assert_eq!(RedShape::per_for(2049, 4), 1);
        assert_eq!(RedShape::per_for(16384, 4), 1);
        assert_eq!(RedShape::per_for(32768, 4), 0);
        assert_eq!(RedShape::per_for(32768, 8), 1);
        assert_eq!(RedShape::per_for(1 << 20, 8), 1);
        assert_eq!(RedShape::per_for(0, 4), 2);
    }
}
