//! The operation names in `cycles_client_call`'s doc comment (`bindings/c/src/client.rs`,
//! and from there the cbindgen header): rewritten from core's operation table, so the C
//! documentation cannot list a different set of operations than the bridge accepts.

use crate::ir::Ir;
use crate::text::wrap;

const START: &str =
    "/// Runs one operation of the runtime plane (blocking): `op` is its name\n/// (";
const END: &str = ") and `args_json` its arguments";

/// `client.rs` with the list rewritten.
pub fn rewrite(source: &str, ir: &Ir) -> Result<String, String> {
    let at = source
        .find(START)
        .ok_or("bindings/c/src/client.rs: the doc of cycles_client_call moved")?;
    let from = at + START.len();
    let len = source[from..]
        .find(END)
        .ok_or("bindings/c/src/client.rs: the end of the operation list moved")?;
    let mut names: Vec<String> = ir.ops.iter().map(|o| format!("`{}`", o.method)).collect();
    names.push("`list_reservations_all`".into());
    // The first line starts after "/// (" (5 columns); the rest after "/// ".
    let text = format!("({}", names.join(", "));
    let wrapped = wrap(&text, 96)
        .lines()
        .map(str::to_string)
        .collect::<Vec<_>>()
        .join("\n/// ");
    let list = wrapped.strip_prefix('(').unwrap_or(&wrapped);
    Ok(format!(
        "{}{list}{}",
        &source[..from],
        &source[from + len..]
    ))
}
