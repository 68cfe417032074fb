//! Reductions of expressions in one pass: `sum`, `prod`, `amin`, `amax` or `mean` of an
//! expression's values over any axes, each value computed where the reduction reads it
//! (no temporary), on the GPU and on the CPU twin with the same code
//! ([`strided_apply_expr::reduce`]) and the library's reduction order, so the two agree
//! bit for bit.
//!
//! The output's element type is the compiled expression's; each value rounds to it once
//! (as [`Compiled::run`] would store it) before it is folded, and the accumulator is its
//! math type (`f32` for 16-bit floats, integers wrap at their own width), as the library's
//! `reduce`. The output's shape says whether the reduced axes are kept, as for `reduce`:
//! the broadcast shape with each reduced axis 1, or without them.
//!
//! ```
//! # use host as strided_apply; // the examples name the root crate, which re-exports this one
//! use strided_apply::expr::{Arg, Expr, HostTensor, HostTensorMut, ReduceOp};
//! use strided_apply::{ElemType::F32, Layout};
//! let f = Expr::parse("(a - b) * (a - b)")?
//!     .compile(&[("a", Arg::Tensor(F32)), ("b", Arg::Tensor(F32))], None)?;
//! let a = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]; // [[1, 2, 3], [4, 5, 6]]
//! let b = [1.0f32, 1.0, 1.0]; // a row, broadcast
//! let (la, lb, lo) = (Layout::contiguous(&[2, 3])?, Layout::contiguous(&[3])?, Layout::contiguous(&[2])?);
//! let mut out = [0.0f32; 2];
//! f.reduce_cpu(
//!     ReduceOp::Sum,
//!     HostTensorMut::new(bytemuck::cast_slice_mut(&mut out), F32, &lo),
//!     &[HostTensor::new(bytemuck::cast_slice(&a), F32, &la), HostTensor::new(bytemuck::cast_slice(&b), F32, &lb)],
//!     &[],
//!     &[1],
//! )?;
//! assert_eq!(out, [0.0 + 1.0 + 4.0, 9.0 + 16.0 + 25.0]);
//! # Ok::<(), strided_apply::Error>(())
//! ```

use super::device::DeviceArg;
use super::tier1::Deferred;
use super::{Compiled, NAMES};
use crate::alias::Region;
use crate::error::{Error, Result};
use crate::gpu::{Gpu, LaunchShape};
use crate::launch::DIV_ONE;
use crate::layout::Layout;
use crate::operand::{HostTensor, HostTensorMut, RawTensor};
use crate::reduce::{
    check_blocks, check_reduce_aliasing, fast_div, plan_dims, row_blocks, Scratch,
};
use crate::tensor::DeviceTensor;
use crate::twin::SendPtr;
use cudarc::driver::sys::CUstream;
use gpu_kernels::dispatch::Scalar;
use gpu_kernels::elem::{Elem, ElemType};
use rayon::prelude::*;
use std::ffi::c_void;
use strided_apply_expr::kernel::{Pointers, MODULE, OPERANDS, STAGED_BYTES};
pub use strided_apply_expr::reduce::ReduceOp;
use strided_apply_expr::reduce::{
    self as body, Geometry, FINAL_BLOCK, FINAL_KERNEL, KEPT_DIMS, RED_DIMS, SLOTS,
};
use strided_apply_expr::value::{self, narrow};
use strided_apply_expr::{Class, Program, MAX_INPUTS};

/// Resident blocks per SM the group kernels' grid allows for (their registers hold two to
/// four blocks of 256 threads per SM).
const PERSISTENT_PER_SM: u32 = 4;

/// A checked reduction of a bound program: its geometry and each operand's base element.
struct Planned {
    g: Geometry,
    base: [usize; OPERANDS],
}

/// The element types of a bound program's operands, the output first.
fn types(p: &Program, n: usize) -> Vec<ElemType> {
    (0..n)
        .map(|k| value::elem_of(if k == 0 { p.out } else { p.inputs[k - 1] }))
        .collect()
}

/// Plans `op` over `axes` of program `p` for the checked `layouts` (output first): the
/// reduction takes the output's type, the library's checks and order.
fn plan(p: &Program, op: ReduceOp, layouts: &[Layout], axes: &[usize]) -> Result<Option<Planned>> {
    let out = value::elem_of(p.out);
    let class = Class::of(out)
        .filter(|&c| op.takes(c))
        .ok_or_else(|| Error::ExprType {
            reason: format!(
                "`{}` reduces {} values; the expression gives {} (cast it, e.g. `float(...)`)",
                op.name(),
                if op == ReduceOp::Mean {
                    "float"
                } else {
                    "numeric"
                },
                out.name()
            ),
        })?;
    let ins: Vec<&Layout> = layouts[1..].iter().collect();
    let empty = op.empty(class);
    let Some(d) = plan_dims::<OPERANDS>(
        &layouts[0],
        &ins,
        &NAMES[1..layouts.len()],
        axes,
        empty.is_some(),
    )?
    else {
        return Ok(None);
    };
    let w = body::chunk(out.size());
    let groups = body::groups_used(d.n, w);
    let mut g = Geometry {
        n: d.n,
        group_len: body::group_len(d.n, w),
        groups,
        outputs: 0,
        row_shift: body::row_shift(d.n, w),
        op: op as u32,
        blocks: 0,
        nkept: d.kept.len().max(1) as u32,
        nred: d.red.len().max(1) as u32,
        empty: empty.map_or(0, |v| narrow(class, v, out)),
        kept: [DIV_ONE; KEPT_DIMS],
        kept_strides: [[0; KEPT_DIMS]; OPERANDS],
        red: [DIV_ONE; RED_DIMS],
        red_strides: [[0; RED_DIMS]; MAX_INPUTS],
    };
    for (i, (size, s)) in d.kept.iter().enumerate() {
        g.kept[i] = fast_div(*size)?;
        for (k, &st) in s.iter().enumerate() {
            g.kept_strides[k][i] = st as i32 as u32;
        }
    }
    for (i, (size, s)) in d.red.iter().enumerate() {
        g.red[i] = fast_div(*size)?;
        for (k, &st) in s[1..].iter().enumerate() {
            g.red_strides[k][i] = st as i32 as u32;
        }
    }
    let blocks = row_blocks(d.outputs, g.row_shift) * groups as u64;
    check_blocks(blocks, d.outputs, groups)?;
    g.blocks = blocks as u32;
    g.outputs = d.outputs as u32;
    Ok(Some(Planned { g, base: d.base }))
}

/// Checks raw tensors (output first) against the program's types and the reduction's
/// aliasing rule (the output apart from every input), then plans.
fn check_and_plan(
    p: &Program,
    op: ReduceOp,
    t: &[RawTensor<'_>],
    axes: &[usize],
) -> Result<Option<Planned>> {
    let types = types(p, t.len());
    let layouts = t
        .iter()
        .enumerate()
        .map(|(k, t)| t.check(NAMES[k], types[k]))
        .collect::<Result<Vec<Layout>>>()?;
    let regions: Vec<Region<'_>> = (0..t.len())
        .map(|k| Region {
            operand: NAMES[k],
            buffer: t[k].ptr,
            elem_size: types[k].size(),
            layout: &layouts[k],
        })
        .collect();
    check_reduce_aliasing(&regions[0], &regions[1..])?;
    plan(p, op, &layouts, axes)
}

/// The operands' addresses at their base elements (unused entries 0).
fn pointers(t: &[RawTensor<'_>], base: &[usize; OPERANDS], types: &[ElemType]) -> Pointers {
    let mut ptrs = Pointers::default();
    for (k, x) in t.iter().enumerate() {
        ptrs.0[k] = x.ptr.wrapping_add((base[k] * types[k].size()) as u64);
    }
    ptrs
}

impl Compiled {
    /// The bound program, the checked plan and the operands' addresses at their base
    /// elements for a reduction (`None`: an output without elements).
    fn checked(
        &self,
        op: ReduceOp,
        out: RawTensor<'_>,
        inputs: &[RawTensor<'_>],
        scalars: &[(&str, Scalar)],
        axes: &[usize],
    ) -> Result<Option<(Program, Planned, Pointers)>> {
        let p = self.bind(scalars)?;
        self.check_count(inputs.len())?;
        let mut t = vec![out];
        t.extend_from_slice(inputs);
        let Some(plan) = check_and_plan(&p, op, &t, axes)? else {
            return Ok(None);
        };
        let ptrs = pointers(&t, &plan.base, &types(&p, t.len()));
        Ok(Some((p, plan, ptrs)))
    }

    /// Reduces the expression's values over `axes` with `op` on the GPU, in one pass:
    /// `inputs` as for [`run`](Self::run), broadcast to one shape; `out` of the compiled
    /// output type and of the reduced shape (the axes kept as 1 or dropped). The output
    /// shares no memory with the inputs. Nothing is launched when a check fails.
    pub fn reduce<O: Elem>(
        &self,
        gpu: &Gpu,
        op: ReduceOp,
        out: &mut DeviceTensor<O>,
        inputs: &[DeviceArg<'_>],
        scalars: &[(&str, Scalar)],
        axes: &[usize],
    ) -> Result<()> {
        self.check_count(inputs.len())?;
        let out = DeviceArg::from(&*out);
        let mut args = vec![out];
        args.extend_from_slice(inputs);
        for (k, a) in args.iter().enumerate() {
            a.region(gpu, NAMES[k])?;
        }
        let raw: Vec<RawTensor<'_>> = args.iter().map(|a| a.raw()).collect();
        // SAFETY: every view was checked against its buffer of this gpu when it was made;
        // the buffers live until the work queued on the gpu's stream completes.
        unsafe { self.launch_reduce(gpu, None, op, raw[0], &raw[1..], scalars, axes) }
    }

    /// [`reduce`](Self::reduce) over caller-owned device memory given by address, on
    /// `stream` (the `gpu`'s own when `None`).
    ///
    /// # Safety
    /// As for [`launch`](Self::launch).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn launch_reduce(
        &self,
        gpu: &Gpu,
        stream: Option<CUstream>,
        op: ReduceOp,
        out: RawTensor<'_>,
        inputs: &[RawTensor<'_>],
        scalars: &[(&str, Scalar)],
        axes: &[usize],
    ) -> Result<()> {
        let Some((p, plan, ptrs)) = self.checked(op, out, inputs, scalars, axes)? else {
            return Ok(());
        };
        let g = plan.g;
        let stream = stream.unwrap_or_else(|| gpu.stream().cu_stream());
        // SAFETY: the caller's stream; the scratch is freed in its order.
        let scratch = unsafe { Scratch::for_groups(gpu, g.outputs, g.groups, 8, stream)? };
        let scratch = scratch.addr();
        // Tier 1's group kernel where it has (or starts) one; a compile it starts begins
        // when `later` drops, after the interpreter's launch below.
        let mut later = Deferred::default();
        // SAFETY: `plan` proved the geometry's invariants for these operands and the
        // scratch; the caller's stream.
        let compiled = super::tier1::with_tier(self.tier, || unsafe {
            super::tier1::launch_reduce(gpu, stream, &p, &g, &ptrs.0, scratch, &mut later)
        })?;
        let mut args: [*mut c_void; 4] = [
            &p as *const Program as *mut c_void,
            &g as *const Geometry as *mut c_void,
            &ptrs as *const Pointers as *mut c_void,
            &scratch as *const u64 as *mut c_void,
        ];
        // Persistent blocks, a few per SM, each taking logical blocks `k, k + grid, …`:
        // the program is staged once per block, not once per logical block.
        let groups = LaunchShape {
            grid: g
                .blocks
                .min(gpu.sm_count().saturating_mul(PERSISTENT_PER_SM).max(1)),
            block: (SLOTS, 1),
            shared_bytes: STAGED_BYTES + 8 * SLOTS,
        };
        // SAFETY: the parameter list is (Program, Geometry, Pointers, u64) as both kernels
        // declare; `plan` proved the geometry's invariants for these operands (types,
        // offsets, distinct outputs), `check_reduce_aliasing` kept the output apart from
        // the inputs, the scratch holds `outputs * groups` accumulators; the launch shapes
        // are the kernels'.
        unsafe {
            if !compiled {
                gpu.launch_named(MODULE, body::groups_kernel(&p), groups, stream, &mut args)?;
            }
            if g.groups > 1 {
                let fin = LaunchShape {
                    grid: g.outputs,
                    block: (FINAL_BLOCK, 1),
                    shared_bytes: 8 * g.groups,
                };
                gpu.launch_named(MODULE, FINAL_KERNEL, fin, stream, &mut args)?;
            }
        }
        drop(later);
        Ok(())
    }

    /// The CPU twin of [`reduce`](Self::reduce): the same checks, plan, order and code.
    pub fn reduce_cpu(
        &self,
        op: ReduceOp,
        out: HostTensorMut<'_>,
        inputs: &[HostTensor<'_>],
        scalars: &[(&str, Scalar)],
        axes: &[usize],
    ) -> Result<()> {
        let (o, ins) = self.host_raw(out, inputs, scalars)?;
        // SAFETY: `check` proved every element each layout reaches inside its slice and
        // aligned; the output is a unique borrow.
        unsafe { self.reduce_cpu_raw(op, o, &ins, scalars, axes) }
    }

    /// [`reduce_cpu`](Self::reduce_cpu) over raw host pointers.
    ///
    /// # Safety
    /// As for [`run_cpu_raw`](Self::run_cpu_raw).
    pub unsafe fn reduce_cpu_raw(
        &self,
        op: ReduceOp,
        out: RawTensor<'_>,
        inputs: &[RawTensor<'_>],
        scalars: &[(&str, Scalar)],
        axes: &[usize],
    ) -> Result<()> {
        let Some((p, plan, ptrs)) = self.checked(op, out, inputs, scalars, axes)? else {
            return Ok(());
        };
        let g = &plan.g;
        let ptrs = ptrs.0;
        let (outputs, groups) = (g.outputs as usize, g.groups as usize);
        let per_task = (1usize << 14).div_ceil(g.group_len.max(1) as usize).max(1);
        let accs: Vec<Option<u64>> = (0..outputs * groups)
            .into_par_iter()
            .with_min_len(per_task)
            .map(|i| {
                // SAFETY: the caller's contract for every address; `plan` proved the
                // geometry's invariants for them.
                unsafe { body::group_value(&p, g, &ptrs, (i / groups) as u32, (i % groups) as u32) }
            })
            .collect();
        let size = self.out.size();
        let po = SendPtr(ptrs[0] as *mut u8);
        accs.par_chunks(groups)
            .with_min_len(per_task)
            .enumerate()
            .for_each(|(o, a)| {
                let mut a: Vec<u64> = a.iter().flatten().copied().collect();
                let (off, bits) = body::output_bits(&p, g, o as u32, &mut a);
                // SAFETY: the output's offset (invariant 3), distinct per output; nothing
                // else accesses the output during the call (the caller's contract).
                unsafe { body::store_bits(po.get() as u64, off, size, bits) };
            });
        Ok(())
    }
}
