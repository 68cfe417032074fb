//! The one place kernel entry points are named: [`kernels!`](crate::kernels) instantiates
//! the bodies of [`apply`](crate::apply) as `extern "ptx-kernel"` functions (on the GPU
//! target) and records their names in a [`KernelNames`] table (on every target), so the
//! host looks names up through a trait and never types one.

use crate::names::KernelNames;
use crate::ops::{Op1, Op2, Op3, Op4};

/// An op instantiated for `apply1` over `T`.
#[diagnostic::on_unimplemented(
    message = "no apply1 kernels are instantiated for `{Self}` over `{T}`",
    note = "kernels exist only for the (op, element types) pairs a `kernels!` list instantiates (the library's list is `gpu_kernels::builtin`); check the number of operands and their element types"
)]
pub trait Kernels1<T>: Op1<T> {
    const NAMES: KernelNames;
    /// The scalars the op's program reads where it runs as one (`NAMES.program`): its
    /// [`FromScalars::to_scalars`](crate::dispatch::FromScalars::to_scalars); none for
    /// ops with kernels.
    #[cfg(not(target_arch = "nvptx64"))]
    fn program_scalars(&self) -> crate::dispatch::ScalarList {
        crate::dispatch::ScalarList::EMPTY
    }
}
/// An op instantiated for `apply2` over `(O, A)`.
#[diagnostic::on_unimplemented(
    message = "no apply2 kernels are instantiated for `{Self}` over (out `{O}`, input `{A}`)",
    note = "kernels exist only for the (op, element types) pairs a `kernels!` list instantiates (the library's list is `gpu_kernels::builtin`); check the number of operands and their element types"
)]
pub trait Kernels2<O, A>: Op2<O, A> {
    const NAMES: KernelNames;
    /// The scalars the op's program reads where it runs as one (`NAMES.program`): its
    /// [`FromScalars::to_scalars`](crate::dispatch::FromScalars::to_scalars); none for
    /// ops with kernels.
    #[cfg(not(target_arch = "nvptx64"))]
    fn program_scalars(&self) -> crate::dispatch::ScalarList {
        crate::dispatch::ScalarList::EMPTY
    }
}
/// An op instantiated for `apply3` over `(O, A, B)`.
#[diagnostic::on_unimplemented(
    message = "no apply3 kernels are instantiated for `{Self}` over (out `{O}`, inputs `{A}`, `{B}`)",
    note = "kernels exist only for the (op, element types) pairs a `kernels!` list instantiates (the library's list is `gpu_kernels::builtin`); check the number of operands and their element types"
)]
pub trait Kernels3<O, A, B>: Op3<O, A, B> {
    const NAMES: KernelNames;
    /// The scalars the op's program reads where it runs as one (`NAMES.program`): its
    /// [`FromScalars::to_scalars`](crate::dispatch::FromScalars::to_scalars); none for
    /// ops with kernels.
    #[cfg(not(target_arch = "nvptx64"))]
    fn program_scalars(&self) -> crate::dispatch::ScalarList {
        crate::dispatch::ScalarList::EMPTY
    }
}
/// An op instantiated for `apply4` over `(O, A, B, C)`.
#[diagnostic::on_unimplemented(
    message = "no apply4 kernels are instantiated for `{Self}` over (out `{O}`, inputs `{A}`, `{B}`, `{C}`)",
    note = "kernels exist only for the (op, element types) pairs a `kernels!` list instantiates (the library's list is `gpu_kernels::builtin`); check the number of operands and their element types"
)]
pub trait Kernels4<O, A, B, C>: Op4<O, A, B, C> {
    const NAMES: KernelNames;
    /// The scalars the op's program reads where it runs as one (`NAMES.program`): its
    /// [`FromScalars::to_scalars`](crate::dispatch::FromScalars::to_scalars); none for
    /// ops with kernels.
    #[cfg(not(target_arch = "nvptx64"))]
    fn program_scalars(&self) -> crate::dispatch::ScalarList {
        crate::dispatch::ScalarList::EMPTY
    }
}

/// Instantiates kernels. Each line: arity, name parts, op type, element types
/// (output first):
///
/// ```ignore
/// gpu_kernels::kernels! {
///     apply3 [add f32]: Add => (f32, f32, f32);
///     apply2 [cast f32 u8]: Cast => (f32, u8);
/// }
/// ```
///
/// produces `add_f32_v`, `add_f32_t`, `add_f32_d1`, … `add_f32_dn` on the GPU target and
/// `impl Kernels3<f32, f32, f32> for Add` everywhere. A line marked `@program`
/// (`apply3 [add f32] @program: Add => (f32, f32, f32);`) compiles no kernels: the trait's
/// names hold the op id (the first name part) and the types, and the host runs that op id's
/// expression program in their place, with the op value's scalars as the program's (an op
/// with a value implements [`FromScalars`](crate::dispatch::FromScalars), whose scalars are
/// in the order of the program's `s0`, `s1`). Run-time dispatch lists it as a family and launches the same program. A line
/// `stencil [lap2 f32]: Laplacian2 => (f32);` instantiates a [stencil](crate::stencil)
/// (`lap2_f32_s`, `lap2_f32_s64`, tiled `lap2_f32_st`), and `reduce [sum f32]: Sum => (f32);` a
/// [reduction](crate::reduce) (`sum_f32_r`, `sum_f32_k`, `sum_f32_f`) over one input;
/// `reduce [dot f32]: MapReduce<Sum, Mul> => (f32, f32);` one over two inputs mapped
/// first ([`MapReduce`](crate::reduce::MapReduce); another crate's lines name a source type
/// of their own, an `impl Source<T, 2>`: the orphan rule); `reduce` lines need this crate's
/// `reductions` feature (on with `builtin`; without it the build fails naming it). The op
/// type must be `#[repr(C)]` (host and GPU are built by different compilers and must agree
/// on its layout).
#[macro_export]
macro_rules! kernels {
    ($($arity:ident [$($part:ident)+] $(@$mode:ident)? : $op:ty => ($($t:ty),+);)*) => {
        $( $crate::kernels!(@arity $arity [$($part)+] $($mode)? $op; $($t),+); )*
    };
    (@arity apply1 $parts:tt program $op:ty; $($t:ty),+) => {
        $crate::kernels!(@program Kernels1 $parts $op; $($t),+);
    };
    (@arity apply2 $parts:tt program $op:ty; $($t:ty),+) => {
        $crate::kernels!(@program Kernels2 $parts $op; $($t),+);
    };
    (@arity apply3 $parts:tt program $op:ty; $($t:ty),+) => {
        $crate::kernels!(@program Kernels3 $parts $op; $($t),+);
    };
    (@arity apply4 $parts:tt program $op:ty; $($t:ty),+) => {
        $crate::kernels!(@program Kernels4 $parts $op; $($t),+);
    };
    (@program $trait:ident [$first:ident $($rest:ident)*] $op:ty; $($t:ty),+) => {
        $crate::__register_instance!($trait [$first $($rest)*] $op; [$($t),+]);
        impl $crate::$trait<$($t),+> for $op {
            const NAMES: $crate::KernelNames = $crate::KernelNames::program(
                env!("CARGO_PKG_NAME"),
                stringify!($first),
                concat!(stringify!($first) $(, "_", stringify!($rest))*),
                &[$(<$t as $crate::Elem>::TYPE),+],
            );
            // The op value's scalars (`FromScalars`; a zero-sized op without it has none,
            // and any other op without it fails to compile here).
            #[cfg(not(target_arch = "nvptx64"))]
            fn program_scalars(&self) -> $crate::dispatch::ScalarList {
                #[allow(unused_imports)]
                use $crate::dispatch::{ViaToScalars as _, WithoutToScalars as _};
                #[allow(clippy::needless_borrow)]
                (&$crate::dispatch::Probe::<$op>(::core::marker::PhantomData)).scalars_of(self)
            }
        }
    };
    (@arity apply1 $parts:tt $op:ty; $t:ty) => {
        $crate::kernels!(@variants apply1 Kernels1 $parts $op; 1; [$t]; (x: *mut $t));
    };
    (@arity apply2 $parts:tt $op:ty; $o:ty, $a:ty) => {
        $crate::kernels!(@variants apply2 Kernels2 $parts $op; 2; [$o, $a];
                         (out: *mut $o, a: *const $a));
    };
    (@arity apply3 $parts:tt $op:ty; $o:ty, $a:ty, $b:ty) => {
        $crate::kernels!(@variants apply3 Kernels3 $parts $op; 3; [$o, $a, $b];
                         (out: *mut $o, a: *const $a, b: *const $b));
    };
    (@arity apply4 $parts:tt $op:ty; $o:ty, $a:ty, $b:ty, $c:ty) => {
        $crate::kernels!(@variants apply4 Kernels4 $parts $op; 4; [$o, $a, $b, $c];
                         (out: *mut $o, a: *const $a, b: *const $b, c: *const $c));
    };
    (@arity stencil [$($part:ident)+] $op:ty; $t:ty) => {
        $crate::kernels!(@stencil_entry [$($part)+] "s" u32, $op; $t);
        $crate::kernels!(@stencil_entry [$($part)+] "s64" u64, $op; $t);
        $crate::kernels!(@stencil_tiled_entry [$($part)+] $op; $t);
        $crate::__register_stencil!([$($part)+] $op; $t);
        impl $crate::stencil::StencilKernels<$t> for $op {
            const NAMES: $crate::stencil::StencilNames = $crate::stencil::StencilNames {
                module: env!("CARGO_PKG_NAME"),
                s32: concat!($(stringify!($part), "_",)+ "s"),
                s64: concat!($(stringify!($part), "_",)+ "s64"),
                tiled: concat!($(stringify!($part), "_",)+ "st"),
            };
        }
    };
    (@arity reduce [$($part:ident)+] $op:ty; $t:ty $(, $same:ty)*) => {
        $crate::kernels!(@reduce_entry [$($part)+] "r" rows, $op; $t $(, $same)*);
        $crate::kernels!(@reduce_entry [$($part)+] "k" cols, $op; $t $(, $same)*);
        $crate::kernels!(@reduce_entry [$($part)+] "f" finals, $op; $t $(, $same)*);
        $crate::__register_reduce!([$($part)+] $op; $t $(, $same)*);
        // Every input has the line's first element type.
        $( const _: fn($t) -> $same = |x| x; )*
        impl $crate::reduce::ReduceKernels<$t, { 1 $(+ $crate::kernels!(@one $same))* }> for $op {
            const NAMES: $crate::reduce::ReduceNames = $crate::reduce::ReduceNames {
                module: env!("CARGO_PKG_NAME"),
                rows: concat!($(stringify!($part), "_",)+ "r"),
                cols: concat!($(stringify!($part), "_",)+ "k"),
                fin: concat!($(stringify!($part), "_",)+ "f"),
                cols_exact: $crate::reduce::exact_cols::<$op, $t, { 1 $(+ $crate::kernels!(@one $same))* }>(),
                cols_loose: $crate::reduce::loose_cols::<$op, $t, { 1 $(+ $crate::kernels!(@one $same))* }>(),
            };
        }
    };
    (@one $t:ty) => { 1 };
    (@reduce_entry [$($part:ident)+] $v:literal $body:ident, $op:ty; $t:ty $(, $same:ty)*) => {
        #[cfg(target_arch = "nvptx64")]
        const _: () = {
            const K: usize = 1 $(+ $crate::kernels!(@one $same))*;
            #[export_name = concat!($(stringify!($part), "_",)+ $v)]
            #[allow(improper_ctypes_definitions)]
            unsafe extern "ptx-kernel" fn entry(
                op: $crate::apply::OpArg<$op>,
                g: $crate::reduce::ReduceGeometry,
                out: *mut $crate::reduce::OutOf<$op, $t, K>,
                scratch: *mut $crate::reduce::AccOf<$op, $t, K>,
                a: *const $t,
                b: *const $t,
                c: *const $t,
            ) {
                // One pointer parameter per input (`MAX_INPUTS`, unused ones null): LLVM
                // knows kernel pointer parameters are global and loads through them so.
                let all = [a, b, c];
                let inp: [*const $t; K] = ::core::array::from_fn(|k| all[k]);
                // SAFETY: the host proved the ReduceGeometry invariants and sized the launch
                // as this kernel requires.
                unsafe { $crate::kernels!(@reduce_call $body op.op, &g, out, inp, scratch; $t, K) }
            }
        };
    };
    (@reduce_call finals $op:expr, $g:expr, $out:ident, $inp:ident, $scratch:ident; $t:ty, $k:ident) => {{
        let _ = $inp;
        $crate::reduce::finals::<_, $t, $k>($op, $g, $out, $scratch)
    }};
    (@reduce_call cols $op:expr, $g:expr, $out:ident, $inp:ident, $scratch:ident; $t:ty, $k:ident) => {
        $crate::reduce::cols::<
            _,
            $t,
            $k,
            { $crate::reduce::chunk(::core::mem::size_of::<$t>()) as usize },
            { $crate::reduce::col_vec(::core::mem::size_of::<$t>()) as usize },
            { $crate::reduce::exact_vec(::core::mem::size_of::<$t>()) as usize },
        >($op, $g, $out, $inp, $scratch)
    };
    (@reduce_call $body:ident $op:expr, $g:expr, $out:ident, $inp:ident, $scratch:ident; $t:ty, $k:ident) => {
        $crate::reduce::$body::<_, $t, $k, { $crate::reduce::chunk(::core::mem::size_of::<$t>()) as usize }>(
            $op, $g, $out, $inp, $scratch,
        )
    };
    (@stencil_entry [$($part:ident)+] $v:literal $I:ty, $op:ty; $t:ty) => {
        #[cfg(target_arch = "nvptx64")]
        const _: () = {
            #[export_name = concat!($(stringify!($part), "_",)+ $v)]
            #[allow(improper_ctypes_definitions)]
            unsafe extern "ptx-kernel" fn entry(
                op: $crate::apply::OpArg<$op>,
                n: $I,
                g: $crate::stencil::StencilGeometry<$I>,
                out: *mut $t,
                inp: *const $t,
            ) {
                let (first, step) = $crate::device::thread_range::<$I>();
                // SAFETY: the host proved the StencilGeometry invariants for this launch.
                unsafe { $crate::stencil::stencil(op.op, n, &g, out, inp, first, step) }
            }
        };
    };
    (@stencil_tiled_entry [$($part:ident)+] $op:ty; $t:ty) => {
        #[cfg(target_arch = "nvptx64")]
        const _: () = {
            #[export_name = concat!($(stringify!($part), "_",)+ "st")]
            #[allow(improper_ctypes_definitions)]
            unsafe extern "ptx-kernel" fn entry(
                op: $crate::apply::OpArg<$op>,
                walk: u32,
                g: $crate::stencil::StencilGeometry<u32>,
                out: *mut $t,
                inp: *const $t,
            ) {
                let (lane, row, block) = $crate::device::tile_thread();
                let (lines, blocks) = $crate::device::block_rows_and_grid();
                // SAFETY: the host proved the StencilGeometry invariants for a 32-bit
                // launch, passed walk >= 1 and launched blocks of TILE_LANES × lines threads.
                unsafe {
                    $crate::stencil::stencil_tiled::<_, $t, { $crate::stencil::tile_elems(::core::mem::size_of::<$t>()) }>(
                        op.op, &g, out, inp, walk, lines, (lane, row), (block, blocks),
                    )
                }
            }
        };
    };
    (@variants $body:ident $trait:ident [$($part:ident)+] $op:ty; $n:literal; [$($t:ty),+];
     $params:tt) => {
        $crate::kernels!(@vec_entry $body [$($part)+] $op; $n; [$($t),+]; $params);
        $crate::kernels!(@tiled_entry $body [$($part)+] $op; $n; $params);
        $crate::kernels!(@entry $body [$($part)+] "d1" u32, 1, 1, $op; $n; $params);
        $crate::kernels!(@entry $body [$($part)+] "d2" u32, 2, 2, $op; $n; $params);
        $crate::kernels!(@entry $body [$($part)+] "d3" u32, 3, 3, $op; $n; $params);
        $crate::kernels!(@entry $body [$($part)+] "dn" u32, $crate::MAX_DIMS, dyn, $op; $n; $params);
        $crate::__register_instance!($trait [$($part)+] $op; [$($t),+]);
        impl $crate::$trait<$($t),+> for $op {
            const NAMES: $crate::KernelNames = $crate::KernelNames {
                module: env!("CARGO_PKG_NAME"),
                vec: concat!($(stringify!($part), "_",)+ "v"),
                tiled: $crate::kernels!(@tiled_name $body [$($part)+]),
                d1: concat!($(stringify!($part), "_",)+ "d1"),
                d2: concat!($(stringify!($part), "_",)+ "d2"),
                d3: concat!($(stringify!($part), "_",)+ "d3"),
                dn: concat!($(stringify!($part), "_",)+ "dn"),
                program: None,
            };
        }
    };
    (@entry $body:ident [$($part:ident)+] $v:literal $I:ty, $D:expr, $ndim:tt, $op:ty; $n:literal;
     ($($p:ident: $pt:ty),+)) => {
        #[cfg(target_arch = "nvptx64")]
        const _: () = {
            #[export_name = concat!($(stringify!($part), "_",)+ $v)]
            #[allow(improper_ctypes_definitions)]
            unsafe extern "ptx-kernel" fn entry(
                op: $crate::apply::OpArg<$op>,
                n: $I,
                g: $crate::Geometry<$I, { $D }, $n>,
                $($p: $pt),+
            ) {
                let (first, step) = $crate::device::thread_range::<$I>();
                let ndim: usize = $crate::kernels!(@ndim g $ndim);
                // SAFETY: the host planner proved the Geometry invariants for this launch.
                unsafe { $crate::apply::$body(op.op, n, &g, ndim, $($p),+, first, step) }
            }
        };
    };
    (@vec_entry $body:ident [$($part:ident)+] $op:ty; $n:literal; [$($t:ty),+];
     ($($p:ident: $pt:ty),+)) => {
        #[cfg(target_arch = "nvptx64")]
        const _: () = {
            #[export_name = concat!($(stringify!($part), "_",)+ "v")]
            #[allow(improper_ctypes_definitions)]
            unsafe extern "ptx-kernel" fn entry(
                op: $crate::apply::OpArg<$op>,
                arg: $crate::apply::VecArg,
                g: $crate::Geometry<u32, 2, $n>,
                $($p: $pt),+
            ) {
                let (first, step) = $crate::device::thread_range::<u64>();
                const E: usize = $crate::apply::vec_width(&[$(::core::mem::size_of::<$t>()),+]);
                // SAFETY: the launcher checked alignment and row lengths for this variant,
                // computed `arg.row`, and the planner proved the Geometry invariants.
                unsafe { $crate::kernels!(@vec_call $body, E, op.op, &arg, &g, ($($p),+), first, step) }
            }
        };
    };
    (@vec_call apply1, $e:ident, $op:expr, $n:expr, $g:expr, ($($p:ident),+), $f:ident, $s:ident) => {
        $crate::apply::apply1_vec::<_, _, $e>($op, $n, $g, $($p),+, $f, $s)
    };
    (@vec_call apply2, $e:ident, $op:expr, $n:expr, $g:expr, ($($p:ident),+), $f:ident, $s:ident) => {
        $crate::apply::apply2_vec::<_, _, _, $e>($op, $n, $g, $($p),+, $f, $s)
    };
    (@vec_call apply3, $e:ident, $op:expr, $n:expr, $g:expr, ($($p:ident),+), $f:ident, $s:ident) => {
        $crate::apply::apply3_vec::<_, _, _, _, $e>($op, $n, $g, $($p),+, $f, $s)
    };
    (@vec_call apply4, $e:ident, $op:expr, $n:expr, $g:expr, ($($p:ident),+), $f:ident, $s:ident) => {
        $crate::apply::apply4_vec::<_, _, _, _, _, $e>($op, $n, $g, $($p),+, $f, $s)
    };
    (@tiled_name apply2 [$($part:ident)+]) => { concat!($(stringify!($part), "_",)+ "t") };
    (@tiled_name apply3 [$($part:ident)+]) => { concat!($(stringify!($part), "_",)+ "t") };
    (@tiled_name $other:ident [$($part:ident)+]) => { "" };
    (@tiled_entry apply2 [$($part:ident)+] $op:ty; $n:literal; ($($p:ident: $pt:ty),+)) => {
        $crate::kernels!(@tiled_fn apply2_tiled [$($part)+] $op; $n; ($($p: $pt),+));
    };
    (@tiled_entry apply3 [$($part:ident)+] $op:ty; $n:literal; ($($p:ident: $pt:ty),+)) => {
        $crate::kernels!(@tiled_fn apply3_tiled [$($part)+] $op; $n; ($($p: $pt),+));
    };
    (@tiled_entry $other:ident $($rest:tt)*) => {};
    (@tiled_fn $f:ident [$($part:ident)+] $op:ty; $n:literal; ($($p:ident: $pt:ty),+)) => {
        #[cfg(target_arch = "nvptx64")]
        const _: () = {
            #[export_name = concat!($(stringify!($part), "_",)+ "t")]
            #[allow(improper_ctypes_definitions)]
            unsafe extern "ptx-kernel" fn entry(
                op: $crate::apply::OpArg<$op>,
                t: $crate::TileArg,
                g: $crate::Geometry<u32, 5, $n>,
                $($p: $pt),+
            ) {
                // SAFETY: the launcher sized the grid, block and shared memory as the tiled
                // variant requires; the planner proved the Geometry invariants.
                unsafe { $crate::tiled::$f(op.op, &g, &t, $($p),+) }
            }
        };
    };
    (@ndim $g:ident dyn) => { $g.ndim as usize };
    (@ndim $g:ident $l:literal) => { $l };
}

/// The run-time dispatch entry of one `kernels!` line (`dispatch::INSTANCES`), on host builds
/// with the feature `dispatch`; nothing otherwise. A macro of this crate, so that the
/// feature is this crate's wherever `kernels!` expands (custom-op crates included).
#[cfg(all(not(target_arch = "nvptx64"), feature = "dispatch"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __register_instance {
    ($trait:ident [$first:ident $($rest:ident)*] $op:ty; [$($t:ty),+]) => {
        const _: () = {
            #[$crate::dispatch::__linkme::distributed_slice($crate::dispatch::INSTANCES)]
            #[linkme(crate = $crate::dispatch::__linkme)]
            static INSTANCE: $crate::dispatch::Instance = $crate::dispatch::Instance {
                op: stringify!($first),
                types: &[$(<$t as $crate::Elem>::TYPE),+],
                names: <$op as $crate::$trait<$($t),+>>::NAMES,
                builder: $crate::__register_instance!(@builder $op),
                tolerance: {
                    #[allow(clippy::needless_borrow)]
                    fn tolerance() -> ::core::option::Option<$crate::ops::Tolerance> {
                        #[allow(unused_imports)]
                        use $crate::dispatch::{ViaAccuracy as _, WithoutAccuracy as _};
                        (&$crate::dispatch::Probe::<$op>(::core::marker::PhantomData)).tolerance()
                    }
                    tolerance
                },
                row: $crate::__register_instance!(@row $trait $op; $($t),+),
            };
        };
    };
    // The op's builder: the borrow picks the builder of ops with `FromScalars` (autoref
    // specialisation), the fallback otherwise. Shared by apply and stencil lines.
    (@builder $op:ty) => {{
        #[allow(clippy::needless_borrow)]
        fn builder() -> ::core::option::Option<$crate::dispatch::Builder> {
            #[allow(unused_imports)]
            use $crate::dispatch::{ViaScalars as _, WithoutScalars as _};
            (&$crate::dispatch::Probe::<$op>(::core::marker::PhantomData)).builder()
        }
        builder
    }};
    (@row Kernels1 $op:ty; $($t:ty),+) => { $crate::dispatch::row1::<$op, $($t),+> };
    (@row Kernels2 $op:ty; $($t:ty),+) => { $crate::dispatch::row2::<$op, $($t),+> };
    (@row Kernels3 $op:ty; $($t:ty),+) => { $crate::dispatch::row3::<$op, $($t),+> };
    (@row Kernels4 $op:ty; $($t:ty),+) => { $crate::dispatch::row4::<$op, $($t),+> };
}

/// The run-time dispatch entry of one `kernels!` stencil line (`dispatch::STENCILS`), on host
/// builds with the feature `dispatch`; nothing otherwise.
#[cfg(all(not(target_arch = "nvptx64"), feature = "dispatch"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __register_stencil {
    ([$first:ident $($rest:ident)*] $op:ty; $t:ty) => {
        const _: () = {
            #[$crate::dispatch::__linkme::distributed_slice($crate::dispatch::STENCILS)]
            #[linkme(crate = $crate::dispatch::__linkme)]
            static STENCIL: $crate::dispatch::StencilInstance = $crate::dispatch::StencilInstance {
                op: stringify!($first),
                elem: <$t as $crate::Elem>::TYPE,
                names: <$op as $crate::stencil::StencilKernels<$t>>::NAMES,
        builder: $crate::__register_instance!(@builder $op),
                run: $crate::dispatch::stencil_run::<$op, $t>,
            };
        };
    };
}

/// The run-time dispatch entry of one `kernels!` reduce line (`dispatch::REDUCTIONS`), on
/// host builds with the feature `dispatch`; nothing otherwise. Reductions registered for
/// run-time dispatch are zero-sized (their kernel parameter is padding only).
#[cfg(all(not(target_arch = "nvptx64"), feature = "dispatch"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __register_reduce {
    ([$first:ident $($rest:ident)*] $op:ty; $t:ty $(, $same:ty)*) => {
        const _: () = {
            const K: usize = 1 $(+ $crate::kernels!(@one $same))*;
            const {
                assert!(
                    ::core::mem::size_of::<$op>() == 0,
                    "run-time dispatch takes zero-sized reductions"
                )
            };
            #[$crate::dispatch::__linkme::distributed_slice($crate::dispatch::REDUCTIONS)]
            #[linkme(crate = $crate::dispatch::__linkme)]
            static REDUCTION: $crate::dispatch::ReduceInstance = $crate::dispatch::ReduceInstance {
                op: stringify!($first),
                elem: <$t as $crate::Elem>::TYPE,
                inputs: K,
                out_elem: <$crate::reduce::OutOf<$op, $t, K> as $crate::Elem>::TYPE,
                names: <$op as $crate::reduce::ReduceKernels<$t, K>>::NAMES,
                acc_size: ::core::mem::size_of::<$crate::reduce::AccOf<$op, $t, K>>(),
                acc_align: ::core::mem::align_of::<$crate::reduce::AccOf<$op, $t, K>>(),
                columns: <$op as $crate::reduce::Source<$t, K>>::COLUMNS,
                has_empty: $crate::dispatch::reduce_has_empty::<$op, $t, K>,
                group: $crate::dispatch::reduce_group::<$op, $t, K>,
                write: $crate::dispatch::reduce_write::<$op, $t, K>,
            };
        };
    };
}

#[cfg(not(all(not(target_arch = "nvptx64"), feature = "dispatch")))]
#[doc(hidden)]
#[macro_export]
macro_rules! __register_reduce {
    ($($t:tt)*) => {};
}

#[cfg(not(all(not(target_arch = "nvptx64"), feature = "dispatch")))]
#[doc(hidden)]
#[macro_export]
macro_rules! __register_instance {
    ($($t:tt)*) => {};
}

#[cfg(not(all(not(target_arch = "nvptx64"), feature = "dispatch")))]
#[doc(hidden)]
#[macro_export]
macro_rules! __register_stencil {
    ($($t:tt)*) => {};
}
