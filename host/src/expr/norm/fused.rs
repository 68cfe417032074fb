//! The fused row kernel of a normalisation program: every stage and the result in one
//! launch, a block of `SLOTS` threads a row (tier 1's generator,
//! `expr::ptx::norm`), where the call fits it: one normalised axis (after dropping
//! axes of size 1), at most six kept axes, every stage of one accumulator type, every
//! part a program tier 1 writes, offsets within 31 bits. Rows of a few chunks a thread
//! are read once (their values kept in registers); longer rows loop, each stage reading
//! the row again.

use super::cpu::{sources, Source};
use super::plan::Shapes;
use super::CompiledNorm;
use crate::alias::{check_aliasing, Region};
use crate::error::Result;
use crate::expr::ptx::{self, NormPart, NormShape, NormSrc};
use crate::expr::tier1::{self, ModuleKey};
use crate::expr::{RawTensor, Scalar, NAMES};
use crate::gpu::{Gpu, LaunchShape};
use crate::layout::Layout;
use cudarc::driver::sys::CUstream;
use gpu_kernels::elem::ElemType;
use gpu_kernels::FastDiv;
use std::ffi::c_void;
use strided_apply_expr::reduce::{group_len, groups_used, SLOTS};
use strided_apply_expr::value::elem_of;
use strided_apply_expr::{Program, MAX_CONSTS};

/// Most values of the row's varying inputs a thread keeps in registers (rounds × chunk ×
/// inputs) in the read-once form.
const CACHED_VALUES: u32 = 64;
/// Most chunk rounds a slot takes in the read-once form.
const CACHED_ROUNDS: u32 = 16;

/// A call's layout as the row kernel takes it.
pub(super) struct RowPlan {
    pub(super) shape: NormShape,
    n: u32,
    rows: u32,
    /// Kept dimensions' sizes (innermost first) and each operand's strides along them.
    kept: Vec<u32>,
    kept_strides: Vec<Vec<i32>>,
    /// Each operand's row stride.
    rs: Vec<i32>,
}

/// Operand `t`'s strides over `sh.full`: an input broadcast from the right (size-1 and
/// missing axes stride 0); the output of a one-value-a-row program (`reduced`) with
/// stride 0 along the normalised axes, which it keeps as 1 or drops.
fn full_strides(sh: &Shapes, t: &RawTensor<'_>, reduced: bool) -> Vec<isize> {
    let rank = sh.full.len();
    if reduced && t.shape.len() < rank {
        let mut st = vec![0isize; rank];
        let kept = (0..rank).filter(|a| !sh.axes.contains(a));
        for (i, a) in kept.enumerate() {
            st[a] = if t.shape[i] == 1 { 0 } else { t.strides[i] };
        }
        return st;
    }
    sh.input_strides(t.shape, t.strides)
}

impl CompiledNorm {
    /// The row kernel's layout for this call, `None` where the kernel does not take it.
    pub(super) fn row_plan(
        &self,
        sh: &Shapes,
        ops: &[RawTensor<'_>],
        types: &[ElemType],
    ) -> Option<RowPlan> {
        let n = u32::try_from(sh.len)
            .ok()
            .filter(|&n| n >= 1 && n <= i32::MAX as u32)?;
        let rows = u32::try_from(sh.rows)
            .ok()
            .filter(|&r| r >= 1 && r <= i32::MAX as u32)?;
        let wide = *self.accs.first()? == ElemType::F64;
        if self.accs.iter().any(|&a| (a == ElemType::F64) != wide) || ops.len() > 16 {
            return None;
        }
        let w: u32 = if wide { 2 } else { 4 };
        let rank = sh.full.len();
        let red: Vec<usize> = sh
            .axes
            .iter()
            .copied()
            .filter(|&a| sh.full[a] > 1)
            .collect();
        if red.len() > 1 {
            return None;
        }
        let axis = red.first().copied().unwrap_or(sh.axes[0]);
        let kept_axes: Vec<usize> = (0..rank)
            .rev()
            .filter(|a| !sh.axes.contains(a) && sh.full[*a] > 1)
            .collect();
        if kept_axes.len() > 6 {
            return None;
        }
        let strides: Vec<Vec<isize>> = ops
            .iter()
            .enumerate()
            .map(|(k, t)| full_strides(sh, t, k == 0 && !self.rowwise))
            .collect();
        // Offsets within 31 bits: every element an operand reaches, from its element 0.
        for st in &strides {
            let reach: i128 = (0..rank)
                .map(|a| st[a].unsigned_abs() as i128 * (sh.full[a] as i128 - 1).max(0))
                .sum();
            if reach > i32::MAX as i128 {
                return None;
            }
        }
        let mut kept: Vec<u32> = kept_axes.iter().map(|&a| sh.full[a] as u32).collect();
        let mut kept_strides: Vec<Vec<i32>> = strides
            .iter()
            .map(|st| kept_axes.iter().map(|&a| st[a] as i32).collect())
            .collect();
        if kept.is_empty() {
            kept.push(1);
            for k in &mut kept_strides {
                k.push(0);
            }
        }
        let rs: Vec<i32> = strides.iter().map(|st| st[axis] as i32).collect();
        // Inputs read along the row: kept in registers in the read-once form, but one row
        // shared by every row (a weight), which is read again from L1 at each use.
        let (mut bcast, mut shared) = (0u16, 0u16);
        let mut varying = 0;
        let mut min_size = usize::MAX;
        for k in 0..ops.len() {
            if rs[k] == 0 && k > 0 {
                bcast |= 1 << k;
                continue;
            }
            if rs[k] == 1 {
                min_size = min_size.min(types[k].size());
            }
            if k > 0 {
                if kept_strides[k].iter().all(|&s| s == 0) {
                    shared |= 1 << k;
                } else {
                    varying += 1;
                }
            }
        }
        let glen = group_len(n, w);
        let rounds = glen / (SLOTS * w);
        let one_group = groups_used(n, w) == 1;
        // The slots that receive elements, and a thread's adjacent slots: one 16-byte
        // vector of the narrowest unit-stride operand.
        let chunks = n.div_ceil(w);
        let span = if one_group && chunks <= SLOTS {
            chunks.next_power_of_two()
        } else {
            SLOTS
        };
        let mut adjacent = if min_size == usize::MAX {
            1
        } else {
            (16 / (w as usize * min_size)).clamp(1, 4) as u32
        };
        adjacent = adjacent.min(span);
        // Vectors of `adjacent` chunks where every unit-stride operand's are whole and
        // aligned; else chunks.
        let vectors = |adj: u32| -> u16 {
            let mut unit = 0u16;
            for k in 0..ops.len() {
                if rs[k] != 1 {
                    continue;
                }
                let size = types[k].size() as i64;
                let align = (adj as i64 * w as i64 * size).min(16);
                let aligned = ops[k].ptr as i64 % align == 0
                    && kept
                        .iter()
                        .zip(&kept_strides[k])
                        .all(|(&d, &s)| d == 1 || (s as i64 * size) % align == 0);
                if aligned && n % (adj * w) == 0 {
                    unit |= 1 << k;
                }
            }
            unit
        };
        let mut unit = vectors(adjacent);
        if adjacent > 1 && unit != vectors(1) {
            adjacent = 1;
            unit = vectors(1);
        }
        // Threads a row and slot sets a thread for `adjacent` slots a thread; whether the
        // row then fits the registers (read once).
        let layout = |adjacent: u32| {
            let per = span / adjacent;
            let (threads, sets) = if rounds == 1 && one_group {
                // Short rows: up to four slot sets a thread, a warp or more a row where the
                // row has that many vectors.
                let t = if per <= 32 { per } else { (per / 4).max(32) };
                (t, per / t)
            } else {
                (per, 1)
            };
            let cached = self.cached_rows
                && one_group
                && rounds <= CACHED_ROUNDS
                && rounds * sets * adjacent * w * varying.max(1) <= CACHED_VALUES;
            (threads, cached)
        };
        let (mut threads, mut cached) = layout(adjacent);
        // A row that fits the registers only as one chunk a thread is read once that way
        // (narrower loads; rereading the row costs more).
        if !cached && adjacent > 1 && layout(1).1 {
            adjacent = 1;
            unit = vectors(1);
            (threads, cached) = layout(1);
        }
        let threads = if cached { threads } else { SLOTS / adjacent };
        let span = if cached { span } else { SLOTS };
        Some(RowPlan {
            shape: NormShape {
                ops: ops.len() as u8,
                nkept: kept.len() as u8,
                unit,
                bcast,
                shared,
                cached: if cached { rounds as u8 } else { 0 },
                rowwise: self.rowwise,
                wide,
                threads: threads as u16,
                adjacent: adjacent as u8,
                span: span as u16,
            },
            n,
            rows,
            kept,
            kept_strides,
            rs,
        })
    }

    /// Launches the program as one kernel where the call fits it: `false` (nothing
    /// launched) where it does not, for the composition to run.
    ///
    /// # Safety
    /// As for [`launch`](Self::launch).
    pub(super) unsafe fn launch_fused(
        &self,
        gpu: &Gpu,
        stream: CUstream,
        sh: &Shapes,
        out: RawTensor<'_>,
        inputs: &[RawTensor<'_>],
        scalars: &[(&str, Scalar)],
    ) -> Result<bool> {
        if !self.fused {
            return Ok(false);
        }
        let parts: Vec<&crate::expr::Compiled> = self
            .stages
            .iter()
            .map(|(_, c)| c)
            .chain([&self.result])
            .collect();
        let mut programs: Vec<Program> = Vec::new();
        for c in &parts {
            let p = c.bound(&Self::scalars_of(c, scalars))?.into_owned();
            if !ptx::supports(&p) {
                return Ok(false);
            }
            programs.push(p);
        }
        let (srcs, types) = self.row_sources(&parts, &programs);
        // Checks of the operands (types, views, pointers) and of the output against the
        // inputs (shared elements only at the same positions, as a pointwise launch).
        let mut ops: Vec<RawTensor<'_>> = vec![out];
        ops.extend_from_slice(inputs);
        let mut layouts: Vec<Layout> = Vec::new();
        for (k, t) in ops.iter().enumerate() {
            let want = types.get(k).copied().flatten().unwrap_or(t.elem);
            layouts.push(t.check(NAMES.get(k).copied().unwrap_or("input"), want)?);
        }
        let types: Vec<ElemType> = ops
            .iter()
            .zip(&types)
            .map(|(t, w)| w.unwrap_or(t.elem))
            .collect();
        {
            let region = |k: usize| Region {
                operand: NAMES.get(k).copied().unwrap_or("input"),
                buffer: ops[k].ptr,
                elem_size: types[k].size(),
                layout: &layouts[k],
            };
            let ins: Vec<Region<'_>> = (1..ops.len()).map(region).collect();
            check_aliasing(&region(0), &ins)?;
        }
        let Some(plan) = self.row_plan(sh, &ops, &types) else {
            return Ok(false);
        };
        let shape = plan.shape;
        let key = ModuleKey {
            programs: programs
                .iter()
                .map(|p| Program {
                    consts: [0; MAX_CONSTS],
                    ..*p
                })
                .collect(),
            shape: shape_words(
                &shape,
                &self
                    .stages
                    .iter()
                    .map(|(op, _)| *op as u64)
                    .collect::<Vec<_>>(),
                &srcs,
                &types,
            ),
        };
        let write = |sm: u32, lib: &str| self.row_text(&programs, &srcs, shape, &types, sm, lib);
        let Some(f) = tier1::module_function(gpu, stream, &key, &write)? else {
            return Ok(false);
        };
        // The parameters, in the order `ptx::norm_module` declares them.
        let w: u32 = if shape.wide { 2 } else { 4 };
        let glen = group_len(plan.n, w);
        let mut head: Vec<u64> = ops.iter().map(|t| t.ptr).collect();
        let mut consts: Vec<[u64; MAX_CONSTS]> = programs.iter().map(|p| p.consts).collect();
        let mut tail: Vec<u64> = vec![
            plan.rows as u64,
            plan.n as u64,
            glen as u64,
            groups_used(plan.n, w) as u64,
            (glen / (SLOTS * w)) as u64,
        ];
        for &d in &plan.kept[..plan.kept.len() - 1] {
            let Some(f) = FastDiv::new(d) else {
                return Ok(false);
            };
            tail.extend([f.d, f.magic, f.shift].map(u64::from));
        }
        for ks in &plan.kept_strides {
            tail.extend(ks.iter().map(|&s| s as u32 as u64));
        }
        tail.extend(plan.rs.iter().map(|&s| s as u32 as u64));
        let mut args: Vec<*mut c_void> = Vec::new();
        args.extend(head.iter_mut().map(|s| s as *mut u64 as *mut c_void));
        args.extend(consts.iter_mut().map(|c| c.as_mut_ptr() as *mut c_void));
        args.extend(tail.iter_mut().map(|s| s as *mut u64 as *mut c_void));
        let launch = LaunchShape {
            grid: plan.rows.div_ceil(shape.rows_per_block()),
            block: (shape.block(), 1),
            shared_bytes: 0,
        };
        // SAFETY: the parameter list is `ptx::norm_module`'s for this shape (addresses,
        // each part's constants, the row's sizes, the kept divisions and strides, the row
        // strides, in that order); every operand was checked against its type and view, the
        // kernel reaches only the elements of each operand's broadcast layout over
        // `sh.full` (offsets proved within 31 bits), vectors only where `unit` says the
        // chunks are whole and aligned; the output shares elements with an input only at
        // the same positions, which each thread reads before it writes them; a block of
        // `shape.threads` threads a row, `rows_per_block` rows a block of `shape.block()`
        // threads (rows past the end store nothing); the caller's stream.
        unsafe { tier1::launch_function(gpu, &f, launch, stream, &mut args)? };
        Ok(true)
    }
}

impl CompiledNorm {
    /// Where each part's inputs come from (the row kernel's operands: the output, then the
    /// call's inputs), and each operand's element type as the parts read it (the output
    /// the program's; an input no part reads, `None`).
    fn row_sources(
        &self,
        parts: &[&crate::expr::Compiled],
        programs: &[Program],
    ) -> (Vec<Vec<NormSrc>>, Vec<Option<ElemType>>) {
        let mut types: Vec<Option<ElemType>> = vec![None; 1 + self.inputs.len()];
        types[0] = Some(self.out);
        let srcs = parts
            .iter()
            .zip(programs)
            .map(|(c, p)| {
                sources(self, c)
                    .iter()
                    .enumerate()
                    .map(|(i, s)| match *s {
                        Source::Input(k) => {
                            types[k + 1].get_or_insert(elem_of(p.inputs[i]));
                            NormSrc::Operand(k as u8 + 1)
                        }
                        Source::Stage(j) => NormSrc::Stage(j as u8),
                    })
                    .collect()
            })
            .collect();
        (srcs, types)
    }

    /// The row kernel's text over the parts' `programs` (stages, then the result) reading
    /// `srcs`, for `shape` over operands of `types`.
    fn row_text(
        &self,
        programs: &[Program],
        srcs: &[Vec<NormSrc>],
        shape: NormShape,
        types: &[ElemType],
        sm: u32,
        lib: &str,
    ) -> String {
        let ops = self.stages.iter().map(|(op, _)| Some(*op)).chain([None]);
        let parts: Vec<NormPart<'_>> = programs
            .iter()
            .zip(srcs)
            .zip(ops)
            .map(|((p, s), op)| NormPart { op, p, srcs: s })
            .collect();
        ptx::norm_module(&parts, shape, types, sm, lib)
    }

    /// The row kernel's text for `shape`, the programs' scalars zero, over inputs of the
    /// types the program was compiled for (for the generator's tests).
    #[cfg(test)]
    pub(crate) fn row_module(
        &self,
        shape: NormShape,
        sm: u32,
        lib: &str,
    ) -> (String, Vec<Program>) {
        let parts: Vec<&crate::expr::Compiled> = self
            .stages
            .iter()
            .map(|(_, c)| c)
            .chain([&self.result])
            .collect();
        let programs: Vec<Program> = parts.iter().map(|c| *c.program()).collect();
        let (srcs, types) = self.row_sources(&parts, &programs);
        let types: Vec<ElemType> = types.iter().map(|t| t.unwrap_or(self.out)).collect();
        (
            self.row_text(&programs, &srcs, shape, &types, sm, lib),
            programs,
        )
    }
}

/// The row kernel's key words: its shape, the stages' reductions, each part's sources and
/// the operands' types.
fn shape_words(s: &NormShape, ops: &[u64], srcs: &[Vec<NormSrc>], types: &[ElemType]) -> Vec<u64> {
    let mut v = vec![
        s.ops as u64,
        s.nkept as u64,
        s.unit as u64,
        s.bcast as u64,
        s.cached as u64,
        s.rowwise as u64,
        s.wide as u64,
        s.shared as u64,
        s.threads as u64,
        s.adjacent as u64,
        s.span as u64,
    ];
    v.extend_from_slice(ops);
    for p in srcs {
        v.push(u64::MAX);
        v.extend(p.iter().map(|s| match *s {
            NormSrc::Operand(k) => k as u64,
            NormSrc::Stage(j) => 1 << 32 | j as u64,
        }));
    }
    v.extend(types.iter().map(|t| *t as u64));
    v
}
