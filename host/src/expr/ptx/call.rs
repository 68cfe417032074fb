//! The library's float functions: a call of one ([`Gen::call`]), or its body in place of the
//! call where it is straight-line code ([`leaf`]).

use super::emit::Gen;
use super::types::Ft;
use std::fmt::Write;

impl Gen {
    /// The library's device function `name` on `x` and `y`: its body in place where it is
    /// straight-line code ([`leaf`]: the same instructions, so the same bits, without the
    /// call's register traffic), else a call.
    pub(super) fn call(&mut self, ft: &Ft, name: &str, x: &str, y: &str) -> String {
        let (t, b) = (ft.t, if ft.f64 { "b64" } else { "b32" });
        let out = self.fl(ft);
        if let Some(body) = leaf(&self.lib, name) {
            let body = body
                .replace(&format!("[{name}_param_0]"), x)
                .replace(&format!("[{name}_param_1]"), y)
                .replace("[func_retval0]", &out);
            emit!(self, "{{");
            self.s.push_str(&body);
            emit!(self, "}}");
            return out;
        }
        emit!(self, "{{");
        emit!(self, ".param .{b} t1a; .param .{b} t1b; .param .{b} t1r;");
        emit!(self, "st.param.{t} [t1a], {x};");
        emit!(self, "st.param.{t} [t1b], {y};");
        emit!(self, "call.uni (t1r), {name}, (t1a, t1b);");
        emit!(self, "ld.param.{t} {out}, [t1r];");
        emit!(self, "}}");
        out
    }
}

/// The body of library function `name` as code to paste in place of a call, where it is
/// straight-line: no branch, label, call or memory but its parameters (`ld.param` of
/// `[name_param_0]` and `[name_param_1]`) and its result (`st.param` of `[func_retval0]`),
/// `ret` last. Its registers are renamed (`%r5` → `%ir5`, declared in the pasted scope),
/// its parameter loads and result store become `mov`s: the caller replaces the bracketed
/// parameter and result names with registers. `None` otherwise.
pub(super) fn leaf(lib: &str, name: &str) -> Option<String> {
    // The definition: `name(` … `)` then `{`, the body to the matching `}`.
    let mut from = 0;
    let body = loop {
        let at = from + lib[from..].find(name)?;
        from = at + name.len();
        let rest = lib[from..].trim_start();
        let Some(params) = rest.strip_prefix('(') else {
            continue;
        };
        let after = params[params.find(')')? + 1..].trim_start();
        if let Some(b) = after.strip_prefix('{') {
            break &b[..b.find('}')?];
        }
    };
    if body.contains('{') {
        return None;
    }
    let lines: Vec<&str> = body
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .collect();
    let (last, code) = lines.split_last()?;
    if *last != "ret;" {
        return None;
    }
    let rename = |l: &str| l.replace('%', "%i");
    let mut out = String::new();
    for l in code {
        let word = l.split_whitespace().next().unwrap_or("");
        let op = word.split('.').next().unwrap_or("");
        let (param, result) = (l.contains("_param_"), l.contains("func_retval0"));
        let memory = [
            "ld", "st", "ldu", "atom", "red", "call", "bra", "ret", "cvta", "prefetch",
        ];
        if l.starts_with(".reg") {
            let _ = writeln!(out, "{}", rename(l));
        } else if op == "ld" && word.starts_with("ld.param.") && param {
            // `ld.param.T %r3, [name_param_0];` → `mov.T %ir3, [name_param_0];`
            let _ = writeln!(
                out,
                "mov.{} {}",
                &word["ld.param.".len()..],
                rename(&l[word.len()..]).trim()
            );
        } else if op == "st" && word.starts_with("st.param.") && result {
            // `st.param.T [func_retval0], %r17;` → `mov.T [func_retval0], %ir17;`
            let _ = writeln!(
                out,
                "mov.{} {}",
                &word["st.param.".len()..],
                rename(&l[word.len()..]).trim()
            );
        } else if l.starts_with('.')
            || l.ends_with(':')
            || l.starts_with('@') && l.contains("bra")
            || memory.contains(&op)
            || param
            || result
            || l.contains("__")
            || l.contains('$')
        {
            return None;
        } else {
            let _ = writeln!(out, "{}", rename(l));
        }
    }
    Some(out)
}
