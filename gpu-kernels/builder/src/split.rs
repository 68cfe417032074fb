//! Splits one PTX module into small modules, one per kernel family
//! ([`strided_apply_image::family_of`]): each holds the family's entry points and what
//! they reference (device functions, globals, the shared-memory declaration), in the
//! original order, without comments.

use std::collections::{BTreeMap, HashMap, HashSet};

/// The header of a PTX text (up to and including the `.address_size` line) and the rest.
pub fn split_header(ptx: &str) -> (&str, &str) {
    match ptx.find(".address_size") {
        Some(i) => {
            let end = ptx[i..].find('\n').map_or(ptx.len(), |n| i + n + 1);
            ptx.split_at(end)
        }
        None => ("", ptx),
    }
}

/// The header's directives only (`.version`, `.target`, `.address_size`), one a line.
pub fn header_directives(header: &str) -> String {
    header
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with('.'))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[derive(Debug)]
struct Item {
    /// The symbol it defines or declares (`None` for anything unnamed).
    name: Option<String>,
    entry: bool,
    text: String,
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == '$' || c == '%'
}
fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '$'
}

fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || loop {
        let start = rest.find(is_ident_start)?;
        let tail = &rest[start..];
        let len = tail[1..]
            .find(|c| !is_ident(c))
            .map_or(tail.len(), |n| n + 1);
        let preceded = rest[..start].chars().next_back().is_some_and(is_ident);
        rest = &tail[len..];
        if !preceded {
            return Some(&tail[..len]);
        }
    })
}

fn strip_comment(line: &str) -> &str {
    line.find("//").map_or(line, |i| &line[..i]).trim_end()
}

/// The symbol a top-level statement defines: the name after `.entry` / `.func` (past a
/// return-parameter list), or for data the last identifier before `[`, `=` or `;`.
fn symbol(text: &str) -> (Option<String>, bool) {
    let words: Vec<&str> = identifiers(text).collect();
    if let Some(k) = words.iter().position(|w| *w == "entry" || *w == "func") {
        let entry = words[k] == "entry";
        let after = &text[text
            .find(if entry { ".entry" } else { ".func" })
            .unwrap_or(0)..];
        let after = after
            .trim_start_matches(".entry")
            .trim_start_matches(".func")
            .trim_start();
        // `.func (.param .b64 func_retval0) name(`: skip the return list.
        let after = if after.starts_with('(') {
            after.find(')').map_or(after, |i| &after[i + 1..])
        } else {
            after
        };
        return (identifiers(after).next().map(str::to_string), entry);
    }
    let decl = text.split('=').next().unwrap_or(text);
    let decl = decl.split('[').next().unwrap_or(decl);
    (identifiers(decl).last().map(str::to_string), false)
}

/// The top-level statements of a PTX body (no header), comments removed.
fn items(body: &str) -> Vec<Item> {
    let mut items = Vec::new();
    let mut lines = body.lines();
    while let Some(first) = lines.next() {
        let code = strip_comment(first);
        if code.trim().is_empty() {
            continue;
        }
        let mut text = String::new();
        let mut depth = 0i64;
        let mut line = code;
        loop {
            if !line.trim().is_empty() {
                text.push_str(line);
                text.push('\n');
            }
            depth += line.matches('{').count() as i64 - line.matches('}').count() as i64;
            let t = line.trim();
            if depth <= 0 && (t.ends_with(';') || t.ends_with('}')) {
                break;
            }
            match lines.next() {
                Some(l) => line = strip_comment(l),
                None => break,
            }
        }
        let (name, entry) = symbol(&text);
        items.push(Item { name, entry, text });
    }
    items
}

/// One family's PTX body (no header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FamilyPtx {
    pub body: String,
    /// Its entry points.
    pub kernels: Vec<String>,
}

/// Splits a PTX body into families. Every entry point lands in exactly one family; each
/// family carries every symbol its entries reach.
pub fn families(body: &str) -> BTreeMap<String, FamilyPtx> {
    let items = items(body);
    let symbols: HashSet<&str> = items.iter().filter_map(|i| i.name.as_deref()).collect();
    // Symbol -> the items that declare or define it, and what each references.
    let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
    let refs: Vec<Vec<&str>> = items
        .iter()
        .enumerate()
        .map(|(k, item)| {
            if let Some(n) = item.name.as_deref() {
                by_name.entry(n).or_default().push(k);
            }
            let mut r: Vec<&str> = identifiers(&item.text)
                .filter(|w| symbols.contains(w) && Some(*w) != item.name.as_deref())
                .collect();
            r.sort_unstable();
            r.dedup();
            r
        })
        .collect();
    let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (k, item) in items.iter().enumerate() {
        if let (true, Some(name)) = (item.entry, &item.name) {
            groups
                .entry(strided_apply_image::family_of(name).to_string())
                .or_default()
                .push(k);
        }
    }
    groups
        .into_iter()
        .map(|(family, entries)| {
            let mut keep: HashSet<usize> = entries.iter().copied().collect();
            let mut stack = entries.clone();
            while let Some(k) = stack.pop() {
                for r in &refs[k] {
                    for &j in by_name.get(r).into_iter().flatten() {
                        if keep.insert(j) {
                            stack.push(j);
                        }
                    }
                }
            }
            // Unnamed statements (none seen in practice) go to every family.
            let mut body = String::new();
            for (k, item) in items.iter().enumerate() {
                if keep.contains(&k) || item.name.is_none() {
                    body.push_str(&item.text);
                }
            }
            let kernels = entries
                .iter()
                .filter_map(|&k| items[k].name.clone())
                .collect();
            (family, FamilyPtx { body, kernels })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = "//\n// Generated\n//\n\n.version 7.8\n.target sm_90\n.address_size 64\n\n\
        // Start of file scope inline assembly\n.extern .shared .align 16 .b8 smem_dyn[];\n\n\
        .func  (.param .b64 func_retval0) helper\n(\n\t.param .b64 helper_param_0\n)\n;\n\
        .global .align 4 .b8 table[2] = {1, 2};\n\
        .global .align 1 .b8 unused[1] = {0};\n\
        \t// .globl\tadd_f32_c\n.visible .entry add_f32_c(\n\t.param .u64 p\n)\n{\n\tret; // done\n}\n\n\
        .visible .entry add_f32_t(\n\t.param .u64 p\n)\n{\n\tmov.u64 %rd1, smem_dyn;\n\tret;\n}\n\
        .visible .entry sin_f64_c(\n\t.param .u64 p\n)\n{\n\tcall.uni (retval0), helper, (param0);\n\tret;\n}\n\
        .func  (.param .b64 func_retval0) helper(\n\t.param .b64 helper_param_0\n)\n{\n\tmov.u64 %rd2, table;\n\tret;\n}\n";

    #[test]
    fn families_carry_what_they_reference() {
        let (header, body) = split_header(PTX);
        assert_eq!(
            header_directives(header),
            ".version 7.8\n.target sm_90\n.address_size 64\n"
        );
        let fams = families(body);
        assert_eq!(fams.keys().collect::<Vec<_>>(), ["add_f32", "sin_f64"]);
        let add = &fams["add_f32"];
        assert_eq!(add.kernels, ["add_f32_c", "add_f32_t"]);
        assert!(add.body.contains("smem_dyn[]"), "{}", add.body);
        assert!(!add.body.contains("helper") && !add.body.contains("table"));
        assert!(
            !add.body.contains("//"),
            "comments are stripped: {}",
            add.body
        );
        let sin = &fams["sin_f64"];
        assert_eq!(sin.kernels, ["sin_f64_c"]);
        // The declaration, the definition and the global the definition reads, in order.
        let decl = sin.body.find("helper\n(").expect("declaration");
        let table = sin.body.find("table[2]").expect("global");
        let def = sin.body.find("helper(\n").expect("definition");
        assert!(decl < table && table < def, "{}", sin.body);
        assert!(!sin.body.contains("unused") && !sin.body.contains("add_f32"));
        // Only what is referenced: sin_f64 does not use shared memory.
        assert!(!sin.body.contains("smem_dyn"));
    }

    #[test]
    fn identifiers_are_whole_words() {
        let ids: Vec<&str> = identifiers("call.uni (r), helper2, (%rd1); x$y _z").collect();
        assert_eq!(ids, ["call", "uni", "r", "helper2", "%rd1", "x$y", "_z"]);
    }
}
