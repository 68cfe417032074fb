//! Tests of the generator: the library's functions pasted in, and every generated module
//! (each shape, the float, integer, bool and reduction kernels) compiled with `ptxas`.

use super::call::leaf;
use super::types::elem;
use super::*;
use crate::expr::{Arg, Expr};
use gpu_kernels::elem::ElemType;
use std::path::PathBuf;
use ElemType::{Bool, BF16, F16, F32, F64, F8E4M3, I16, I32, I64, I8, U16, U32, U64, U8};

/// Expressions over `a`, `b`, `c` covering every op the generator writes or calls.
const EXPRS: &[&str] = &[
    "a * b + c",
    "sin(a * b) + sqrt(c) + cos(a) / log(cos(b) + 2)",
    "where(isnan(a), 0, a) - b * c",
    "clamp(a, -1, 1) + relu(b) - abs(c) + neg(a) + rsqrt(b)",
    "minimum(a, b) + maximum(b, c) + fmin(a, c) + fmax(a, b) + fma(a, b, c)",
    "copysign(a, b) + sign(c) + floor(a) + ceil(b) + round(c) + trunc(a)",
    "where(logical_and(lt(a, b), ge(b, c)), a, where(logical_or(ne(a, c), le(a, b)), b, c))",
    "where(logical_xor(eq(a, b), gt(b, c)), a, b) + where(logical_not(isinf(c)), c, 0)",
    "exp(a) + tanh(b) + sigmoid(c) + erf(a) + pow(a, b) + a / b",
    "atan2(a, b) + hypot(b, c) + fmod(a, b) + remainder(a, c) + floor_divide(a, b) + nextafter(a, b)",
    "erfc(a) + erfinv(b) + lgamma(c) + exp2(a) + expm1(b) + log2(c) + log10(a) + log1p(b)",
    "tan(c) + asin(a) + acos(b) + atan(c) + sinh(a) + cosh(b) + asinh(c) + acosh(a) + atanh(b)",
    "where(isfinite(a), a, b) + where(isposinf(b), 1.0, 2.5) + where(isneginf(c), 3.0, 4.0) + where(signbit(a), c, b)",
];

fn ptxas() -> PathBuf {
    std::env::var_os("STRIDED_APPLY_PTXAS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("ptxas"))
}

/// The library's PTX from the committed expression image, as tier 1 reads it.
fn lib() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../expr/image/kernels.img");
    let bytes = std::fs::read(path).expect("the expression image");
    crate::expr::tier1::library(Box::leak(bytes.into_boxed_slice()))
        .expect("the library's PTX")
        .to_string()
}

/// `leaf` on synthetic library text: a straight-line function's registers renamed, its
/// parameter loads and result store turned into `mov`s; a function with a branch, a
/// call, a table or a local array, or only declared, is not pasted.
#[test]
fn leaf_pastes_only_straight_line_code() {
    let lib = ".visible .func  (.param .b32 func_retval0) f_decl\n(\n\t.param .b32 f_decl_param_0\n)\n;\n\
        .visible .func  (.param .b32 func_retval0) f_ok(\n\t.param .b32 f_ok_param_0,\n\t.param .b32 f_ok_param_1\n)\n{\n\
        \t.reg .b32 \t%r<4>;\n\tld.param.b32 \t%r1, [f_ok_param_0];\n\tld.param.b32 \t%r2, [f_ok_param_1];\n\
        \tadd.rn.f32 \t%r3, %r1, %r2;\n\tst.param.b32 \t[func_retval0], %r3;\n\tret;\n}\n\
        .visible .func  (.param .b32 func_retval0) f_branch(\n\t.param .b32 f_branch_param_0\n)\n{\n\
        \t.reg .pred \t%p<2>;\n\t.reg .b32 \t%r<3>;\n\tld.param.b32 \t%r1, [f_branch_param_0];\n\
        \tsetp.gt.f32 \t%p1, %r1, 0f00000000;\n\t@%p1 bra \t$L__BB0_2;\n\tneg.f32 \t%r1, %r1;\n$L__BB0_2:\n\
        \tst.param.b32 \t[func_retval0], %r1;\n\tret;\n}\n\
        .visible .func  (.param .b32 func_retval0) f_table(\n\t.param .b32 f_table_param_0\n)\n{\n\
        \t.reg .b32 \t%r<3>;\n\t.reg .b64 \t%rd<2>;\n\tmov.u64 \t%rd1, __cudart_i2opi_f;\n\
        \tld.global.nc.b32 \t%r1, [%rd1];\n\tst.param.b32 \t[func_retval0], %r1;\n\tret;\n}\n";
    let body = leaf(lib, "f_ok").expect("straight-line");
    assert!(body.contains(".reg .b32 \t%ir<4>;"), "{body}");
    assert!(body.contains("mov.b32 %ir1, [f_ok_param_0];"), "{body}");
    assert!(body.contains("add.rn.f32 \t%ir3, %ir1, %ir2;"), "{body}");
    assert!(body.contains("mov.b32 [func_retval0], %ir3;"), "{body}");
    assert!(
        !body.contains("ret;") && !body.contains("ld.param"),
        "{body}"
    );
    for name in ["f_branch", "f_table", "f_decl", "f_missing"] {
        assert!(leaf(lib, name).is_none(), "{name}");
    }
}

/// The straight-line float functions are pasted in place of their calls (the
/// ptxas test compiles them, the GPU tests compare their bits with the interpreter's);
/// those with branches or tables stay calls.
#[test]
fn straight_line_functions_are_pasted_in() {
    let lib = lib();
    for name in [
        "t1_exp_f32",
        "t1_tanh_f32",
        "t1_sigmoid_f32",
        "t1_log1p_f32",
    ] {
        let body = leaf(&lib, name).unwrap_or_else(|| panic!("{name} is not pasted in"));
        assert!(body.contains(&format!("[{name}_param_0]")), "{body}");
        assert!(
            body.contains("[func_retval0]") && !body.contains("ret;"),
            "{body}"
        );
    }
    for name in ["t1_sin_f32", "t1_pow_f32", "t1_exp_f64"] {
        assert!(leaf(&lib, name).is_none(), "{name}");
    }
    let e = Expr::parse("(tanh((a * a * a * 0.044715 + a) * 0.7978845608028654) + 1) * (a * 0.5)")
        .expect("parses");
    let c = e
        .compile(&[("a", Arg::Tensor(BF16))], None)
        .expect("compiles");
    let p = *c.program();
    let lib = crate::expr::tier1::lib_for(&p, &lib);
    let shape = Shape::Vector {
        lanes: 8,
        bcast: 0,
        rows: false,
        per: 1,
    };
    let text = module(&p, shape, 90, &lib);
    assert!(!text.contains("call.uni"), "{text}");
    assert!(text.contains("cvt.rn.bf16.f32"), "{text}");
    assert!(!module(&p, shape, 70, &lib).contains("cvt.rn.bf16.f32"));
}

fn check(dir: &std::path::Path, name: &str, text: &str, sm: u32) {
    let ptx = dir.join(format!("{name}.ptx"));
    std::fs::write(&ptx, text).expect("writes");
    let out = std::process::Command::new(ptxas())
        .arg(format!("-arch=sm_{sm}"))
        .arg(&ptx)
        .arg("-o")
        .arg(dir.join(format!("{name}.cubin")))
        .output()
        .unwrap_or_else(|e| {
            panic!("running ptxas ({e}): set STRIDED_APPLY_PTXAS (scripts/setup-toolchain)")
        });
    assert!(
        out.status.success(),
        "ptxas -arch=sm_{sm} refused {name}:\n{}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Input types and output type (`None`: the expression's) of the float programs.
const FLOAT_TYPES: [([ElemType; 3], Option<ElemType>); 5] = [
    ([F32, F32, F32], None),
    ([F64, F64, F64], None),
    ([F16, BF16, F32], Some(BF16)),
    ([F16, F16, F16], Some(F16)),
    ([F32, F64, F32], Some(F32)),
];

/// Each of `exprs` compiled for each of `types` (input types, output type):
/// (expression index, type index, the program or the compile error).
fn compile_each(
    exprs: &[&str],
    types: &[([ElemType; 3], Option<ElemType>)],
) -> Vec<(usize, usize, crate::error::Result<Program>)> {
    let mut out = Vec::new();
    for (x, text) in exprs.iter().enumerate() {
        let e = Expr::parse(text).unwrap_or_else(|err| panic!("{text}: {err}"));
        for (t, (ty, o)) in types.iter().enumerate() {
            let args = [
                ("a", Arg::Tensor(ty[0])),
                ("b", Arg::Tensor(ty[1])),
                ("c", Arg::Tensor(ty[2])),
            ];
            out.push((x, t, e.compile(&args, *o).map(|c| *c.program())));
        }
    }
    out
}

/// Each of [`EXPRS`] compiled for each of `types` (input types, output type) that tier 1
/// compiles: (expression index, type index, program). The only programs it does not
/// compile are `nextafter`'s over 16-bit floats (that step is the interpreter's).
fn programs(types: &[([ElemType; 3], Option<ElemType>)]) -> Vec<(usize, usize, Program)> {
    let mut out = Vec::new();
    for (x, t, p) in compile_each(EXPRS, types) {
        let (text, ty) = (EXPRS[x], types[t].0);
        let p = p.unwrap_or_else(|err| panic!("{text}: {err}"));
        if supports(&p) {
            out.push((x, t, p));
        } else {
            assert!(
                text.contains("nextafter") && ty.contains(&F16),
                "{text} over {ty:?}"
            );
        }
    }
    out
}

/// Runs `ptxas` over the (name, text, target) jobs on four threads: each must compile.
fn compile_all(dir: &std::path::Path, jobs: Vec<(String, String, u32)>) {
    let jobs = std::sync::Mutex::new(jobs);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                // The guard is consumed by `and_then`: no lock is held while ptxas runs.
                while let Some((name, text, sm)) = jobs.lock().ok().and_then(|mut j| j.pop()) {
                    check(dir, &name, &text, sm);
                }
            });
        }
    });
}

/// Every generated module compiles with `ptxas` (the driver's compiler): each expression
/// for the float types and bool outputs, each kernel shape the layout can give it
/// ([`shapes_for`]), for sm_90 (and the first
/// shape of each expression for sm_70 and sm_80), with the library's stored sm_70 PTX.
#[test]
#[ignore = "needs ptxas (scripts/setup-toolchain): scripts/test --toolchain runs it"]
fn generated_kernels_compile_with_ptxas() {
    let lib = lib();
    let dir = std::env::temp_dir().join(format!("sa-t1-ptxas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    let mut types = FLOAT_TYPES.to_vec();
    types.push(([F32, F32, F32], Some(Bool)));
    let mut jobs = Vec::new();
    for (x, t, p) in programs(&types) {
        let lib = crate::expr::tier1::lib_for(&p, &lib);
        for (s, shape) in shapes_for(&sizes_of(&p)).iter().enumerate() {
            // The older targets once per expression.
            let sms: &[u32] = if t == 0 && s == 0 {
                &[90, 80, 70]
            } else {
                &[90]
            };
            for &sm in sms {
                jobs.push((
                    format!("e{x}_t{t}_s{s}_sm{sm}"),
                    module(&p, *shape, sm, &lib),
                    sm,
                ));
            }
        }
    }
    compile_all(&dir, jobs);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every generated reduction kernel compiles with `ptxas`: each expression over the
/// float types, each reduction, tree depths from one slot to a block, one and several
/// kept dimensions, inputs read as vectors, strided and broadcast, one, two and four
/// slots a thread, for sm_90 (sm_70 and sm_80 on the first expression: the software
/// maximum and the bf16 rounding without `cvt`).
#[test]
#[ignore = "needs ptxas (scripts/setup-toolchain): scripts/test --toolchain runs it"]
fn generated_reduction_kernels_compile_with_ptxas() {
    use strided_apply_expr::reduce::ReduceOp;
    let lib = lib();
    let dir = std::env::temp_dir().join(format!("sa-t1-red-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    let types = &FLOAT_TYPES;
    let shape = |op, shift, nkept, unit, bcast, per, col_y| {
        Shape::Reduce(RedShape {
            op,
            shift,
            nkept,
            unit,
            bcast,
            per,
            col_y,
        })
    };
    let shapes = [
        shape(ReduceOp::Sum, 8, 1, 0b1110, 0, 0, 0),
        shape(ReduceOp::Mean, 5, 2, 0b0010, 0b0100, 2, 0),
        shape(ReduceOp::Amax, 0, 1, 0, 0b1000, 2, 0),
        shape(ReduceOp::Amin, 8, 3, 0b0100, 0b0010, 1, 0),
        shape(ReduceOp::Prod, 3, 6, 0, 0, 1, 0),
        shape(ReduceOp::Sum, 8, 2, 0, 0b0100, 0, 8),
        shape(ReduceOp::Amax, 3, 1, 0, 0, 0, 32),
    ];
    let mut jobs = Vec::new();
    for (x, t, p) in programs(types) {
        let lib = crate::expr::tier1::lib_for(&p, &lib);
        for (s, shape) in shapes.iter().enumerate() {
            // Every shape for the first expression, one each after it.
            if x > 0 && s != (x + t) % shapes.len() {
                continue;
            }
            let sms: &[u32] = if x == 0 && t < 3 {
                &[90, 80, 70]
            } else {
                &[90]
            };
            for &sm in sms {
                jobs.push((
                    format!("r{x}_t{t}_s{s}_sm{sm}"),
                    module(&p, *shape, sm, &lib),
                    sm,
                ));
            }
        }
    }
    assert!(jobs.len() > 60, "{} kernels", jobs.len());
    compile_all(&dir, jobs);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Expressions of integer math over `a`, `b`, `c` covering every op the generator
/// writes for integers, then conversions between integers, floats and bool.
const INT_EXPRS: &[&str] = &[
    "a * b + c - neg(a) + abs(b) * sign(c) + relu(a)",
    "trunc_div(a, b) + remainder(a, c) + floor_divide(b, c) + fmod(c, a)",
    "bitwise_left_shift(a, b) + bitwise_right_shift(c, b) + bitwise_xor(bitwise_and(a, b), bitwise_or(b, c)) + bitwise_not(a)",
    "where(logical_and(lt(a, b), ge(b, c)), a, where(logical_or(ne(a, c), le(a, b)), b, c)) + where(logical_xor(eq(a, b), gt(b, c)), a, b)",
    "clamp(a, b, c) + minimum(a, b) + maximum(b, c) + fmin(a, c) + fmax(b, a) + fma(a, b, c) + floor(a) + round(b) + ceil(c) + trunc(a)",
    "where(isfinite(a), a, b) + where(signbit(b), c, a) + where(logical_or(isnan(c), isinf(a)), b, c) + where(logical_or(isposinf(b), isneginf(c)), a, c)",
];

/// Conversions: floats to every integer type (saturating), integers to each other and
/// to floats, bool both ways.
const CAST_EXPRS: &[&str] = &[
    "i32(f32(a) * 2.5) + i32(f64(b) * 1e10) + i32(u8(c)) + i32(i8(a)) + i32(i16(b)) + i32(u16(c)) + i32(u32(a)) + i32(i64(b))",
    "i64(f32(a) * 1e20) + i64(u64(b)) + i64(bool(c)) + i64(u8(f64(c) * 300)) + i64(u32(f32(a) - 7))",
    "u64(f64(a) - 1e19) + u64(u32(b)) + u64(i8(f32(c))) + u64(u16(f64(a))) + u64(i16(f32(b) * 1e3))",
    "f64(a) * 0.5 + f64(u64(b)) + f32(i64(c)) + f32(u8(a)) + f32(bool(b)) + f64(i8(c))",
    "where(bool(a), i8(f32(b) * 100.0), i16(f64(c) * 1e6)) + u16(f32(a) * -3.0) + u8(bool(c))",
];

/// Comparisons and bitwise ops of bools.
const BOOL_EXPRS: &[&str] = &[
    "logical_or(logical_xor(lt(a, b), ge(b, c)), logical_and(gt(a, c), le(c, b)))",
    "bitwise_not(bitwise_and(a, bitwise_or(b, bitwise_xor(a, c))))",
];

/// Input types and output type of the bool programs.
const BOOL_TYPES: [([ElemType; 3], Option<ElemType>); 3] = [
    ([Bool, Bool, Bool], None),
    ([Bool, Bool, Bool], Some(U8)),
    ([Bool, Bool, Bool], Some(F32)),
];

/// Input types and output type (`None`: the expression's) of the integer programs.
const INT_TYPES: [([ElemType; 3], Option<ElemType>); 11] = [
    ([I32, I32, I32], None),
    ([I64, I64, I64], None),
    ([U8, U8, U8], None),
    ([U32, U32, U32], None),
    ([U64, U64, U64], None),
    ([I8, I16, U16], None),
    ([I8, I8, I8], Some(I8)),
    ([U16, U16, U16], Some(U16)),
    ([I16, I16, I16], None),
    ([I32, I32, I32], Some(Bool)),
    ([I64, U8, I32], Some(F64)),
];

/// Each of `exprs` compiled for each of `types` where it type-checks (bitwise ops and
/// shifts take integers only): (expression index, type index, program), every one a
/// program the generator writes.
fn int_programs(
    exprs: &[&str],
    types: &[([ElemType; 3], Option<ElemType>)],
) -> Vec<(usize, usize, Program)> {
    let mut out = Vec::new();
    for (x, t, p) in compile_each(exprs, types) {
        let Ok(p) = p else {
            continue;
        };
        let (ty, o) = types[t];
        assert!(supports(&p), "{} over {ty:?} to {o:?}", exprs[x]);
        out.push((x, t, p));
    }
    out
}

/// The element sizes of `p`'s operands, output first.
fn sizes_of(p: &Program) -> Vec<usize> {
    std::iter::once(p.out)
        .chain(p.inputs[..p.n_inputs as usize].iter().copied())
        .map(|c| elem(c).size())
        .collect()
}

/// The shapes the ptxas tests compile for operands of `sizes` bytes (the paired tiles
/// where every operand has 2-byte elements, as the layout takes them).
fn shapes_for(sizes: &[usize]) -> Vec<Shape> {
    let mut shapes = vec![
        Shape::Vector {
            lanes: 4,
            bcast: 0,
            rows: false,
            per: 1,
        },
        Shape::Vector {
            lanes: 8,
            bcast: 0b0100,
            rows: true,
            per: 1,
        },
        Shape::Vector {
            lanes: 2,
            bcast: 0b1010,
            rows: false,
            per: 4,
        },
        Shape::Strided { rank: 1 },
        Shape::Strided { rank: 3 },
        Shape::Tiled {
            pair: false,
            staged: 0b1010,
            words: 0,
        },
    ];
    if sizes.iter().all(|&s| s == 2) {
        shapes.push(Shape::Tiled {
            pair: true,
            staged: 0b0010,
            words: 0b1100,
        });
    }
    shapes
}

/// Every generated module of integer math compiles with `ptxas`: each integer
/// expression for every integer math type (and `i8`, `i16`, `u16` in `I32`), bool and
/// float outputs, the conversions, comparisons and bitwise ops of bools, on the vector,
/// strided and tiled shapes, for sm_90
/// (the first shape of each program also for sm_70 and sm_80).
#[test]
#[ignore = "needs ptxas (scripts/setup-toolchain): scripts/test --toolchain runs it"]
fn integer_kernels_compile_with_ptxas() {
    let dir = std::env::temp_dir().join(format!("sa-t1-int-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    let mut programs = int_programs(INT_EXPRS, &INT_TYPES);
    let casts = int_programs(CAST_EXPRS, &INT_TYPES);
    programs.extend(
        casts
            .into_iter()
            .map(|(x, t, p)| (x + INT_EXPRS.len(), t, p)),
    );
    let bools = int_programs(BOOL_EXPRS, &BOOL_TYPES);
    let at = INT_EXPRS.len() + CAST_EXPRS.len();
    programs.extend(bools.into_iter().map(|(x, t, p)| (x + at, t, p)));
    assert!(programs.len() > 80, "{} programs", programs.len());
    let mut jobs = Vec::new();
    for (x, t, p) in programs {
        for (s, shape) in shapes_for(&sizes_of(&p)).iter().enumerate() {
            let sms: &[u32] = if s == 0 { &[90, 80, 70] } else { &[90] };
            for &sm in sms {
                jobs.push((
                    format!("i{x}_t{t}_s{s}_sm{sm}"),
                    module(&p, *shape, sm, ""),
                    sm,
                ));
            }
        }
    }
    compile_all(&dir, jobs);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Tier 1 compiles integer programs of every integer type, conversions included; what
/// it does not write stays on the interpreter: an integer or `f64` value rounded to a
/// 16-bit float, an 8-bit float operand; expression reductions take float math only.
#[test]
fn supports_integer_math_but_not_rounding_to_16_bit_floats() {
    let compile = |text: &str, ty: [ElemType; 2], out: Option<ElemType>| {
        let e = Expr::parse(text).expect("parses");
        *e.compile(&[("a", Arg::Tensor(ty[0])), ("b", Arg::Tensor(ty[1]))], out)
            .expect("compiles")
            .program()
    };
    for ty in [I32, I64, U32, U8, U64, I8, I16, U16] {
        let p = compile("a + b", [ty, ty], None);
        assert!(supports(&p), "{ty:?}");
        assert!(!supports_reduce(&p), "{ty:?}");
        assert!(supports(&compile("a * b", [ty, F32], None)), "{ty:?}");
        assert!(supports(&compile("a - b", [ty, ty], Some(F64))), "{ty:?}");
        assert!(
            supports(&compile("lt(a, b)", [ty, ty], Some(Bool))),
            "{ty:?}"
        );
        // Integer math rounded to a 16-bit float goes through `f32` rounded to odd.
        assert!(!supports(&compile("a + b", [ty, ty], Some(F16))), "{ty:?}");
        assert!(
            !supports(&compile("bf16(a) * b", [ty, BF16], None)),
            "{ty:?}"
        );
        // Through `f32` first, as the program says: written.
        assert!(
            supports(&compile("f32(a) + b", [ty, ty], Some(F16))),
            "{ty:?}"
        );
    }
    for text in [
        "lt(a, b)",
        "ge(a, b)",
        "logical_and(bitwise_not(a), b)",
        "logical_and(logical_not(a), b)",
    ] {
        assert!(supports(&compile(text, [Bool, Bool], None)), "{text}");
    }
    let p = compile("i32(a) + b", [F32, I32], None);
    assert!(supports(&p) && !supports_reduce(&p));
    let p = compile("f32(a) + b", [F8E4M3, F32], None);
    assert!(!supports(&p));
    let p = compile("a + b", [F64, F64], Some(F16));
    assert!(!supports(&p), "f64 to f16 rounds through f32 to odd");
    let p = compile("a + b", [F32, F32], None);
    assert!(supports(&p) && supports_reduce(&p));
}

/// Every normalisation row kernel compiles with `ptxas`: softmax, log-softmax, logsumexp
/// (one value a row), RMS norm with a weight row and layer norm with weight and bias, in
/// `f32`, `bf16` and `f64`, read once (a few rounds, in registers) and looping over rounds
/// and groups, vectors and strided, one and several kept dimensions, for sm_90 (sm_70 on
/// the first: the software maximum).
#[test]
#[ignore = "needs ptxas (scripts/setup-toolchain): scripts/test --toolchain runs it"]
fn normalisation_kernels_compile_with_ptxas() {
    use super::NormShape;
    use crate::expr::Norm;
    let lib = lib();
    let dir = std::env::temp_dir().join(format!("sa-t1-norm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    let programs: [(&str, &[&str]); 5] = [
        ("m = amax(a); e = exp(a - m); e / sum(e)", &["a"]),
        ("m = amax(a); d = a - m; d - log(sum(exp(d)))", &["a"]),
        ("m = amax(a); m + log(sum(exp(a - m)))", &["a"]),
        ("a * rsqrt(mean(a * a) + 1e-6) * w", &["a", "w"]),
        (
            "mu = mean(a); d = a - mu; d * rsqrt(mean(d * d) + 1e-5) * w + b",
            &["a", "w", "b"],
        ),
    ];
    let mut jobs = Vec::new();
    for (x, (text, names)) in programs.iter().enumerate() {
        for (t, elem) in [F32, BF16, F64].into_iter().enumerate() {
            let args: Vec<(&str, Arg)> = names.iter().map(|n| (*n, Arg::Tensor(elem))).collect();
            let c = Norm::parse(text)
                .expect("parses")
                .compile(&args, None)
                .expect("compiles");
            let ops = 1 + names.len() as u8;
            let all = (1u16 << ops) - 1;
            // (kept dims, unit, bcast, shared, cached rounds, threads, adjacent, span):
            // long rows read once, by vectors of two chunks with a shared weight row, short
            // rows by a warp (four slot sets), by half a warp, by two warps, and the loop.
            let shapes = [
                (1u8, all, 0u16, 0u16, 4u8, 256u16, 1u8, 256u16),
                (1, all, 0, all & !3, 2, 128, 2, 256),
                (2, 0, 0, 0, 1, 32, 1, 128),
                (1, all & !1, 0, 0, 1, 16, 1, 16),
                (1, all, 0, 0, 1, 64, 1, 256),
                (3, 0, 0, 0, 0, 256, 1, 256),
                (1, all, 0, 0, 0, 128, 2, 256),
            ];
            for (s, &(nkept, unit, bcast, shared, cached, threads, adjacent, span)) in
                shapes.iter().enumerate()
            {
                let shape = NormShape {
                    ops,
                    nkept,
                    unit,
                    bcast,
                    shared,
                    cached,
                    rowwise: c.is_rowwise(),
                    wide: elem == F64,
                    threads,
                    adjacent,
                    span,
                };
                let (probe, programs) = c.row_module(shape, 90, "");
                let lib = if programs.iter().any(super::calls_lib) {
                    crate::expr::tier1::lib_for_all(&programs, &lib)
                } else {
                    String::new()
                };
                let _ = probe;
                let sms: &[u32] = if x == 0 && t == 0 && s == 0 {
                    &[90, 70]
                } else {
                    &[90]
                };
                for &sm in sms {
                    let (text, _) = c.row_module(shape, sm, &lib);
                    jobs.push((format!("n{x}_t{t}_s{s}_sm{sm}"), text, sm));
                }
            }
        }
    }
    compile_all(&dir, jobs);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The row kernel's tree schedule ([`super::norm::levels`]) over every thread shape it
/// takes (threads × adjacent slots × slot sets, at most `SLOTS` slots) gives, for every
/// count of used slots, the library's tree ([`gpu_kernels::reduce::tree`]): each thread's
/// slots simulated level by level as the kernel combines them, with an order-sensitive
/// combine.
#[test]
fn the_row_kernels_tree_schedule_is_the_librarys_tree() {
    use super::norm::{levels, Level};
    use gpu_kernels::reduce::{tree, Reduce};
    #[derive(Clone, Copy)]
    struct Mix;
    impl Reduce<u64> for Mix {
        type Acc = u64;
        type Out = u64;
        fn first(&self, x: u64, _: u32) -> u64 {
            x
        }
        fn fold(&self, a: u64, x: u64, _: u32) -> u64 {
            self.combine(a, x)
        }
        fn combine(&self, a: u64, b: u64) -> u64 {
            a.wrapping_mul(1_000_003).wrapping_add(b ^ 0x9e37_79b9)
        }
        fn finish(&self, a: u64, _: u32) -> u64 {
            a
        }
        fn empty(&self) -> Option<u64> {
            None
        }
        fn placeholder(&self) -> u64 {
            u64::MAX
        }
    }
    let slots = strided_apply_expr::reduce::SLOTS;
    let mut shapes = 0;
    for threads in (0..=8).map(|b| 1u32 << b) {
        for adjacent in [1u32, 2, 4] {
            for sets in [1u32, 2, 4] {
                let span = threads * adjacent * sets;
                if span > slots {
                    continue;
                }
                shapes += 1;
                let sched = levels(threads, adjacent, sets);
                for used in 1..=span {
                    let slot = |tl: u32, k: u32, j: u32| tl * adjacent + k + threads * adjacent * j;
                    // acc[tl][j][k]: slot `slot(tl, k, j)`'s value (its index + 1), or the
                    // placeholder where it receives nothing.
                    let mut acc: Vec<Vec<Vec<u64>>> = (0..threads)
                        .map(|tl| {
                            (0..sets)
                                .map(|j| {
                                    (0..adjacent)
                                        .map(|k| {
                                            let l = slot(tl, k, j);
                                            if l < used {
                                                l as u64 + 1
                                            } else {
                                                u64::MAX
                                            }
                                        })
                                        .collect()
                                })
                                .collect()
                        })
                        .collect();
                    for level in &sched {
                        match *level {
                            Level::Sets { s } => {
                                let step = s / (threads * adjacent);
                                for a in acc.iter_mut().take(threads as usize).enumerate() {
                                    let (tl, a) = a;
                                    for j in 0..step {
                                        for k in 0..adjacent {
                                            if slot(tl as u32, k, j) + s < used {
                                                let o = a[(j + step) as usize][k as usize];
                                                let x = &mut a[j as usize][k as usize];
                                                *x = Mix.combine(*x, o);
                                            }
                                        }
                                    }
                                }
                            }
                            Level::Threads { d, .. } => {
                                let before = acc.clone();
                                for tl in 0..d {
                                    for k in 0..adjacent {
                                        if slot(tl, k, 0) + d * adjacent < used {
                                            let o = before[(tl + d) as usize][0][k as usize];
                                            let x = &mut acc[tl as usize][0][k as usize];
                                            *x = Mix.combine(*x, o);
                                        }
                                    }
                                }
                            }
                            Level::Adjacent { s } => {
                                for k in 0..s {
                                    if k + s < used {
                                        let o = acc[0][0][(k + s) as usize];
                                        let x = &mut acc[0][0][k as usize];
                                        *x = Mix.combine(*x, o);
                                    }
                                }
                            }
                        }
                    }
                    let mut v: Vec<u64> = (1..=used as u64).collect();
                    assert_eq!(
                        Some(acc[0][0][0]),
                        tree(&Mix, &mut v),
                        "{threads} threads × {adjacent} adjacent × {sets} sets, {used} used"
                    );
                }
            }
        }
    }
    assert!(shapes > 20, "{shapes} shapes");
}
