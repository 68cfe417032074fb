//! The library's own kernels: every op of [`ops`](crate::ops) for the element types it
//! makes sense for. One line of a helper macro instantiates an op for a list of types; a
//! type marked `@program` gets no kernels (the host runs the op's expression program for
//! it, with the op value's scalars: the diet, `benches/RESULTS.md`), only where the bench
//! measured the program within 2 % of the kernel on every layout.

#[allow(unused_imports)]
use crate::elem::{bf16, f16, Bool};
use crate::fused::*;
use crate::ops::*;
use crate::reduce::*;
use crate::stencil::*;

macro_rules! for_types {
    // apply3 `op(T, T) -> T`, or `-> Bool` with `cmp`.
    (binary $name:ident $op:ty: $($t:ident $(@$m:ident)?),*) => {
        $crate::kernels! { $( apply3 [$name $t] $(@$m)?: $op => ($t, $t, $t); )* }
    };
    (compare $name:ident $op:ty: $($t:ident $(@$m:ident)?),*) => {
        $crate::kernels! { $( apply3 [$name $t] $(@$m)?: $op => (Bool, $t, $t); )* }
    };
    (compare_s $name:ident $op:ident: $($t:ident),*) => {
        $crate::kernels! { $( apply2 [$name $t]: Rhs<$op, $t> => (Bool, $t); )* }
    };
    (unary $name:ident $op:ty: $($t:ident $(@$m:ident)?),*) => {
        $crate::kernels! { $( apply2 [$name $t] $(@$m)?: $op => ($t, $t); )* }
    };
    (rhs $name:ident $op:ident: $($t:ident $(@$m:ident)?),*) => {
        $crate::kernels! { $( apply2 [$name $t] $(@$m)?: Rhs<$op, $t> => ($t, $t); )* }
    };
    (lhs $name:ident $op:ident: $($t:ident $(@$m:ident)?),*) => {
        $crate::kernels! { $( apply2 [$name $t] $(@$m)?: Lhs<$op, $t> => ($t, $t); )* }
    };
    (update $name:ident $op:ident: $($t:ident),*) => {
        $crate::kernels! { $( apply2 [$name $t]: Update<$op> => ($t, $t); )* }
    };
    (update_s $name:ident $op:ident: $($t:ident),*) => {
        $crate::kernels! { $( apply1 [$name $t]: InPlace<Rhs<$op, $t>> => ($t); )* }
    };
    (clamp $name:ident: $($t:ident $(@$m:ident)?),*) => {
        $crate::kernels! { $( apply2 [$name $t] $(@$m)?: Clamp<$t> => ($t, $t); )* }
    };
    (fill $name:ident: $($t:ident),*) => {
        $crate::kernels! { $( apply1 [$name $t]: Fill<$t> => ($t); )* }
    };
    (fma $name:ident: $($t:ident $(@$m:ident)?),*) => {
        $crate::kernels! { $( apply4 [$name $t] $(@$m)?: Fma => ($t, $t, $t, $t); )* }
    };
    (where_ $name:ident: $($t:ident $(@$m:ident)?),*) => {
        $crate::kernels! { $( apply4 [$name $t] $(@$m)?: Where => ($t, Bool, $t, $t); )* }
    };
    (fused2 $name:ident $op:ident: $($t:ident $(@$m:ident)?),*) => {
        $crate::kernels! { $( apply2 [$name $t] $(@$m)?: $op<$t> => ($t, $t); )* }
    };
    (fused3 $name:ident $op:ident: $($t:ident $(@$m:ident)?),*) => {
        $crate::kernels! { $( apply3 [$name $t] $(@$m)?: $op<$t> => ($t, $t, $t); )* }
    };
    (fused4 $name:ident $op:ident: $($t:ident $(@$m:ident)?),*) => {
        $crate::kernels! { $( apply4 [$name $t] $(@$m)?: $op<$t> => ($t, $t, $t, $t); )* }
    };
    (stencil $name:ident $op:ty: $($t:ident),*) => {
        $crate::kernels! { $( stencil [$name $t]: $op => ($t); )* }
    };
    (reduce $name:ident $op:ty: $($t:ident),*) => {
        $crate::kernels! { $( reduce [$name $t]: $op => ($t); )* }
    };
    (map_reduce $name:ident $op:ty: $($t:ident),*) => {
        $crate::kernels! { $( reduce [$name $t]: $op => ($t, $t); )* }
    };
    (cast_from $from:ident: $($t:ident $(@$m:ident)?),*) => {
        $crate::kernels! { $( apply2 [cast $t $from] $(@$m)?: Cast => ($t, $from); )* }
    };
}

macro_rules! numeric {
    ($kind:ident $name:ident $($op:ident)?) => {
        for_types!($kind $name $($op)?: f32, f64, i32, i64, u32, u8, f16, bf16);
    };
}
macro_rules! float {
    ($kind:ident $name:ident $op:ident) => {
        for_types!($kind $name $op: f32, f64, f16, bf16);
    };
}
macro_rules! float_ty {
    ($kind:ident $name:ident $op:ty) => {
        for_types!($kind $name $op: f32, f64, f16, bf16);
    };
}
macro_rules! all {
    ($kind:ident $name:ident $($op:ident)?) => {
        for_types!($kind $name $($op)?: f32, f64, i32, i64, u32, u8, Bool, f16, bf16);
    };
}

numeric!(binary add Add);
numeric!(binary sub Sub);
numeric!(binary mul Mul);
numeric!(binary div Div);
numeric!(binary min Min);
numeric!(binary max Max);
for_types!(binary pow Pow: f32 @program, f64, f16, bf16 @program);

for_types!(compare eq Eq: f32, f64 @program, i32, i64 @program, u32, u8, f16, bf16);
for_types!(compare ne Ne: f32, f64 @program, i32, i64 @program, u32, u8, f16 @program, bf16);
for_types!(compare lt Lt: f32, f64 @program, i32, i64 @program, u32, u8, f16, bf16);
for_types!(compare le Le: f32, f64 @program, i32, i64 @program, u32, u8, f16, bf16);
for_types!(compare gt Gt: f32, f64 @program, i32, i64 @program, u32, u8, f16, bf16);
for_types!(compare ge Ge: f32, f64 @program, i32, i64 @program, u32, u8, f16, bf16);
numeric!(compare_s eq_s Eq);
numeric!(compare_s ne_s Ne);
numeric!(compare_s lt_s Lt);
numeric!(compare_s le_s Le);
numeric!(compare_s gt_s Gt);
numeric!(compare_s ge_s Ge);

numeric!(rhs add_s Add);
numeric!(rhs sub_s Sub);
numeric!(rhs mul_s Mul);
for_types!(rhs div_s Div: f32, f64, i32, i64 @program, u32, u8, f16, bf16);
numeric!(rhs min_s Min);
numeric!(rhs max_s Max);
for_types!(rhs pow_s Pow: f32 @program, f64 @program, f16, bf16);
numeric!(lhs rsub_s Sub);
for_types!(lhs rdiv_s Div: f32, f64, i32, i64, u32 @program, u8, f16, bf16);

for_types!(unary neg Neg: f32, f64 @program, i32, i64 @program, f16, bf16);
for_types!(unary abs Abs: f32, f64 @program, i32, i64, f16, bf16);
numeric!(unary relu Relu);
float!(unary sqrt Sqrt);
for_types!(unary rsqrt Rsqrt: f32, f64 @program, f16, bf16);
for_types!(unary exp Exp: f32, f64 @program, f16, bf16);
for_types!(unary log Log: f32 @program, f64 @program, f16, bf16);
for_types!(unary sin Sin: f32 @program, f64, f16, bf16);
for_types!(unary cos Cos: f32 @program, f64, f16, bf16);
for_types!(unary tanh Tanh: f32, f64 @program, f16, bf16);
for_types!(unary sigmoid Sigmoid: f32, f64 @program, f16, bf16);
for_types!(clamp clamp: f32, f64, i32, i64, u32, u8, f16 @program, bf16);

numeric!(update add_assign Add);
numeric!(update sub_assign Sub);
numeric!(update mul_assign Mul);
numeric!(update div_assign Div);
numeric!(update_s add_assign_s Add);
numeric!(update_s sub_assign_s Sub);
numeric!(update_s mul_assign_s Mul);
numeric!(update_s div_assign_s Div);

for_types!(fma fma: f32 @program, f64 @program, i32 @program, i64 @program, u32 @program, u8, f16, bf16);
for_types!(where_ where_: f32 @program, f64 @program, i32 @program, i64 @program, u32 @program, u8, Bool, f16, bf16);
all!(fill fill);

all!(cast_from f32);
for_types!(cast_from f64: f32, f64 @program, i32, i64, u32, u8, Bool, f16, bf16);
all!(cast_from i32);
for_types!(cast_from i64: f32, f64, i32, i64 @program, u32, u8, Bool, f16, bf16);
all!(cast_from u32);
for_types!(cast_from u8: f32, f64 @program, i32, i64 @program, u32, u8, Bool, f16, bf16);
for_types!(cast_from Bool: f32, f64 @program, i32, i64 @program, u32, u8, Bool, f16, bf16);
all!(cast_from f16);
all!(cast_from bf16);

// Mixed types: a 16-bit input with an f32 one, computed in f32; f32 or 16-bit output.
macro_rules! mixed {
    ($($name:ident $op:ident),*) => {$(
        $crate::kernels! {
            apply3 [$name f32 f16 f32]: $op => (f32, f16, f32);
            apply3 [$name f16 f16 f32]: $op => (f16, f16, f32);
            apply3 [$name f32 bf16 f32]: $op => (f32, bf16, f32);
            apply3 [$name bf16 bf16 f32]: $op => (bf16, bf16, f32);
        }
    )*};
}
mixed!(add Add, sub Sub, mul Mul, div Div);

// Fused expressions (`fused`), one kernel per whole expression.
for_types!(fused3 axpy Axpy: f32, f64 @program, f16, bf16);
for_types!(fused3 axpby Axpby: f32, f64 @program, f16, bf16 @program);
for_types!(fused3 bias_relu BiasRelu: f32, f64 @program, f16 @program, bf16 @program);
float!(fused2 silu Silu);
for_types!(fused3 divmul DivMul: f32, f64, f16 @program, bf16 @program);
for_types!(fused4 lerp Lerp: f32 @program, f64 @program, f16 @program, bf16 @program);
float!(fused2 recip_update RecipUpdate);

// Stencils (`stencil`), clamp-to-edge.
float_ty!(stencil shift_xp Shift<1, 0, 0>);
float_ty!(stencil shift_xm Shift<-1, 0, 0>);
float_ty!(stencil shift_yp Shift<0, 1, 0>);
float_ty!(stencil shift_ym Shift<0, -1, 0>);
float_ty!(stencil shift_zp Shift<0, 0, 1>);
float_ty!(stencil shift_zm Shift<0, 0, -1>);
float_ty!(stencil fdiff ForwardDiff);
float_ty!(stencil bdiff BackwardDiff);
float_ty!(stencil lap2 Laplacian2);
float_ty!(stencil lap3 Laplacian3);

// Reductions (`reduce`): one order on the GPU and the CPU twin.
numeric!(reduce sum Sum);
numeric!(reduce prod Prod);
numeric!(reduce amin Amin);
numeric!(reduce amax Amax);
float_ty!(reduce mean Mean);
float_ty!(reduce sumsq SumSq);
float_ty!(reduce norm2 Norm2);
numeric!(reduce argmin Argmin);
numeric!(reduce argmax Argmax);
all!(reduce all All);
all!(reduce any Any);
// Map-reduce over two inputs: the sum of squared differences and the dot product.
float_ty!(map_reduce sqdiff MapReduce<SumSq, Sub>);
float_ty!(map_reduce dot MapReduce<Sum, Mul>);
