//! The vector shape ([`Shape::Vector`](super::Shape::Vector)): `lanes` elements along
//! dimension 0 per thread, one vector access per operand (unit stride) or one element for
//! all lanes (stride 0), over one dimension (with a scalar tail; `per` vectors a thread, their
//! loads issued together) or rows of a multiple of `lanes` elements.

use super::emit::Gen;
use super::frame::Pointwise;
use super::types::V;
use std::fmt::Write;

/// The shape's parameters after `n`: `tail`, and with `rows` the division by vectors per row
/// and each of the `ops` operands' row stride.
pub(super) fn params(rows: bool, ops: usize) -> Vec<String> {
    let mut params = vec![".param .u32 tail".to_string()];
    if rows {
        params.extend(["d", "magic", "shift"].map(|s| format!(".param .u32 row_{s}")));
        params.extend((0..ops).map(|k| format!(".param .s32 rs{k}")));
    }
    params
}

/// The shape's body in `pw`'s kernel.
pub(super) fn body(g: &mut Gen, pw: &Pointwise, lanes: u8, bcast: u16, rows: bool, per: u8) {
    let (p, ops) = (pw.p, pw.ops);
    let (tid, ntid, ctaid) = (pw.tid.as_str(), pw.ntid.as_str(), pw.ctaid.as_str());
    let (gid, n) = (pw.gid.as_str(), pw.n.as_str());
    let lanes = lanes as usize;
    if rows {
        let done = g.p();
        emit!(g, "setp.ge.u32 {done}, {gid}, {n};");
        emit!(g, "@{done} bra DONE;");
        // row = gid / (vectors per row), column = (gid - row * per_row) * lanes.
        let div = g.div_params("row");
        let (q, col) = g.divmod(gid, &div);
        emit!(g, "mul.lo.u32 {col}, {col}, {lanes};");
        let offs: Vec<String> = (0..ops)
            .map(|k| {
                let (rs, o) = (g.r(), g.r());
                emit!(g, "ld.param.s32 {rs}, [rs{k}];");
                if bcast >> k & 1 != 0 {
                    emit!(g, "mul.lo.s32 {o}, {q}, {rs};");
                } else {
                    emit!(g, "mad.lo.s32 {o}, {q}, {rs}, {col};");
                }
                o
            })
            .collect();
        let addrs = pw.addresses(g, &offs);
        let ins = pw.inputs_at(g, &addrs, lanes, bcast);
        let out = pw.run(g, &ins, lanes);
        g.store(p, &out, &addrs[0]);
    } else {
        // Vector `j` of thread `tid` of block `b`: `(b * per + j) * ntid + tid`, each
        // guarded by `< n`: the loads of all `per`, then the program, then the stores.
        let (first, zero) = (g.r(), g.r());
        emit!(g, "mul.lo.u32 {first}, {ctaid}, {ntid};");
        emit!(g, "mad.lo.u32 {first}, {first}, {per}, {tid};");
        emit!(g, "mov.u32 {zero}, 0;");
        let at = |k: usize, i: &String| if bcast >> k & 1 != 0 { &zero } else { i }.clone();
        let mut loaded = Vec::new();
        for j in 0..per {
            let (v, inside, col) = (g.r(), g.p(), g.r());
            emit!(g, "mad.lo.u32 {v}, {ntid}, {j}, {first};");
            emit!(g, "setp.lt.u32 {inside}, {v}, {n};");
            emit!(g, "mul.lo.u32 {col}, {v}, {lanes};");
            let offs: Vec<String> = (0..ops).map(|k| at(k, &col)).collect();
            let addrs = pw.addresses(g, &offs);
            let ins = g.guarded(&inside, |g| pw.inputs_at(g, &addrs, lanes, bcast));
            loaded.push((inside, addrs, ins));
        }
        let outs: Vec<Vec<V>> = loaded
            .iter()
            .map(|(_, _, ins)| pw.run(g, ins, lanes))
            .collect();
        for ((inside, addrs, _), out) in loaded.iter().zip(&outs) {
            g.guarded(inside, |g| g.store(p, out, &addrs[0]));
        }
        // The tail: element `n * lanes + gid` for `gid < tail`.
        let (tail, in_tail, i) = (g.r(), g.p(), g.r());
        emit!(g, "ld.param.u32 {tail}, [tail];");
        emit!(g, "setp.ge.u32 {in_tail}, {gid}, {tail};");
        emit!(g, "@{in_tail} bra DONE;");
        emit!(g, "mad.lo.u32 {i}, {n}, {lanes}, {gid};");
        let offs: Vec<String> = (0..ops).map(|k| at(k, &i)).collect();
        let addrs = pw.addresses(g, &offs);
        let ins = pw.inputs_at(g, &addrs, 1, bcast);
        let out = pw.run(g, &ins, 1);
        g.store(p, &out, &addrs[0]);
    }
}
