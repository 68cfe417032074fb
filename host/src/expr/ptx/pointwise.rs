//! The pointwise kernels (the vector, strided and tiled shapes): the module of one, its
//! parameters, the prologue and the thread's indices around the shape's body.

use super::emit::Gen;
use super::frame::Pointwise;
use super::kernel::{prologue, text};
use super::shape::Shape;
use super::types::elem;
use super::{strided, tiled, vector};
use std::fmt::Write;
use strided_apply_expr::ir::Program;

/// The module of `p` for a pointwise `shape` ([`module`](super::module) lists the
/// parameters).
pub(super) fn module(p: &Program, shape: Shape, sm: u32, lib: &str) -> String {
    let mut g = Gen {
        sm,
        lib: lib.to_string(),
        ..Gen::default()
    };
    // Bytes of the tiled shape's stages.
    let mut shared = 0;
    let ops = 1 + p.n_inputs as usize;
    let sizes: Vec<usize> = (0..ops)
        .map(|k| elem(if k == 0 { p.out } else { p.inputs[k - 1] }).size())
        .collect();
    let mut params: Vec<String> = (0..ops).map(|k| format!(".param .u64 ptr{k}")).collect();
    params.push(".param .align 8 .b8 kc[128]".into());
    params.push(".param .u32 n".into());
    match shape {
        Shape::Vector { rows, .. } => params.extend(vector::params(rows, ops)),
        Shape::Strided { rank } => params.extend(strided::params(rank, ops)),
        // Written by `reduce::module`.
        Shape::Reduce(_) => {}
        Shape::Tiled { .. } => params.extend(tiled::params(ops)),
    }
    let (base, consts) = prologue(&mut g, p, ops);
    let (tid, ntid, ctaid, nctaid) = (g.r(), g.r(), g.r(), g.r());
    emit!(g, "mov.u32 {tid}, %tid.x;");
    emit!(g, "mov.u32 {ntid}, %ntid.x;");
    emit!(g, "mov.u32 {ctaid}, %ctaid.x;");
    emit!(g, "mov.u32 {nctaid}, %nctaid.x;");
    let gid = g.r();
    emit!(g, "mad.lo.u32 {gid}, {ctaid}, {ntid}, {tid};");
    let n = g.r();
    emit!(g, "ld.param.u32 {n}, [n];");
    let pw = Pointwise {
        p,
        ops,
        sizes,
        base,
        consts,
        tid,
        ntid,
        ctaid,
        nctaid,
        gid,
        n,
    };
    match shape {
        Shape::Vector {
            lanes,
            bcast,
            rows,
            per,
        } => vector::body(&mut g, &pw, lanes, bcast, rows, per),
        Shape::Strided { rank } => strided::body(&mut g, &pw, rank),
        Shape::Tiled {
            pair,
            staged,
            words,
        } => shared = tiled::body(&mut g, &pw, pair, staged, words),
        Shape::Reduce(_) => {}
    }
    emit!(g, "DONE:");
    emit!(g, "ret;");

    text(&g, &params, shared)
}
