//! What the host knows of one op's kernels: their names in one PTX module ([`KernelNames`]),
//! by launch variant ([`Variant`]), or the program that runs in their place ([`ProgramOf`]).
//! [`kernels!`](crate::kernels) writes them; the launchers and run-time dispatch read them.

/// Kernel variants, in the order the planner prefers them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// 16-byte vector loads and stores: every operand dense in the same order, or one axis
    /// or rows of unit-stride elements (a broadcast row, a sliced outer axis), all 16-byte
    /// aligned; inputs may have element stride 2 (`A[:, ::2]`).
    Vec,
    /// Shared-memory tiles for operands that disagree on their fastest axis (apply2/apply3).
    Tiled,
    /// Every operand dense in the same order. No kernel of its own: the launcher runs it
    /// as [`Vec`](Variant::Vec) where every operand is 16-byte aligned, otherwise as one
    /// axis of unit strides ([`D1`](Variant::D1), in 32-bit pieces beyond 2^31 elements);
    /// the CPU twin walks it as one run.
    Contig,
    /// One collapsed dimension, 32-bit index.
    D1,
    /// Two collapsed dimensions, 32-bit index.
    D2,
    /// Three collapsed dimensions, 32-bit index.
    D3,
    /// Up to [`MAX_DIMS`](crate::MAX_DIMS) dimensions, 32-bit index.
    Dn,
    /// Offsets or element count beyond 32 bits. No kernel of its own: the launcher runs
    /// the plan as pieces that fit 32-bit indices (the host's `Plan::split32`), with the
    /// variants above; the CPU twin walks it with 64-bit offsets.
    Dn64,
}

impl Variant {
    pub const ALL: [Variant; 6] = [
        Variant::Contig,
        Variant::D1,
        Variant::D2,
        Variant::D3,
        Variant::Dn,
        Variant::Dn64,
    ];
}

/// An op that has no kernels of its own: the host runs the expression program of op id
/// `op` for `types` (output first) in their place (a `kernels!` line marked `@program`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProgramOf {
    /// The op id whose program runs (the line's first name part: `add`, `exp`, `where_`).
    pub op: &'static str,
    /// The family name its kernels would have (`add_f32`).
    pub family: &'static str,
    /// The element types, output first.
    pub types: &'static [crate::elem::ElemType],
}

/// Names of one op's kernels in one PTX module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelNames {
    /// The crate that instantiated them (the module to load).
    pub module: &'static str,
    pub vec: &'static str,
    /// Empty for arities without a tiled variant (apply1, apply4).
    pub tiled: &'static str,
    pub d1: &'static str,
    pub d2: &'static str,
    pub d3: &'static str,
    pub dn: &'static str,
    /// Set for an op without kernels (every name above empty): the program that runs it.
    pub program: Option<ProgramOf>,
}

impl KernelNames {
    /// The names of an op of crate `module` that runs as program `op` over `types` (output
    /// first) in place of family `family`.
    pub const fn program(
        module: &'static str,
        op: &'static str,
        family: &'static str,
        types: &'static [crate::elem::ElemType],
    ) -> Self {
        KernelNames {
            module,
            vec: "",
            tiled: "",
            d1: "",
            d2: "",
            d3: "",
            dn: "",
            program: Some(ProgramOf { op, family, types }),
        }
    }

    /// The kernel of variant `v`; empty where there is none (`Tiled` of apply1 and
    /// apply4; `Contig` and `Dn64`, which the launcher runs through other variants).
    pub fn get(&self, v: Variant) -> &'static str {
        match v {
            Variant::Vec => self.vec,
            Variant::Tiled => self.tiled,
            // Run as `Vec` or `D1` (see `Variant::Contig`).
            Variant::Contig => "",
            Variant::D1 => self.d1,
            Variant::D2 => self.d2,
            Variant::D3 => self.d3,
            Variant::Dn => self.dn,
            // Split into 32-bit launches (see `Variant::Dn64`).
            Variant::Dn64 => "",
        }
    }
}
