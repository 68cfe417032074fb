//! The parser: the seed expression, precedence and associativity, typed errors at their
//! byte position, the nesting limit.

use super::*;

#[test]
fn the_seed_expression_parses_to_its_builder_form() {
    let (a, b, c) = (v("a"), v("b"), v("c"));
    let built = (a.clone() * b.clone()).sin() + c.sqrt() + a.cos() / (b.cos() + 2).log();
    assert_eq!(parse("sin(a*b) + sqrt(c) + cos(a)/log(cos(b)+2)"), built);
    // Spacing does not matter; function names and casts build the same nodes.
    assert_eq!(
        parse("  sin( a * b )+sqrt(c)+cos(a) / log(cos(b) + 2)  "),
        built
    );
    assert_eq!(parse("div(a, b)"), v("a") / v("b"));
    assert_eq!(parse("trunc_div(a, b)"), v("a").trunc_div(v("b")));
    assert_eq!(parse("f16(a)"), v("a").cast(F16));
    assert_eq!(parse("bfloat16(a)"), v("a").cast(BF16));
    assert_eq!(parse("where(c, a, 1.5)"), Expr::where_(v("c"), v("a"), 1.5));
    assert_eq!(parse("a % 3"), v("a") % 3);
}

#[test]
fn precedence_and_associativity() {
    let (a, b, c) = (v("a"), v("b"), v("c"));
    // `-a**2` is `-(a**2)`; `**` is right-associative.
    assert_eq!(parse("-a**2"), -(a.clone().pow(2)));
    assert_eq!(
        parse("a ** b ** c"),
        a.clone().pow(b.clone().pow(c.clone()))
    );
    assert_eq!(parse("2 ** -1"), Expr::int(2).pow(-1));
    // Left-associative sums and products; `/` is true division, then `*`.
    assert_eq!(parse("a - b - c"), (a.clone() - b.clone()) - c.clone());
    assert_eq!(parse("a / b * c"), (a.clone() / b.clone()) * c.clone());
    assert_eq!(parse("a + b * c"), a.clone() + b.clone() * c.clone());
    // Comparisons bind tighter than `&`, `&` tighter than `|`, `!` tighter than both.
    assert_eq!(
        parse("a < b & c"),
        a.clone().lt(b.clone()).logical_and(c.clone())
    );
    assert_eq!(
        parse("!a | b"),
        a.clone().logical_not().logical_or(b.clone())
    );
    assert_eq!(
        parse("a && b || c"),
        a.clone().logical_and(b.clone()).logical_or(c.clone())
    );
    assert_eq!(parse("~a"), a.clone().logical_not());
    // Negative literals stay literals; `-x` of a name is `neg`.
    assert_eq!(parse("-2"), Expr::int(-2));
    assert_eq!(parse("-2.5"), Expr::float(-2.5));
    assert_eq!(parse("-0.0").node(), &Node::Float(-0.0));
    assert!(matches!(parse("-0.0").node(), Node::Float(x) if x.is_sign_negative()));
    assert_eq!(parse("-a"), -a.clone());
    assert_eq!(parse("+a"), a.clone());
    // Numbers: underscores, exponents, leading dot; `true`/`false`.
    assert_eq!(parse("1_000"), Expr::int(1000));
    assert_eq!(parse("1e3"), Expr::float(1000.0));
    assert_eq!(parse(".5"), Expr::float(0.5));
    assert_eq!(parse("true | False"), Expr::bool(true).logical_or(false));
    // Comparisons do not chain.
    let e = Expr::parse("a < b < c").unwrap_err();
    assert!(
        matches!(&e, Error::ExprSyntax { pos: 6, reason } if reason.contains("chain")),
        "{e:?}"
    );
    let e = Expr::parse("a == b != c").unwrap_err();
    assert!(matches!(e, Error::ExprSyntax { pos: 7, .. }), "{e:?}");
}

/// The position and reason of a syntax error.
fn syntax_error(text: &str) -> (usize, String) {
    match Expr::parse(text) {
        Err(Error::ExprSyntax { pos, reason }) => (pos, reason),
        other => panic!("`{text}`: expected a syntax error, got {other:?}"),
    }
}

#[test]
fn parse_errors_are_typed_with_their_byte_position() {
    // Unexpected character, named whole even when it is not ASCII.
    let (pos, reason) = syntax_error("a + $b");
    assert_eq!(pos, 4);
    assert!(reason.contains("unexpected character `$`"), "{reason}");
    let (pos, reason) = syntax_error("a + é");
    assert_eq!(pos, 4);
    assert!(reason.contains("`é`"), "{reason}");
    assert_eq!(syntax_error("a # b").0, 2);
    // Unbalanced parentheses.
    let (pos, reason) = syntax_error("(a + b");
    assert_eq!(pos, 6);
    assert!(reason.contains("expected `)`"), "{reason}");
    let (pos, reason) = syntax_error("a + b)");
    assert_eq!(pos, 5);
    assert!(reason.contains("after the expression"), "{reason}");
    assert_eq!(syntax_error("sin(a").0, 5);
    assert_eq!(syntax_error("((a)").0, 4);
    // Unknown function: its name, position, and every known name.
    match Expr::parse("a + frob(b)") {
        Err(Error::ExprUnknown { name, pos, known }) => {
            assert_eq!((name.as_str(), pos), ("frob", 4));
            for n in [
                "sin",
                "trunc_div",
                "where",
                "clamp",
                "f32",
                "bf16",
                "u8",
                "bool",
            ] {
                assert!(known.split(", ").any(|k| k == n), "{n} not in {known}");
            }
        }
        other => panic!("{other:?}"),
    }
    // Wrong argument counts, at the function's name.
    let (pos, reason) = syntax_error("a + sin(a, b)");
    assert_eq!(pos, 4);
    assert!(reason.contains("takes 1 argument(s), not 2"), "{reason}");
    let (pos, reason) = syntax_error("where(a)");
    assert_eq!(pos, 0);
    assert!(reason.contains("takes 3"), "{reason}");
    let (pos, reason) = syntax_error("1 + f32(a, b)");
    assert_eq!(pos, 4);
    assert!(reason.contains("takes 1 argument"), "{reason}");
    assert_eq!(syntax_error("max()").0, 0);
    // Trailing tokens.
    let (pos, reason) = syntax_error("a b");
    assert_eq!(pos, 2);
    assert!(reason.contains("unexpected `b`"), "{reason}");
    assert_eq!(syntax_error("2a").0, 1);
    // Empty text, or nothing after an operator.
    let (pos, reason) = syntax_error("");
    assert_eq!(pos, 0);
    assert!(reason.contains("the end"), "{reason}");
    assert_eq!(syntax_error("   ").0, 3);
    assert_eq!(syntax_error("a +").0, 3);
    assert_eq!(syntax_error("a * * b").0, 4);
    // Numbers: too big for i64, malformed.
    let (pos, reason) = syntax_error("a + 99999999999999999999");
    assert_eq!(pos, 4);
    assert!(reason.contains("64-bit"), "{reason}");
    assert_eq!(parse("9223372036854775807"), Expr::int(i64::MAX));
    assert_eq!(syntax_error("a + 1e").0, 4);
    assert_eq!(syntax_error("1.2.3").0, 0);
}

#[test]
fn nesting_deeper_than_the_limit_is_an_error() {
    let nested = |n: usize| format!("{}a{}", "(".repeat(n), ")".repeat(n));
    parse(&nested(60));
    let (pos, reason) = syntax_error(&nested(100));
    assert!(reason.contains("nested deeper than 64"), "{reason}");
    // At the parenthesis that goes over (the 64th opens the 65th level) or the next.
    assert!((63..=64).contains(&pos), "{pos}");
    // Prefix operators and powers nest too.
    assert!(syntax_error(&format!("{}a", "-".repeat(100)))
        .1
        .contains("nested"));
    assert!(syntax_error(&format!("{}a", "!".repeat(100)))
        .1
        .contains("nested"));
    assert!(syntax_error(&vec!["a"; 100].join("**"))
        .1
        .contains("nested"));
    assert!(
        syntax_error(&format!("{}a{}", "sin(".repeat(100), ")".repeat(100)))
            .1
            .contains("nested")
    );
    // Text over 64 KiB.
    let (pos, reason) = syntax_error(&"a+".repeat(40_000));
    assert_eq!(pos, 1 << 16);
    assert!(reason.contains("longer"), "{reason}");
}
