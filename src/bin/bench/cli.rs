//! The command line ([`Args`]).

/// What the command line asks for.
pub(super) struct Args {
    /// `--quick`: smaller sizes.
    pub(super) quick: bool,
    /// `--only NAME`: only the group NAME, or the groups with a case whose name contains NAME
    /// (see `GROUPS`); the copy ceiling always runs.
    pub(super) only: Option<String>,
    /// `--cold LABEL`: one cold start in this process, nothing else.
    pub(super) cold: Option<String>,
    /// `--cold-expr dense|broadcast`: one cold start of the expression engine, nothing else.
    pub(super) cold_expr: Option<String>,
    /// `--release-pool`: the driver's default release threshold (freed memory goes back at
    /// every synchronisation) instead of the library's (the pool keeps it), for comparison.
    pub(super) release_pool: bool,
    /// `--diet`: every family with an expression program, kernel against program
    /// (`bench/diet.rs`; `--only` filters families by name), nothing else.
    pub(super) diet: bool,
}

impl Args {
    pub(super) fn parse() -> Args {
        let args: Vec<String> = std::env::args().collect();
        let after = |flag: &str| args.iter().skip_while(|a| *a != flag).nth(1).cloned();
        Args {
            quick: args.iter().any(|a| a == "--quick"),
            only: after("--only"),
            cold: after("--cold"),
            cold_expr: after("--cold-expr"),
            release_pool: args.iter().any(|a| a == "--release-pool"),
            diet: args.iter().any(|a| a == "--diet"),
        }
    }
}
