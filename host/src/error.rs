//! Every way a call can fail, as one typed error.

use gpu_kernels::elem::ElemType;

/// Which operand an error is about: `out` or an input `a`, `b`, `c`, or the `view` being built.
pub type Operand = &'static str;

/// The library's error type. Messages name the operand and the reason.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("no CUDA driver library (libcuda) could be loaded: {0}")]
    NoDriver(String),
    #[error("no CUDA device with ordinal {ordinal} ({count} device(s) present)")]
    NoDevice { ordinal: usize, count: usize },
    #[error("module `{module}` has no code for this device (compute capability {major}.{minor}); built: {built}. A cubin runs on devices of its major version, PTX on devices at or above its version")]
    NoCodeForDevice {
        module: &'static str,
        major: i32,
        minor: i32,
        built: String,
    },
    #[error("module `{module}` is not registered with this Gpu (register its image first)")]
    ModuleNotRegistered { module: &'static str },
    #[error("the kernel image of module `{module}` is corrupt or truncated: {reason} (device compute capability {major}.{minor}; built: {built}); rebuild the crate that embeds it")]
    ImageCorrupt {
        module: &'static str,
        major: i32,
        minor: i32,
        built: String,
        reason: String,
    },
    #[error("module `{module}` has no kernel family `{family}` (device compute capability {major}.{minor}; built: {built})")]
    FamilyMissing {
        module: &'static str,
        family: &'static str,
        major: i32,
        minor: i32,
        built: String,
    },
    #[error("loading family `{family}` of module `{module}` ({target}) on compute capability {major}.{minor} failed: {source} (built: {built}; for PTX: is the driver older than the PTX?)")]
    ModuleLoad {
        module: &'static str,
        family: &'static str,
        target: strided_apply_image::Target,
        major: i32,
        minor: i32,
        built: String,
        source: cudarc::driver::DriverError,
    },
    #[error("kernel `{kernel}` is missing from module `{module}`: {source}")]
    KernelMissing {
        module: &'static str,
        kernel: &'static str,
        source: cudarc::driver::DriverError,
    },
    #[error("compiling an expression to machine code (tier 1, STRIDED_APPLY_EXPR_TIER=1) failed: {reason}")]
    ExprCompile { reason: String },
    #[error("launching kernel `{kernel}` failed: {source}")]
    Launch {
        kernel: &'static str,
        source: cudarc::driver::DriverError,
    },
    #[error("device out of memory allocating {bytes} bytes")]
    OutOfMemory { bytes: usize },
    #[error("CUDA driver error during {what}: {source}")]
    Driver {
        what: &'static str,
        source: cudarc::driver::DriverError,
    },
    #[error("{operand}: shape {shape:?}, strides {strides:?}, offset {offset} reach elements {min}..={max}, outside a buffer of {len} elements")]
    OutOfBounds {
        operand: Operand,
        shape: Vec<usize>,
        strides: Vec<isize>,
        offset: usize,
        min: i128,
        max: i128,
        len: usize,
    },
    #[error("{operand}: element count or offset arithmetic overflows for shape {shape:?}, strides {strides:?}")]
    Overflow {
        operand: Operand,
        shape: Vec<usize>,
        strides: Vec<isize>,
    },
    #[error("{operand}: shape {shape:?} cannot be broadcast to {target:?}")]
    Broadcast {
        operand: Operand,
        shape: Vec<usize>,
        target: Vec<usize>,
    },
    #[error("{operand}: {ndim} dimensions remain after collapsing, more than the maximum {max}")]
    RankTooHigh {
        operand: Operand,
        ndim: usize,
        max: usize,
    },
    #[error("{operand}: the output layout maps several indices to one element (shape {shape:?}, strides {strides:?})")]
    OverlappingOutput {
        operand: Operand,
        shape: Vec<usize>,
        strides: Vec<isize>,
    },
    #[error("{operand} shares memory with the output but not at the same element positions; use a copy (`.contiguous()`) of it")]
    PartialOverlap { operand: Operand },
    #[error("{operand}: element type {found} where {expected} is expected")]
    TypeMismatch {
        operand: Operand,
        expected: &'static str,
        found: &'static str,
    },
    #[error("{operand}: pointer {ptr:#x} is not aligned to {align} bytes")]
    Misaligned {
        operand: Operand,
        ptr: u64,
        align: usize,
    },
    #[error("{operand}: null pointer")]
    NullPointer { operand: Operand },
    #[error("{operand}: {reason}")]
    InvalidView { operand: Operand, reason: String },
    #[error("{operand}: {len} elements given for shape {shape:?} ({expected} needed)")]
    LengthMismatch {
        operand: Operand,
        len: usize,
        shape: Vec<usize>,
        expected: usize,
    },
    #[error("{operand} shares memory with the output of a stencil, which reads neighbours other threads write; write the result into a separate tensor")]
    StencilOverlap { operand: Operand },
    #[error("{operand} shares memory with the output of a reduction; write the result into a separate tensor")]
    ReduceOverlap { operand: Operand },
    #[error("{operand}: shape {found:?} is not the reduced shape: {dropped:?} drops the reduced axes, {keepdim:?} keeps them as size 1")]
    ReducedShape {
        operand: Operand,
        found: Vec<usize>,
        dropped: Vec<usize>,
        keepdim: Vec<usize>,
    },
    #[error(
        "{operand}: a reduction over no elements has no value for this op (min, max, argmin and argmax of nothing)"
    )]
    EmptyReduction { operand: Operand },
    #[error("reduction too large for 32-bit kernel indices: {reason}")]
    ReduceTooLarge { reason: String },
    #[error("{operand}: belongs to another Gpu handle (its buffer is ordered on another stream)")]
    WrongDevice { operand: Operand },
    #[error("no op `{op}` is instantiated (run-time dispatch); op ids: {known}")]
    UnknownOp { op: String, known: String },
    #[error("op `{op}` is not instantiated over {types}; instantiated: {available}")]
    NotInstantiated {
        op: String,
        types: String,
        available: String,
    },
    #[error(
        "op `{op}` has several output types for inputs {inputs} ({outputs}): name the output type"
    )]
    OutputTypeAmbiguous {
        op: String,
        inputs: String,
        outputs: String,
    },
    #[error("op `{op}` over {types} is instantiated by several kernel crates ({modules}); give their ops distinct ids")]
    AmbiguousOp {
        op: String,
        types: String,
        modules: String,
    },
    #[error("op `{op}` over {types} takes scalars {expected}; got {got} (a wrong count, or a value that does not convert exactly to the element type)")]
    BadScalars {
        op: &'static str,
        types: String,
        expected: String,
        got: String,
    },
    #[error("op `{op}` (family `{family}`) cannot be built at run time: its op type does not implement `gpu_kernels::dispatch::FromScalars`")]
    OpNotBuildable {
        op: &'static str,
        family: &'static str,
    },
    #[error("DLPack: null managed tensor (a capsule already consumed or freed?)")]
    DlpackNull,
    #[error(
        "DLPack: the managed tensor is version {major}.{minor}; this library reads major version 1"
    )]
    DlpackVersion { major: u32, minor: u32 },
    #[error("{operand}: DLPack dtype (code {code}, {bits} bits, {lanes} lanes) is {kind}: no element type for it (f32, f64, f16, bf16, i32, i64, u32, u8, bool)")]
    DlpackDtype {
        operand: Operand,
        code: u8,
        bits: u8,
        lanes: u16,
        kind: &'static str,
    },
    #[error("{operand}: DLPack tensor on device type {device_type}, id {device_id}; {expected} is needed")]
    DlpackDevice {
        operand: Operand,
        device_type: i32,
        device_id: i32,
        expected: String,
    },
    #[error("expression syntax error at byte {pos}: {reason}")]
    ExprSyntax { pos: usize, reason: String },
    #[error("expression: unknown function `{name}` at byte {pos}; known: {known}")]
    ExprUnknown {
        name: String,
        pos: usize,
        known: String,
    },
    #[error("expression: {reason}")]
    ExprType { reason: String },
    #[error("expression: {what} {got} over the limit of {limit}")]
    ExprLimit {
        what: &'static str,
        limit: usize,
        got: usize,
    },
    #[error("expression argument `{name}`: {reason}")]
    ExprBind { name: String, reason: String },
    #[error("{operand}: the DLPack producer marked this tensor read-only")]
    DlpackReadOnly { operand: Operand },
    #[error("op `{op}` takes {expected} input(s); {got} given")]
    InputCount {
        op: &'static str,
        expected: usize,
        got: usize,
    },
}

impl Error {
    pub(crate) fn type_mismatch(operand: Operand, expected: ElemType, found: ElemType) -> Self {
        Error::TypeMismatch {
            operand,
            expected: expected.name(),
            found: found.name(),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
