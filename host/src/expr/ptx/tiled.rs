//! The tiled shape ([`Shape::Tiled`](super::Shape::Tiled)): tiles staged through shared
//! memory for transposed inputs, its constants, parameters and body.

use super::emit::Gen;
use super::frame::Pointwise;
use super::memory::raw_ty;
use super::types::{elem, V};
use std::fmt::Write;

/// The divisions a tiled kernel takes, in order: a block's tile index by the tiles along
/// axes 0 and 1, then by the sizes of batch axes 2 and 3 (what is left is axis 4's index).
pub(crate) const TILED_DIVS: [&str; 4] = ["tx", "ty", "b2", "b3"];

/// Threads of a tiled block: 32 along axis 0 (the output's), 8 along axis 1.
pub(crate) const TILE_THREADS: (u32, u32) = (32, 8);

/// Bytes of static shared memory a kernel may declare: the tiled shape's stages fit it or
/// the plan takes another shape.
pub(crate) const STAGE_LIMIT: u32 = 48 * 1024;

/// Bytes of the tiled shape's stage of an input of `size`-byte elements (padded rows, each
/// stage 8-byte aligned).
pub(crate) fn stage_bytes(pair: bool, size: usize) -> u32 {
    let side = tile_side(pair);
    (side * (side + if pair { 2 } else { 1 }) * size as u32).next_multiple_of(8)
}

/// Elements of a tile's side: 32, 64 for paired tiles.
pub(crate) fn tile_side(pair: bool) -> u32 {
    if pair {
        64
    } else {
        32
    }
}

/// The shared array of the tiled shape's stages.
pub(super) const STAGE: &str = "sa_stage";

/// The shape's parameters after `n`: the divisions of [`TILED_DIVS`], the sizes of axes 0
/// and 1, each of the `ops` operands' strides of axes 0–4.
pub(super) fn params(ops: usize) -> Vec<String> {
    let mut params = Vec::new();
    for d in TILED_DIVS {
        params.extend(["d", "magic", "shift"].map(|s| format!(".param .u32 {d}_{s}")));
    }
    params.extend(["n0", "n1"].map(|s| format!(".param .u32 {s}")));
    for k in 0..ops {
        params.extend((0..5).map(|d| format!(".param .s32 st{k}_{d}")));
    }
    params
}

/// The tiled shape's body in `pw`'s kernel ([`Shape::Tiled`](super::Shape::Tiled),
/// parameters as [`module`](super::module) lists them): `pw`'s constants' registers, the
/// operands' global addresses and their element sizes. Returns the bytes of its stages
/// (static shared memory).
pub(super) fn body(g: &mut Gen, pw: &Pointwise, pair: bool, staged: u16, words: u16) -> u32 {
    let (p, consts, base, sizes) = (pw.p, &pw.consts[..], &pw.base[..], &pw.sizes[..]);
    let ops = base.len();
    let pf = if pair { 2u32 } else { 1 };
    let side = tile_side(pair);
    // Elements per stage row: a padding column keeps the turned reads off one bank.
    let pitch = side + pf;
    let th = TILE_THREADS.1;
    // Stage rows per thread, and column blocks (of `pf` columns) per thread.
    let (rows, blocks) = (side / th, side / (th * pf));
    let elem_k = |k: usize| elem(if k == 0 { p.out } else { p.inputs[k - 1] });
    let is_staged = |k: usize| k > 0 && staged >> k & 1 != 0;
    let mut stage_at = vec![0u32; ops];
    let mut bytes = 0u32;
    for k in (1..ops).filter(|&k| is_staged(k)) {
        stage_at[k] = bytes;
        bytes += stage_bytes(pair, sizes[k]);
    }
    let (tx, ty, rest) = (g.r(), g.r(), g.r());
    emit!(g, "mov.u32 {tx}, %tid.x;");
    emit!(g, "mov.u32 {ty}, %tid.y;");
    emit!(g, "mov.u32 {rest}, %ctaid.x;");
    // The tile's indices along axes 0 and 1 and its batch indices (axis 0 fastest).
    let mut at: Vec<String> = Vec::new();
    for d in TILED_DIVS {
        let div = g.div_params(d);
        let (q, c) = g.divmod(&rest, &div);
        at.push(c);
        emit!(g, "mov.u32 {rest}, {q};");
    }
    at.push(rest);
    let (x0, y0, n0, n1) = (g.r(), g.r(), g.r(), g.r());
    emit!(g, "mul.lo.u32 {x0}, {}, {side};", at[0]);
    emit!(g, "mul.lo.u32 {y0}, {}, {side};", at[1]);
    emit!(g, "ld.param.u32 {n0}, [n0];");
    emit!(g, "ld.param.u32 {n1}, [n1];");
    at[0] = x0.clone();
    at[1] = y0.clone();
    // Each operand's strides and the element offset of the tile's origin.
    let mut st: Vec<[String; 2]> = Vec::new();
    let mut origin: Vec<String> = Vec::new();
    for k in 0..ops {
        let o = g.r();
        emit!(g, "mov.u32 {o}, 0;");
        let mut s01 = [String::new(), String::new()];
        for (d, c) in at.iter().enumerate() {
            let s = g.r();
            emit!(g, "ld.param.s32 {s}, [st{k}_{d}];");
            emit!(g, "mad.lo.s32 {o}, {c}, {s}, {o};");
            if d < 2 {
                s01[d] = s;
            }
        }
        st.push(s01);
        origin.push(o);
    }
    let (full, t) = (g.p(), g.r());
    emit!(g, "add.u32 {t}, {x0}, {side};");
    emit!(g, "setp.le.u32 {full}, {t}, {n0};");
    emit!(g, "add.u32 {t}, {y0}, {side};");
    emit!(g, "setp.le.and.u32 {full}, {t}, {n1}, {full};");
    // Tile-local coordinate `c + step * m` (a thread index scaled and shifted).
    let coord = |g: &mut Gen, c: &str, scale: u32, add: u32| {
        let r = g.r();
        emit!(g, "mad.lo.u32 {r}, {c}, {scale}, {add};");
        r
    };
    // Global address of operand `k`'s element at tile-local `(i, j)`.
    let addr = |g: &mut Gen, k: usize, i: &str, j: &str| {
        let (o, a) = (g.r(), g.rd());
        emit!(g, "mad.lo.s32 {o}, {i}, {}, {};", st[k][0], origin[k]);
        emit!(g, "mad.lo.s32 {o}, {j}, {}, {o};", st[k][1]);
        emit!(g, "mul.wide.s32 {a}, {o}, {};", sizes[k]);
        emit!(g, "add.s64 {a}, {a}, {};", base[k]);
        a
    };
    // Whether tile-local `(i, j)` lies inside the plan.
    let inside = |g: &mut Gen, i: &str, j: &str| {
        let (p, gi, gj) = (g.p(), g.r(), g.r());
        emit!(g, "add.u32 {gi}, {x0}, {i};");
        emit!(g, "add.u32 {gj}, {y0}, {j};");
        emit!(g, "setp.lt.u32 {p}, {gi}, {n0};");
        emit!(g, "setp.lt.and.u32 {p}, {gj}, {n1}, {p};");
        p
    };
    let sbase = g.r();
    emit!(g, "mov.u32 {sbase}, {STAGE};");
    // Shared address of stage `k`'s element `(i, j)`.
    let saddr = |g: &mut Gen, k: usize, i: &str, j: &str| {
        let a = g.r();
        emit!(g, "mad.lo.u32 {a}, {i}, {pitch}, {j};");
        emit!(g, "mad.lo.u32 {a}, {a}, {}, {sbase};", sizes[k]);
        emit!(g, "add.u32 {a}, {a}, {};", stage_at[k]);
        a
    };
    // A full or a partial tile: `full_part(full code, partial code)`, both writing the same
    // registers.
    let branch = |g: &mut Gen, fast: &mut dyn FnMut(&mut Gen), slow: &mut dyn FnMut(&mut Gen)| {
        let (part, join) = (g.label(), g.label());
        emit!(g, "@!{full} bra {part};");
        fast(g);
        emit!(g, "bra.uni {join};");
        emit!(g, "{part}:");
        slow(g);
        emit!(g, "{join}:");
    };

    // Stage: thread (tx, ty) reads elements (ty + 8r, pf·tx + e) of each staged input,
    // consecutive threads along axis 1.
    let stage_ks: Vec<usize> = (1..ops).filter(|&k| is_staged(k)).collect();
    let coords: Vec<(String, String)> = (0..rows)
        .map(|r| (coord(g, &ty, 1, th * r), coord(g, &tx, pf, 0)))
        .collect();
    let raw: Vec<Vec<Vec<String>>> = stage_ks
        .iter()
        .map(|&k| {
            (0..rows)
                .map(|_| (0..pf).map(|_| g.raw_reg(elem_k(k))).collect())
                .collect()
        })
        .collect();
    branch(
        g,
        &mut |g| {
            for (s, &k) in stage_ks.iter().enumerate() {
                let e = elem_k(k);
                for (r, (i, j)) in coords.iter().enumerate() {
                    let a = addr(g, k, i, j);
                    g.vector_access("ld.global", raw_ty(e), e.size(), &a, &raw[s][r]);
                }
            }
        },
        &mut |g| {
            for (s, &k) in stage_ks.iter().enumerate() {
                let e = elem_k(k);
                for (r, (i, j)) in coords.iter().enumerate() {
                    for (c, reg) in raw[s][r].iter().enumerate() {
                        let jc = coord(g, j, 1, c as u32);
                        g.zero_raw(e, reg);
                        let live = inside(g, i, &jc);
                        let a = addr(g, k, i, &jc);
                        emit!(g, "@{live} ld.global.{} {reg}, [{a}];", raw_ty(e));
                    }
                }
            }
        },
    );
    for (s, &k) in stage_ks.iter().enumerate() {
        let e = elem_k(k);
        for (r, (i, j)) in coords.iter().enumerate() {
            let a = saddr(g, k, i, j);
            g.vector_access("st.shared", raw_ty(e), e.size(), &a, &raw[s][r]);
        }
    }
    emit!(g, "bar.sync 0;");

    // Compute: thread (tx, ty) takes rows pf·tx + a and columns pf·(ty + 8r) + c,
    // consecutive threads along axis 0. Element index: (r, c, a).
    let n_el = (blocks * pf * pf) as usize;
    let el = |r: u32, c: u32, a: u32| ((r * pf + c) * pf + a) as usize;
    let rows_of: Vec<String> = (0..pf).map(|a| coord(g, &tx, pf, a)).collect();
    let cols_of: Vec<Vec<String>> = (0..blocks)
        .map(|r| {
            (0..pf)
                .map(|c| coord(g, &ty, pf, pf * th * r + c))
                .collect()
        })
        .collect();
    let mut raws: Vec<Vec<String>> = vec![Vec::new(); ops];
    for k in 1..ops {
        raws[k] = (0..n_el).map(|_| g.raw_reg(elem_k(k))).collect();
    }
    let paired = |k: usize| pair && (k == 0 || words >> k & 1 != 0);
    branch(
        g,
        &mut |g| {
            for k in (1..ops).filter(|&k| !is_staged(k)) {
                let e = elem_k(k);
                for r in 0..blocks {
                    for c in 0..pf {
                        let j = &cols_of[r as usize][c as usize];
                        if paired(k) {
                            let regs: Vec<String> =
                                (0..pf).map(|a| raws[k][el(r, c, a)].clone()).collect();
                            let ad = addr(g, k, &rows_of[0], j);
                            g.vector_access("ld.global", raw_ty(e), e.size(), &ad, &regs);
                        } else {
                            for a in 0..pf {
                                let ad = addr(g, k, &rows_of[a as usize], j);
                                let reg = &raws[k][el(r, c, a)];
                                emit!(g, "ld.global.{} {reg}, [{ad}];", raw_ty(e));
                            }
                        }
                    }
                }
            }
        },
        &mut |g| {
            for k in (1..ops).filter(|&k| !is_staged(k)) {
                let e = elem_k(k);
                for r in 0..blocks {
                    for c in 0..pf {
                        for a in 0..pf {
                            let (i, j) = (&rows_of[a as usize], &cols_of[r as usize][c as usize]);
                            let reg = &raws[k][el(r, c, a)];
                            g.zero_raw(e, reg);
                            let live = inside(g, i, j);
                            let ad = addr(g, k, i, j);
                            emit!(g, "@{live} ld.global.{} {reg}, [{ad}];", raw_ty(e));
                        }
                    }
                }
            }
        },
    );
    // The staged inputs from their stages: row pf·tx + a, columns pf·cb .. + pf.
    for &k in &stage_ks {
        let e = elem_k(k);
        for r in 0..blocks {
            for a in 0..pf {
                let regs: Vec<String> = (0..pf).map(|c| raws[k][el(r, c, a)].clone()).collect();
                let sa = saddr(g, k, &rows_of[a as usize], &cols_of[r as usize][0]);
                g.vector_access("ld.shared", raw_ty(e), e.size(), &sa, &regs);
            }
        }
    }
    let results: Vec<V> = (0..n_el)
        .map(|x| {
            let lane: Vec<V> = (1..ops)
                .map(|k| {
                    let reg = raws[k][x].clone();
                    g.widen(elem_k(k), &reg)
                })
                .collect();
            g.program(p, &lane, consts)
        })
        .collect();
    branch(
        g,
        &mut |g| {
            for r in 0..blocks {
                for c in 0..pf {
                    let j = &cols_of[r as usize][c as usize];
                    if paired(0) {
                        let vals: Vec<V> = (0..pf).map(|a| results[el(r, c, a)].clone()).collect();
                        let ad = addr(g, 0, &rows_of[0], j);
                        g.store(p, &vals, &ad);
                    } else {
                        for a in 0..pf {
                            let ad = addr(g, 0, &rows_of[a as usize], j);
                            g.store(p, &[results[el(r, c, a)].clone()], &ad);
                        }
                    }
                }
            }
        },
        &mut |g| {
            for r in 0..blocks {
                for c in 0..pf {
                    for a in 0..pf {
                        let (i, j) = (&rows_of[a as usize], &cols_of[r as usize][c as usize]);
                        let live = inside(g, i, j);
                        let skip = g.label();
                        emit!(g, "@!{live} bra {skip};");
                        let ad = addr(g, 0, i, j);
                        g.store(p, &[results[el(r, c, a)].clone()], &ad);
                        emit!(g, "{skip}:");
                    }
                }
            }
        },
    );
    bytes
}
