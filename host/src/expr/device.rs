//! Tier 0 on the GPU: a compiled expression launched on the interpreter's kernels
//! (`strided_apply_expr::kernel`), with the planner, the aliasing rules and the 32-bit
//! pieces of huge plans that `apply` uses. The program travels by value as the kernels'
//! first parameter; nothing is compiled.

use super::{Compiled, NAMES};
use crate::alias::{check_aliasing, Region};
use crate::error::{Error, Operand, Result};
use crate::gpu::{Gpu, LaunchShape};
use crate::layout::Layout;
use crate::operand::RawTensor;
use crate::plan::{plan, Plan};
use crate::tensor::{DeviceBuffer, DeviceTensor};
use cudarc::driver::sys::CUstream;
use gpu_kernels::elem::{Elem, ElemType};
use gpu_kernels::{Geometry, Variant, MAX_DIMS};
use std::ffi::c_void;
use strided_apply_expr::kernel::{self, Pointers, OPERANDS, PROGRAM_BYTES};
use strided_apply_expr::{value, Program, MAX_INPUTS};

pub use gpu_kernels::dispatch::Scalar;

/// A device tensor of any element type as an expression's input: `(&tensor).into()`.
#[derive(Clone, Copy)]
pub struct DeviceArg<'a> {
    buf: &'a DeviceBuffer,
    layout: &'a Layout,
    elem: ElemType,
}

impl<'a, T: Elem> From<&'a DeviceTensor<T>> for DeviceArg<'a> {
    fn from(t: &'a DeviceTensor<T>) -> Self {
        DeviceArg {
            buf: t.buffer(),
            layout: t.layout(),
            elem: T::TYPE,
        }
    }
}

impl std::fmt::Debug for DeviceArg<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceArg")
            .field("buffer", &self.buf.addr())
            .field("layout", self.layout)
            .field("elem", &self.elem)
            .finish()
    }
}

impl DeviceArg<'_> {
    fn region(&self, gpu: &Gpu, operand: Operand) -> Result<Region<'_>> {
        if !self.buf.belongs_to(gpu) {
            return Err(Error::WrongDevice { operand });
        }
        Ok(Region {
            operand,
            buffer: self.buf.addr(),
            elem_size: self.elem.size(),
            layout: self.layout,
        })
    }

    /// Device address of the element at the layout's offset.
    fn base(&self) -> u64 {
        self.buf.addr() + (self.layout.offset() * self.elem.size()) as u64
    }
}

impl Compiled {
    /// Runs the expression on the GPU (tier 0, the interpreter's kernels) on the `gpu`'s
    /// stream: `inputs` in the order of [`inputs`](Self::inputs), each of the element type it
    /// was compiled for, broadcast to `out`'s shape; `out` of the compiled output type. The
    /// same checks as `apply` (device, shapes, aliasing: an input may be the output
    /// element-wise in place); nothing is launched when one fails.
    pub fn run<O: Elem>(
        &self,
        gpu: &Gpu,
        out: &mut DeviceTensor<O>,
        inputs: &[DeviceArg<'_>],
        scalars: &[(&str, Scalar)],
    ) -> Result<()> {
        let p = self.bind(scalars)?;
        self.check_count(inputs.len())?;
        let out = DeviceArg::from(&*out);
        let mut args = [out; MAX_INPUTS + 1];
        args[1..=inputs.len()].copy_from_slice(inputs);
        let args = &args[..=inputs.len()];
        for (k, a) in args.iter().enumerate() {
            let want = if k == 0 {
                self.out
            } else {
                value::elem_of(p.inputs[k - 1])
            };
            if a.elem != want {
                return Err(Error::type_mismatch(NAMES[k], want, a.elem));
            }
        }
        let stream = gpu.stream().cu_stream();
        macro_rules! go {
            ($($n:literal),*) => {
                match args.len() {
                    $($n => {
                        let a: [DeviceArg<'_>; $n] = std::array::from_fn(|k| args[k]);
                        let names: [Operand; $n] = std::array::from_fn(|k| NAMES[k]);
                        let regions = names
                            .iter()
                            .zip(&a)
                            .map(|(n, a)| a.region(gpu, n))
                            .collect::<Result<Vec<_>>>()?;
                        let plan: Plan<$n> = plan(a.map(|a| a.layout), names)?;
                        check_aliasing(&regions[0], &regions[1..])?;
                        // SAFETY: every view was checked against its buffer when it was
                        // made, the plan broadcast them to the output, `check_aliasing`
                        // proved the aliasing rules and the types match the program.
                        unsafe {
                            launch_program(gpu, stream, &p, &plan, a.map(|a| a.base()), a.map(|a| a.elem.size()))
                        }
                    })*
                    _ => unreachable!("at most {MAX_INPUTS} inputs (check_count)"),
                }
            };
        }
        go!(1, 2, 3, 4, 5, 6, 7, 8, 9)
    }

    /// [`run`](Self::run) over caller-owned device memory given by address (a framework's
    /// tensors), on `stream` (the `gpu`'s own when `None`), with the raw API's checks.
    ///
    /// # Safety
    /// As for [`raw::apply3`](crate::raw::apply3): every tensor's memory is one live
    /// allocation of this `gpu`'s context holding values of its element type, kept until the
    /// work queued on `stream` completes; `stream` is a live stream of that context.
    pub unsafe fn launch(
        &self,
        gpu: &Gpu,
        stream: Option<CUstream>,
        out: RawTensor<'_>,
        inputs: &[RawTensor<'_>],
        scalars: &[(&str, Scalar)],
    ) -> Result<()> {
        let p = self.bind(scalars)?;
        self.check_count(inputs.len())?;
        let stream = stream.unwrap_or_else(|| gpu.stream().cu_stream());
        let mut t = [out; MAX_INPUTS + 1];
        t[1..=inputs.len()].copy_from_slice(inputs);
        let t = &t[..=inputs.len()];
        macro_rules! go {
            ($($n:literal),*) => {
                match t.len() {
                    $($n => {
                        let t: [RawTensor<'_>; $n] = std::array::from_fn(|k| t[k]);
                        let names: [Operand; $n] = std::array::from_fn(|k| NAMES[k]);
                        let types: [ElemType; $n] = std::array::from_fn(|k| {
                            if k == 0 { self.out } else { value::elem_of(p.inputs[k - 1]) }
                        });
                        let layouts = crate::operand::checked_layouts(&types, &t, names)?;
                        let plan: Plan<$n> = plan(std::array::from_fn(|k| &layouts[k]), names)?;
                        let regions = crate::operand::raw_regions(&types, &t, &layouts, names);
                        check_aliasing(&regions[0], &regions[1..])?;
                        // SAFETY: the caller vouches for the memory and the stream; the checks
                        // above prove the types, the aliasing rules and the offsets.
                        unsafe {
                            launch_program(gpu, stream, &p, &plan, t.map(|t| t.ptr), types.map(|e| e.size()))
                        }
                    })*
                    _ => unreachable!("at most {MAX_INPUTS} inputs (check_count)"),
                }
            };
        }
        go!(1, 2, 3, 4, 5, 6, 7, 8, 9)
    }
}

/// Launches a bound program over a plan: the contiguous kernel for a dense plan of fewer
/// than 2^31 elements, else the plan's collapsed variant, in 32-bit pieces beyond that.
///
/// # Safety
/// `ptrs[k]` is the device address of operand `k`'s element at `plan.base[k]` in a buffer
/// of `sizes[k]`-byte elements of the program's type for that operand, in which the planner
/// proved every offset of `plan`; the aliasing rules hold; `p` is a checked program.
pub(crate) unsafe fn launch_program<const N: usize>(
    gpu: &Gpu,
    stream: CUstream,
    p: &Program,
    plan: &Plan<N>,
    ptrs: [u64; N],
    sizes: [usize; N],
) -> Result<()> {
    const { assert!(N <= OPERANDS) };
    if plan.numel == 0 {
        return Ok(());
    }
    if plan.variant == Variant::Contig && plan.numel <= i32::MAX as u64 {
        let g = Geometry::<u32, 1, OPERANDS>::empty();
        // SAFETY: forwarded; every operand's offset is the linear index.
        return unsafe { one(gpu, stream, p, kernel::CONTIG, plan.numel, &g, ptrs) };
    }
    let flat;
    let plan = if plan.variant == Variant::Contig {
        flat = plan.flat();
        &flat
    } else {
        plan
    };
    if plan.variant != Variant::Dn64 {
        // SAFETY: forwarded.
        return unsafe { scalar(gpu, stream, p, plan, ptrs) };
    }
    // 32-bit launches over pieces (each a subset of the plan's indices, so the bounds and
    // aliasing proofs cover it; `split32` gives no `Dn64` piece).
    for (piece, off) in plan.split32() {
        let mut q = ptrs;
        for k in 0..N {
            q[k] = ptrs[k].wrapping_add_signed(off[k] * sizes[k] as i64);
        }
        // SAFETY: as above, for the piece's part of every operand.
        unsafe { scalar(gpu, stream, p, &piece, q)? };
    }
    Ok(())
}

/// A 32-bit plan on its collapsed variant's kernel.
unsafe fn scalar<const N: usize>(
    gpu: &Gpu,
    stream: CUstream,
    p: &Program,
    plan: &Plan<N>,
    ptrs: [u64; N],
) -> Result<()> {
    /// The plan's geometry with every operand slot the kernels have (unused ones zero).
    fn padded<const D: usize, const N: usize>(plan: &Plan<N>) -> Geometry<u32, D, OPERANDS> {
        let g = plan.geometry::<u32, D>();
        let mut out = Geometry::<u32, D, OPERANDS>::empty();
        out.sizes = g.sizes;
        out.ndim = g.ndim;
        out.strides[..N].copy_from_slice(&g.strides);
        out
    }
    // SAFETY (each arm): forwarded; the geometry is the plan's, which fits 32 bits.
    unsafe {
        match plan.variant {
            Variant::D2 => one(
                gpu,
                stream,
                p,
                kernel::D2,
                plan.numel,
                &padded::<2, N>(plan),
                ptrs,
            ),
            Variant::D3 => one(
                gpu,
                stream,
                p,
                kernel::D3,
                plan.numel,
                &padded::<3, N>(plan),
                ptrs,
            ),
            Variant::Dn | Variant::Dn64 => one(
                gpu,
                stream,
                p,
                kernel::DN,
                plan.numel,
                &padded::<MAX_DIMS, N>(plan),
                ptrs,
            ),
            // `Contig` is flattened and `Vec`/`Tiled` are never planned here.
            Variant::D1 | Variant::Contig | Variant::Vec | Variant::Tiled => one(
                gpu,
                stream,
                p,
                kernel::D1,
                plan.numel,
                &padded::<1, N>(plan),
                ptrs,
            ),
        }
    }
}

/// One launch of the interpreter kernel of `variant` for `p`: (program, n, geometry,
/// pointers).
unsafe fn one<const D: usize, const N: usize>(
    gpu: &Gpu,
    stream: CUstream,
    p: &Program,
    variant: usize,
    numel: u64,
    g: &Geometry<u32, D, OPERANDS>,
    ptrs: [u64; N],
) -> Result<()> {
    let n = numel as u32;
    let mut all = Pointers::default();
    all.0[..N].copy_from_slice(&ptrs);
    let mut args: [*mut c_void; 4] = [
        p as *const Program as *mut c_void,
        &n as *const u32 as *mut c_void,
        g as *const Geometry<u32, D, OPERANDS> as *mut c_void,
        &all as *const Pointers as *mut c_void,
    ];
    let shape = LaunchShape {
        shared_bytes: PROGRAM_BYTES,
        ..gpu.shape_1d(numel)
    };
    // SAFETY: the parameter list is (Program, u32, Geometry<u32, D, OPERANDS>, Pointers) as
    // the kernel declares; grid-stride body, 1-D blocks, the program's shared bytes; the
    // caller proved the pointers and the plan.
    unsafe {
        gpu.launch_named(
            kernel::MODULE,
            kernel::name(variant, p),
            shape,
            stream,
            &mut args,
        )
    }
}
